//! Integration tests of the crashsweep crate, in one binary so they link once.

mod clients;
mod io_points;
mod forkserver;
mod process;
mod unchanged;
