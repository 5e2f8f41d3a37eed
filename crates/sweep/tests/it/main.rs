//! Integration tests of the sweep crate, in one binary so they link once
//! (`tests/env.rs` stays a binary of its own: it sets environment
//! variables no other test may see).

#[cfg(feature = "cli")]
mod async_tasks;
#[cfg(feature = "cli")]
mod cli;
mod disks;
mod dyn_subject;
mod first_sweep;
mod nets;
mod panic_abort;
mod runner;
mod share;
mod states;
