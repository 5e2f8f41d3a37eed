//! Integration tests of the triage binary, in one binary so they link once.

mod chaos;
mod chaos_http;
mod common;
mod die_and_resume;
mod disk_full;
mod holes;
mod inputs_and_restarts;
mod live;
mod lock_and_terminal;
#[path = "../../../durable/tests/it/pg_cluster.rs"]
mod pg_cluster;
mod restart_windows;
mod signal_and_resume;
mod stores;
mod true_answers;
