//! Integration tests of the designs crate, in one binary so they link once.

mod beyond;
mod crash_sweep;
mod enumerated;
mod faults;
mod shared_tails;
