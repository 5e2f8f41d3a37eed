//! Integration tests of the triage-tools crate, in one binary so they link once.

mod http;
mod tracker_tools;
