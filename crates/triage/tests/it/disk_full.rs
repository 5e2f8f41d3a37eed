//! A full disk while the tracker saves an issue: the filing is an unknown
//! outcome, not a failed one, so the run does not finish without the issue;
//! once space is freed, the resumed run files it exactly once.
//!
//! Two ways to fill the disk: `TRIAGE_TRACKER_FAULTS` (a `Dir` that fails on
//! demand, `durable::testing::FaultDir`), and a real, small tmpfs mounted
//! over the run's world and filled up (skipped, saying why, where mounting
//! is not allowed).

use crate::common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use agent::state::Phase;
use common::*;

const TASK: &str = "a3-login-after-wake";

fn triage_with_faults(args: &[&str], faults: &str) -> Out {
    let mut cmd = command(args);
    cmd.env("TRIAGE_TRACKER_FAULTS", faults);
    let out = cmd.output().unwrap();
    Out {
        status: out.status,
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn a_disk_full_during_the_filing_files_the_issue_once_after_space_is_freed() {
    let task = task(TASK);
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    // The disk stays full for the filing and every retry the ladder makes.
    let full = "write#1,write#2,write#3,write#4,write#5,write#6";
    let out = triage_with_faults(&["--task", TASK, "--state", s, "--approve", "off"], full);
    assert_ne!(
        out.code(),
        Some(0),
        "the run must not finish without the issue"
    );
    out.expect_stderr("tracker.json");
    let run = only_run(&state);
    let call = task.first_call_of("issue_file");
    let st = checkpoint(&state, &run);
    assert_ne!(st.phase, Phase::Done);
    assert!(st.attempts.contains_key(&call.id), "the filing is marked");
    assert!(
        !st.results.contains_key(&call.id),
        "and not settled as failed"
    );

    // Space is freed: the resume settles the filing on the ladder (the key).
    let resumed = triage(&["--task", TASK, "--state", s, "--approve", "off"]);
    resumed.expect_code(0).expect_stdout(&all_passed(&task));
    assert_eq!(checkpoint(&state, &run).phase, Phase::Done);
    assert_each_effect_once(&task, &tracker(&state, &run));
}

#[test]
fn one_failed_save_of_the_filing_is_settled_in_the_same_life() {
    let task = task(TASK);
    for fault in ["write#1", "fsync#1", "rename#1", "fsync-dir#1", "create#1"] {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let s = arg(&state);
        let out = triage_with_faults(&["--task", TASK, "--state", s, "--approve", "off"], fault);
        out.expect_code(0).expect_stdout(&all_passed(&task));
        out.expect_stdout("outcome unknown");
        let run = only_run(&state);
        assert_each_effect_once(&task, &tracker(&state, &run));
    }
}

/// A tmpfs mounted at a path, unmounted when dropped.
struct Mounted(PathBuf);

impl Mounted {
    fn tmpfs(at: &Path, size: &str) -> Result<Mounted, String> {
        let out = Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(at)
            .output()
            .map_err(|e| format!("mount could not be started ({e})"))?;
        if !out.status.success() {
            return Err(format!(
                "cannot mount a tmpfs here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mounted(at.to_path_buf()))
    }

    /// `from` bind-mounted at `at` (an existing directory).
    fn bind(from: &Path, at: &Path) -> Result<Mounted, String> {
        let out = Command::new("mount")
            .arg("--bind")
            .arg(from)
            .arg(at)
            .output()
            .map_err(|e| format!("mount could not be started ({e})"))?;
        if !out.status.success() {
            return Err(format!(
                "cannot bind-mount here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Mounted(at.to_path_buf()))
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// Fill the file system under `dir` until a write fails with ENOSPC.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![0u8; 4096];
    loop {
        match f.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let _ = f.sync_all();
    path
}

#[test]
fn a_real_full_tmpfs_under_the_tracker_files_the_issue_once_after_space_is_freed() {
    let task = task(TASK);
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    // The run gets as far as its first search (killed before its result is
    // saved), so its world exists and nothing is filed yet.
    triage(&[
        "--task",
        TASK,
        "--state",
        s,
        "--die-after",
        "search",
        "--approve",
        "off",
    ])
    .expect_killed();
    let run = only_run(&state);
    let world = world(&state, &run);
    let saved = tmp.path().join("world-copy");
    copy_dir(&world, &saved);
    let mounted = match Mounted::tmpfs(&world, "512k") {
        Ok(m) => m,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    copy_dir(&saved, &world);
    // Only the tracker's file (and the run's metadata) on the small disk:
    // the workspace stays on the big one (bind-mounted: a world refuses a
    // workspace that is a symbolic link), so the patch is not what fails.
    std::fs::remove_dir_all(world.join("workspace")).unwrap();
    std::fs::create_dir(world.join("workspace")).unwrap();
    let bound = match Mounted::bind(&saved.join("workspace"), &world.join("workspace")) {
        Ok(m) => m,
        Err(why) => {
            println!("skipped: {why}");
            return;
        }
    };
    let filler = fill(&world);

    let out = triage(&["--task", TASK, "--state", s, "--approve", "off"]);
    assert_ne!(
        out.code(),
        Some(0),
        "the run must not finish without the issue"
    );
    let call = task.first_call_of("issue_file");
    let st = checkpoint(&state, &run);
    assert_ne!(st.phase, Phase::Done);
    assert!(
        !st.results.contains_key(&call.id),
        "the filing is not settled as failed"
    );

    std::fs::remove_file(filler).unwrap(); // space is freed
    let resumed = triage(&["--task", TASK, "--state", s, "--approve", "off"]);
    resumed.expect_code(0).expect_stdout(&all_passed(&task));
    assert_each_effect_once(&task, &tracker(&state, &run));
    drop(bound);
    drop(mounted);
}
