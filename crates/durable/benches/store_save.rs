//! What one `Checkpoint::save` costs on each run store, synced as in
//! production: the file store (one fsynced rename per save), SQLite (WAL,
//! `synchronous = FULL`) and Postgres (a throwaway cluster with fsync on,
//! over a Unix socket), beside today's `Checkpoint` on a directory.
//!
//! Run with `cargo bench -p durable --bench store_save`. Std only: for each
//! store it takes 11 samples of N saves of a 4 KiB state and prints the
//! median microseconds per save. Without the Postgres server installed the
//! Postgres line says so and the rest still runs.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use durable::store::{FileStore, PostgresStore, RunStore, SqliteStore};
use durable::{Checkpoint, Durable, Options, RunId};
use serde::{Deserialize, Serialize};

#[path = "../tests/it/pg_cluster.rs"]
mod pg_cluster;

#[derive(Default, Serialize, Deserialize)]
struct State {
    step: u64,
    notes: Vec<String>,
}

impl Durable for State {}

const SAMPLES: usize = 11;
const SAVES: usize = 40;

fn state() -> State {
    State {
        step: 0,
        // About 4 KiB of JSON, like a short agent run's state.
        notes: (0..64)
            .map(|i| format!("tool result {i}: {}", "x".repeat(40)))
            .collect(),
    }
}

/// The median time of one save, over `SAMPLES` samples of `SAVES` saves.
fn median_save(mut save: impl FnMut(&mut State)) -> Duration {
    let mut s = state();
    save(&mut s); // warm up
    let mut samples: Vec<Duration> = (0..SAMPLES)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..SAVES {
                s.step += 1;
                save(black_box(&mut s));
            }
            start.elapsed() / SAVES as u32
        })
        .collect();
    samples.sort();
    samples[SAMPLES / 2]
}

fn on_store(store: Arc<dyn RunStore>) -> Duration {
    let run = RunId::parse("bench-run").expect("a run ID");
    let lease = Duration::from_secs(600);
    let mut opened =
        Checkpoint::<State>::open_store(store, &run, "bench", lease, Options::default(), state)
            .expect("open on the store");
    median_save(|s| opened.checkpoint.save(s).expect("a save"))
}

fn print(name: &str, d: Duration) {
    println!("{name:<40} {:>9.1} µs per save", d.as_secs_f64() * 1e6);
}

fn main() {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let run = RunId::parse("bench-run").expect("a run ID");
    let mut opened =
        Checkpoint::<State>::open_path(tmp.path().join("dir"), &run, Options::default())
            .expect("open in a directory");
    print(
        "Checkpoint on a directory (flock)",
        median_save(|s| opened.checkpoint.save(s).expect("a save")),
    );
    drop(opened);

    let files = FileStore::open(tmp.path().join("files")).expect("a file store");
    print("file store", on_store(Arc::new(files)));

    let sqlite = SqliteStore::open(tmp.path().join("runs.db")).expect("an SQLite store");
    print("SQLite (WAL, synchronous=FULL)", on_store(Arc::new(sqlite)));

    match pg_cluster::PgCluster::start(true) {
        Some(cluster) => {
            let pg = PostgresStore::connect(&cluster.conn("postgres")).expect("connect");
            print("Postgres (Unix socket, fsync on)", on_store(Arc::new(pg)));
        }
        None => println!("{:<40} skipped: no Postgres server", "Postgres"),
    }
}
