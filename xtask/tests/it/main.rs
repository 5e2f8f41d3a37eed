//! Integration tests of the xtask crate, in one binary so they link once.

mod front_door;
mod readme;
mod refusals;
