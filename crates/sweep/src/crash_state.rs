//! The crash state, a dimension of the sweep: one type for every crate
//! (`crashpoint::scope::CrashState`), re-exported here.

pub use crashpoint::scope::{BadCrashState, CrashState};
