//! Integration tests of the outbox crate, in one binary so they link once.
//! (`tests/steps.rs` stays a binary of its own: its async step is refused
//! for points passed on plain threads, which are counted for whichever sweep
//! alone has lives running at the time, so no other sweep may run beside it.)

mod forgotten_boot;
mod outbox_sweep;
