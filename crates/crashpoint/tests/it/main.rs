//! Integration tests of the crashpoint crate, in one binary so they link
//! once. They share the process safely: each names its points apart and
//! reads only its own from a watch's tallies, none creates a watch another
//! reads, and none replaces the panic hook (`tests/mutants_hook.rs` does,
//! so it stays a binary of its own).

mod async_tasks;
mod mutants_tasks;
mod mutants_unscoped;
