//! Integration tests of the designs crate, in one binary so they link once.

mod beyond;
mod enumerated;
mod faults;
mod five_designs;
mod shared_tails;
