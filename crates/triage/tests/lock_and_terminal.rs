//! Two real processes on one run, and a person at a (pseudo-)terminal.
//!
//! The first `triage` gets a pty as stdin, so `--approve on` asks at the
//! terminal before filing the issue and blocks there, holding the run's
//! lock. A second `triage` on the same run must get the "locked" exit code
//! and message at once. Then the test answers at the terminal and the
//! first run finishes.

mod common;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::*;

/// A pseudo-terminal: (master, slave).
fn openpty() -> (File, File) {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: the out-pointers are valid; name, termios and winsize may be
    // null.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned two fresh descriptors that nothing else owns.
    let (master, slave) = unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) };
    // The child must not inherit the master side.
    // SAFETY: fcntl on a descriptor we own.
    unsafe { libc::fcntl(master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    (master, slave)
}

/// A triage child whose stdin is a terminal, with its stderr read by a
/// thread, so the test can wait for the prompt.
struct AtTerminal {
    child: Child,
    master: File,
    stderr: mpsc::Receiver<Vec<u8>>,
    seen: String,
}

impl AtTerminal {
    fn spawn(args: &[&str]) -> AtTerminal {
        let (master, slave) = openpty();
        let mut child = Command::new(BIN)
            .args(args)
            .stdin(Stdio::from(slave))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        AtTerminal {
            child,
            master,
            stderr: rx,
            seen: String::new(),
        }
    }

    /// Wait until stderr shows `text` (the prompt has no newline).
    fn wait_for(&mut self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.seen.contains(text) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.stderr.recv_timeout(left) {
                Ok(chunk) => self.seen.push_str(&String::from_utf8_lossy(&chunk)),
                Err(_) => panic!("{text:?} never appeared on stderr; saw:\n{}", self.seen),
            }
        }
    }

    fn answer(&mut self, line: &str) {
        self.master.write_all(line.as_bytes()).unwrap();
        self.master.flush().unwrap();
    }

    fn finish(self) -> Out {
        let out = self.child.wait_with_output().unwrap();
        let mut stderr = self.seen;
        while let Ok(chunk) = self.stderr.recv_timeout(Duration::from_secs(5)) {
            stderr.push_str(&String::from_utf8_lossy(&chunk));
        }
        Out {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr,
        }
    }
}

const PROMPT: &str = "approve issue_file call call_06 with ";

#[test]
fn a_second_process_on_a_held_run_is_refused_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let task = task("m1-done-after-delete");

    let mut first = AtTerminal::spawn(&["--task", &task.name, "--state", s]);
    first.wait_for(PROMPT);
    let run = only_run(&state);
    let checkpoint_file = state.join(format!("{run}.json"));
    let before = std::fs::read(&checkpoint_file).unwrap();

    // By run ID, and by task (which picks the one unfinished run).
    for args in [
        vec!["--run", run.as_str(), "--state", s, "--approve", "off"],
        vec![
            "--task",
            task.name.as_str(),
            "--state",
            s,
            "--approve",
            "off",
        ],
    ] {
        let started = Instant::now();
        let second = triage(&args);
        let took = started.elapsed();
        second.expect_code(3).expect_stderr(&format!(
            "triage: error: run is locked by another process: {}",
            state.join(format!("{run}.lock")).display()
        ));
        assert!(took < Duration::from_secs(5), "the refusal took {took:?}");
        assert!(!second.stdout.contains("call "), "{}", second.stdout);
    }
    assert_eq!(
        std::fs::read(&checkpoint_file).unwrap(),
        before,
        "the second process wrote nothing"
    );

    first.answer("y\n");
    let out = first.finish();
    out.expect_code(0)
        .expect_stdout("decided   issue_file call_06: approved")
        .expect_stdout(&all_passed(&task));
    assert_each_effect_once(&task, &tracker(&state, &run));

    // The lock died with its holder: the run is free again (and done).
    triage(&["--run", &run, "--state", s]).expect_code(0);
}

#[test]
fn a_no_at_the_terminal_denies_the_call_and_the_checks_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);

    let mut first = AtTerminal::spawn(&["--task", "m1-done-after-delete", "--state", s]);
    first.wait_for(PROMPT);
    first.answer("n not filing today\n");
    let out = first.finish();
    out.expect_code(1)
        .expect_stdout("decided   issue_file call_06: denied: not filing today")
        .expect_stdout("checks    14 of 16 passed")
        .expect_stdout("  FAIL    issue \"todo: `done` after `rm` panics with index out of bounds\" filed once");
    let run = only_run(&state);
    assert_eq!(tracker(&state, &run).issues().len(), 2, "nothing filed");
}

#[test]
fn later_at_the_terminal_pauses_and_a_rerun_asks_again() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);

    let mut first = AtTerminal::spawn(&["--task", "m1-done-after-delete", "--state", s]);
    first.wait_for(PROMPT);
    first.answer("later\n");
    first
        .finish()
        .expect_code(4)
        .expect_stderr("issue_file call call_06 waits for a person's approval");

    let mut again = AtTerminal::spawn(&["--task", "m1-done-after-delete", "--state", s]);
    again.wait_for(PROMPT);
    again.answer("yes\n");
    again
        .finish()
        .expect_code(0)
        .expect_stdout("checks    16 of 16 passed");
}
