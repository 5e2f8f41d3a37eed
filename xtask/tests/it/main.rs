//! Integration tests of the xtask crate, in one binary so they link once.

mod readme;
mod refusals;
