//! What a keyed call to the tracker service costs next to a checkpoint
//! save, on this machine's disk and loopback.
//!
//! Run with `cargo bench -p tracker --bench keyed_call`. Std only: 11
//! samples of N operations each, median microseconds per operation:
//!
//! * `save`: one crash-safe write of a 13 KB checkpoint-sized file with
//!   fsync (`durable::write::write_atomic`, what `Checkpoint::save` does under its
//!   serialisation);
//! * `keyed POST, new`: `POST /issues` with a new key, through
//!   `HttpTracker` on 127.0.0.1 (one connection per request), the server
//!   rewriting and fsyncing `tracker.json` before it answers;
//! * `keyed POST, replay`: the same key again (no write);
//! * `GET /config`: a read, the bare cost of a request.

use std::time::Instant;

use tracker::client::HttpTracker;
use tracker::service::{Options, Service};

const SAMPLES: usize = 11;
const N: usize = 20;

fn median_us(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn sample(mut op: impl FnMut(usize)) -> f64 {
    let mut per_op = Vec::with_capacity(SAMPLES);
    let mut i = 0;
    for _ in 0..SAMPLES {
        let t = Instant::now();
        for _ in 0..N {
            op(i);
            i += 1;
        }
        per_op.push(t.elapsed().as_secs_f64() * 1e6 / N as f64);
    }
    median_us(per_op)
}

fn main() {
    let tmp = tempfile::tempdir().expect("a temp dir");
    let save_dir = durable::DiskDir::new(tmp.path().join("checkpoints")).expect("a dir");
    let state = vec![b'x'; 13 * 1024];
    let opts = durable::write::WriteOptions {
        sync: true,
        points: false,
    };
    let save = sample(|_| {
        durable::write::write_atomic(&save_dir, "run.json", &state, opts).expect("a save");
    });

    let svc = Service::open(&tmp.path().join("tracker"), Options::keyed()).expect("a service");
    let server =
        tracker::http::spawn(svc, "127.0.0.1:0".parse().expect("an address")).expect("a server");
    let client = HttpTracker::connect(&server.url()).expect("a client");
    let new = sample(|i| {
        client
            .file_issue("bench", &format!("issue {i}"), Some(&format!("key-{i}")))
            .expect("a new issue");
    });
    let replay = sample(|_| {
        client
            .file_issue("bench", "issue 0", Some("key-0"))
            .expect("a replay");
    });
    let read = sample(|_| {
        HttpTracker::connect(&server.url()).expect("GET /config");
    });
    let issues = client.issues().expect("GET /issues").len();
    server.stop();

    println!("median of {SAMPLES} samples of {N}, microseconds per operation");
    println!("  save (13 KB, fsync)          {save:>9.1}");
    println!(
        "  keyed POST, new (fsync)      {new:>9.1}   {:.2}x a save",
        new / save
    );
    println!(
        "  keyed POST, replay           {replay:>9.1}   {:.2}x a save",
        replay / save
    );
    println!("  GET /config                  {read:>9.1}");
    println!("  ({issues} issues in tracker.json at the end)");
}
