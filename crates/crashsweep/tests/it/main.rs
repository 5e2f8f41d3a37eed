//! Integration tests of the crashsweep crate, in one binary so they link once.

mod clients;
mod forkserver;
mod io_points;
mod io_runner;
mod langgraph;
mod power_cuts;
mod process;
mod stopped;
mod threads;
mod unchanged;
