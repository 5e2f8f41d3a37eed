//! Integration tests of the tracker crate, in one binary so they link once.

mod binary;
mod faults;
mod fence;
mod http_contract;
#[cfg(all(feature = "serve", feature = "client"))]
mod mutants_client;
mod mutants_lib;
mod mutants_log;
mod mutants_store;
mod mutants_wire;
