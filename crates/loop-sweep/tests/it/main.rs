//! Integration tests of the loop-sweep crate, in one binary so they link once.

mod loop_capture;
mod loop_enumerated;
mod loop_faults;
mod loop_http;
mod loop_http_tools;
mod loop_power;
mod loop_sweep;
mod zombie;
