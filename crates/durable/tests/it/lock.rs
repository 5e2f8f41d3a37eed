//! One process per run: the lock against another real process.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use durable::testing::MemDir;
use durable::{Error, Options};

use crate::{fast, open, run_id, Checkpoint};

/// Tells [`child_holds_the_lock`] which directory to lock; without it the
/// helper does nothing, so running ignored tests by hand is harmless.
const CHILD_DIR: &str = "DURABLE_TEST_LOCK_CHILD_DIR";
const READY: &str = "durable-lock-child: locked";
/// The helper test's name as the test harness knows it.
const CHILD_TEST: &str = "lock::child_holds_the_lock";
/// How long the child holds the lock if nobody kills it.
const CHILD_HOLD: Duration = Duration::from_secs(30);

/// Not a test of its own: the child process of
/// [`a_second_process_is_locked_out_until_the_first_dies`]. It opens the run,
/// says so on stdout, and holds the lock until it is killed.
#[test]
#[ignore = "helper: run by a_second_process_is_locked_out_until_the_first_dies"]
fn child_holds_the_lock() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let _opened =
        Checkpoint::open_path(&dir, &run_id("shared"), Options::default()).expect("child: open");
    println!("{READY}");
    std::thread::sleep(CHILD_HOLD);
}

/// Kills the child when the test ends, whatever happens.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_child(dir: &Path) -> KillOnDrop {
    // Re-run this very test binary, asking it for the helper test only. This
    // works under `cargo test` and `cargo nextest run` alike: both run test
    // binaries that take libtest's arguments.
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args([
            "--exact",
            CHILD_TEST,
            "--nocapture",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    KillOnDrop(child)
}

#[test]
fn a_second_process_is_locked_out_until_the_first_dies() {
    let t = tempfile::tempdir().unwrap();
    let run = run_id("shared");
    let mut child = spawn_child(t.path());

    // Wait for the child to hold the lock.
    let stdout = child.0.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    // libtest may print `test <name> ... ` on the same line first.
    let ready = lines
        .by_ref()
        .map_while(Result::ok)
        .any(|l| l.ends_with(READY));
    assert!(ready, "the child process never took the lock");

    match Checkpoint::open_path(t.path(), &run, Options::default()) {
        Err(Error::Locked { path }) => assert_eq!(path, t.path().join("shared.lock")),
        other => panic!("expected Locked while the child holds the run, got {other:?}"),
    }

    // SIGKILL: no destructor runs in the child; the kernel drops the lock.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let opened = Checkpoint::open_path(t.path(), &run, Options::default()).unwrap();
    assert!(opened.resumed);
    assert_eq!(opened.resumes, 1);
}

#[test]
fn a_second_open_in_the_same_process_is_locked_out() {
    let world = MemDir::new();
    let run = run_id("r");
    let first = open(&world, &run, fast()).unwrap();
    let before = crate::snapshot(&world);
    let e = open(&world, &run, fast()).unwrap_err();
    assert!(
        matches!(&e, Error::Locked { path } if path.to_str() == Some("mem:/r.lock")),
        "{e:?}"
    );
    assert!(e.to_string().contains("mem:/r.lock"), "{e}");
    // The loser read and wrote nothing.
    assert_eq!(crate::snapshot(&world), before);
    drop(first);
    assert_eq!(open(&world, &run, fast()).unwrap().resumes, 1);
}

#[test]
fn the_lock_is_taken_before_anything_is_read() {
    // A corrupt checkpoint of a locked run reports Locked, not Corrupt: the
    // loser never looked at the file.
    let world = MemDir::new();
    let run = run_id("r");
    let _held = durable::Dir::lock(&world, "r.lock").unwrap();
    durable::Dir::write(&world, "r.json", b"garbage").unwrap();
    assert!(matches!(
        open(&world, &run, fast()),
        Err(Error::Locked { .. })
    ));
}

#[test]
fn disk_open_in_the_same_process_is_locked_out() {
    let t = tempfile::tempdir().unwrap();
    let run = run_id("r");
    let _first = Checkpoint::open_path(t.path(), &run, fast()).unwrap();
    assert!(matches!(
        Checkpoint::open_path(t.path(), &run, fast()),
        Err(Error::Locked { .. })
    ));
}

/// Starts `true` again and again on a thread of its own until dropped: a
/// test process that runs a command (a build, a service) beside a sweep.
struct Spawner {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl Spawner {
    fn start() -> Spawner {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut n = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = Command::new("true").status();
                n += 1;
            }
            n
        });
        Spawner {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Spawner {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A checkpoint dropped (a life that returned or crashed) leaves its run
/// free at once, even while another thread of the process starts
/// children: a child forked before its `exec` holds a copy of every
/// descriptor. (Before, the copy kept the `flock`, and the restart failed
/// with "run is locked by another process" now and then.)
#[test]
fn a_child_started_by_another_thread_never_keeps_a_dropped_lock() {
    let t = tempfile::tempdir().unwrap();
    let _spawner = Spawner::start();
    let mut locked = 0;
    for i in 0..2000 {
        // A run restarts at most ten times: a new run every ten opens.
        let run = run_id(&format!("r{}", i / 10));
        match Checkpoint::open_path(t.path(), &run, fast()) {
            Ok(opened) => drop(opened),
            Err(Error::Locked { .. }) => locked += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(locked, 0, "of 2000 opens, each after the last was dropped");
}
