//! Integration tests of the durable crate, in one binary so they link once.

mod bad_input;
mod crash;
mod dir_conformance;
mod enumerated;
mod enumerated_sweep;
mod fence;
mod format;
mod lock;
mod mutants_checkpoint;
mod mutants_disk;
mod not_a_file;
mod pg_cluster;
mod points_on;
mod store_conformance;
mod store_sweep;
mod syscalls;

use std::sync::Arc;

use durable::testing::MemDir;
use durable::{Dir, Durable, Options, RunId};
use serde::{Deserialize, Serialize};

#[test]
fn public_types_can_cross_threads() {
    fn send_sync<T: Send + Sync + 'static>() {}
    send_sync::<Checkpoint>();
    send_sync::<Opened>();
    send_sync::<durable::checkpoint::Saved<State>>();
    send_sync::<durable::dir::LockGuard>();
    send_sync::<durable::DiskDir>();
    send_sync::<MemDir>();
    send_sync::<durable::Error>();
    send_sync::<durable::RunId>();
}

/// Options for tests: no fsync (a process crash cannot tear a file anyway),
/// the default restart limit.
pub fn fast() -> Options {
    Options {
        sync: false,
        ..Options::default()
    }
}

pub fn run_id(s: &str) -> RunId {
    RunId::parse(s).unwrap()
}

/// Open `run` in a clone of `world`, as a new process would.
pub fn open(world: &MemDir, run: &RunId, opts: Options) -> durable::Result<Opened> {
    Checkpoint::open(Arc::new(world.clone()), run, opts)
}

/// Every file in `dir` with its contents, to check that nothing changed.
pub fn snapshot(dir: &dyn Dir) -> Vec<(String, Vec<u8>)> {
    dir.list()
        .unwrap()
        .into_iter()
        .map(|n| {
            let data = dir.read(&n).unwrap().unwrap_or_default();
            (n, data)
        })
        .collect()
}

/// Names of the leftover temp files in `dir`.
pub fn temp_files(dir: &dyn Dir) -> Vec<String> {
    dir.list()
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// A state with every field set.
pub fn populated(_run: &RunId) -> State {
    State {
        phase: Phase::Tools,
        turns: 3,
        notes: vec!["triage the crashes ✓".into(), "filed #12".into()],
        dollars: 0.1 + 0.2,
        answer: None,
    }
}

/// The tests' own state type, as a user of the store would write one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct State {
    pub phase: Phase,
    #[serde(default)]
    pub turns: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default)]
    pub dollars: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
}

/// Where the tests' run stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    #[default]
    Model,
    Tools,
    Done,
}

impl Durable for State {
    fn is_finished(&self) -> bool {
        self.phase == Phase::Done
    }

    fn check(&self) -> Result<(), String> {
        if self.dollars.is_finite() {
            Ok(())
        } else {
            Err(format!(
                "dollars is {}, which JSON cannot hold",
                self.dollars
            ))
        }
    }
}

/// The store holding the tests' state.
pub type Checkpoint = durable::Checkpoint<State>;
pub type Opened = durable::Opened<State>;
