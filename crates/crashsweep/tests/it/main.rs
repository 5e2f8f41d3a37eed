//! Integration tests of the crashsweep crate, in one binary so they link once.

mod clients;
mod forkserver;
mod io_points;
mod langgraph;
mod process;
mod threads;
mod unchanged;
