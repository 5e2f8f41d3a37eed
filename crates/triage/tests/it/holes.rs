//! The holes real faults found, each closed: a bad file is never
//! a fresh start, one task starts once at a time, a world is whole or
//! refused, a crash leaves nothing behind, modes do not depend on the
//! umask, bad input creates nothing, and the operator's messages can be
//! pasted.

use crate::common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::*;

const TASK: &str = "m1-done-after-delete";

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// Finding 3: a checkpoint entry that is not a regular file — a symbolic
/// link (even to a valid checkpoint), a directory, a FIFO — is an error
/// naming it, for `--task` and `--run` alike; never "no runs", never a
/// fresh run beside it, and a FIFO never blocks the command.
#[test]
fn a_checkpoint_that_is_not_a_regular_file_is_refused_by_task_and_by_run() {
    let task = task(TASK);
    for kind in ["a symbolic link", "a directory", "a FIFO"] {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let s = arg(&state);
        let run = killed_run(&state, TASK, "code_patch");
        let file = state.join(format!("{run}.json"));
        let aside = tmp.path().join("aside.json");
        fs::rename(&file, &aside).unwrap();
        match kind {
            "a symbolic link" => std::os::unix::fs::symlink(&aside, &file).unwrap(),
            "a directory" => fs::create_dir(&file).unwrap(),
            _ => mkfifo(&file),
        }
        let before = tree(&state);
        for args in [
            vec!["--task", TASK, "--state", s, "--approve", "off"],
            vec!["--run", run.as_str(), "--state", s, "--approve", "off"],
        ] {
            let out = triage_or_hang(&args, Duration::from_secs(60));
            out.expect_code(5).expect_stderr(&format!(
                "the checkpoint {} is {kind}, not a regular file",
                file.display()
            ));
            assert!(!out.stderr.contains("holds no runs"), "{}", out.stderr);
            assert!(!out.stdout.contains("new run"), "{kind}: {}", out.stdout);
            assert_eq!(
                tree(&state),
                before,
                "{kind} {args:?}: nothing created or removed"
            );
        }
        // Put the real file back: the run finishes, each effect once.
        fs::remove_file(&file)
            .or_else(|_| fs::remove_dir(&file))
            .unwrap();
        fs::rename(&aside, &file).unwrap();
        triage(&["--run", &run, "--state", s, "--approve", "off"]).expect_code(0);
        assert_each_effect_once(&task, &tracker(&state, &run));
    }
}

/// Finding 4: two `--task` starts at once on an empty state directory make
/// one run; the one that loses waits for the state directory's lock, finds
/// the run the other created and held, and exits "locked" (or, if the
/// first already paused, continues that same run).
#[test]
fn concurrent_starts_of_one_task_make_one_run() {
    for _ in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let s = arg(&state);
        let children: Vec<_> = (0..3)
            .map(|_| {
                command(&["--task", TASK, "--state", s, "--approve", "on"])
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut codes = Vec::new();
        for c in children {
            let out = c.wait_with_output().unwrap();
            codes.push(out.status.code());
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                matches!(out.status.code(), Some(3) | Some(4)),
                "exit {:?}: {stderr}",
                out.status
            );
        }
        assert_eq!(
            runs(&state).len(),
            1,
            "one run: {:?}; exits {codes:?}",
            runs(&state)
        );
        assert!(
            codes.contains(&Some(4)),
            "one of them paused at the gated call: {codes:?}"
        );
    }
}

/// Findings 5 and the world rule: a world missing a file it was created
/// with is refused by name, and the missing file is not replaced.
#[test]
fn a_world_missing_a_file_is_refused_not_replaced() {
    for missing in ["tracker.json", "task.json", "run.json", "workspace"] {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let s = arg(&state);
        let run = killed_run(&state, TASK, "code_patch");
        let path = world(&state, &run).join(missing);
        if path.is_dir() {
            fs::remove_dir_all(&path).unwrap();
        } else {
            fs::remove_file(&path).unwrap();
        }
        for args in [
            vec!["--task", TASK, "--state", s, "--approve", "off"],
            vec!["--run", run.as_str(), "--state", s, "--approve", "off"],
        ] {
            let out = triage(&args);
            out.expect_code(5)
                .expect_stderr(&format!("the world of run {run} is not whole"))
                .expect_stderr(&format!("{} is missing", path.display()));
            assert!(!path.exists(), "{missing} was not recreated");
            assert_eq!(runs(&state), vec![run.clone()], "no new run");
        }
    }
}

/// Finding 6: what killed writers leave — a half-built world, checkpoint
/// temp files (of this run and of a run never reopened), the tracker's and
/// the workspace patches' temp files, the write probe of a start killed
/// while it checked `--state` — is gone once the run is opened
/// again, and the directory holds nothing but the run's files. A world
/// without a checkpoint is not a leftover: it is a run (killed before its
/// first save, adopted by the next start; see `tests/it/restart_windows.rs`),
/// and one that is not whole is refused by name and left as it is.
#[test]
fn leftovers_of_killed_writers_are_removed_by_the_next_start() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let task = task(TASK);
    let run = killed_run(&state, TASK, "code_patch");
    let w = world(&state, &run);
    let other = format!("{run}x");
    let plant = [
        state.join(format!(".{other}.world.tmp/workspace/todo.rs")),
        state.join(format!(".{run}.json-Abc123.tmp")),
        state.join(format!(".{run}y.json-Abc123.tmp")),
        w.join(".tracker.json-Q1w2e3.tmp"),
        w.join("workspace/.todo.rs-Z9y8x7.tmp"),
        w.join("workspace/.new.rs-Z9y8x7.tmp"),
        state.join(".triage-probe-4194305"),
    ];
    for p in &plant {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "half").unwrap();
    }
    let out = triage(&["--task", TASK, "--state", s, "--approve", "off"]);
    out.expect_code(0).expect_stdout("cleanup");
    assert_eq!(runs(&state), vec![run.clone()]);
    let created = created_files(&task);
    let created: Vec<&str> = created.iter().map(String::as_str).collect();
    assert_eq!(tree(&state), one_run_files(&run, &task, &created));
    assert_each_effect_once(&task, &tracker(&state, &run));

    let half = state.join(format!("{other}.world/run.json"));
    fs::create_dir_all(half.parent().unwrap()).unwrap();
    fs::write(&half, "half").unwrap();
    let mut before = tree(&state);
    triage(&["--task", TASK, "--state", s, "--approve", "off"])
        .expect_code(5)
        .expect_stderr(&format!("corrupt run metadata {}", half.display()))
        .expect_stderr("it was left as it is");
    // (The clean-up took the run's lock to look at it: its lock file.)
    before.insert(format!("{other}.lock"));
    assert_eq!(
        tree(&state),
        before,
        "the world is neither removed nor used"
    );
}

/// Finding 8: every file the command writes is 0600 and every directory
/// 0700, even under `umask 000`.
#[test]
fn modes_do_not_depend_on_the_umask() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let with_umask_000 = |args: &[&str]| {
        let mut cmd = command(args);
        // SAFETY: umask is async-signal-safe and touches only this child.
        unsafe {
            cmd.pre_exec(|| {
                libc::umask(0);
                Ok(())
            });
        }
        cmd.stdin(Stdio::null()).output().unwrap()
    };
    let out = with_umask_000(&["--task", TASK, "--state", s, "--die-after", "code_patch"]);
    assert!(!out.status.success());
    let out = with_umask_000(&["--task", TASK, "--state", s, "--approve", "off"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut seen = 0;
    let mut check = |p: &Path| {
        let m = fs::symlink_metadata(p).unwrap();
        let want = if m.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(m.permissions().mode() & 0o777, want, "{}", p.display());
        seen += 1;
    };
    check(&state);
    for rel in tree(&state) {
        check(&state.join(rel.trim_end_matches('/')));
    }
    assert!(seen > 8, "{seen}");
}

/// Finding 7: bad input creates nothing, the state directory included, and
/// says what is wrong in words.
#[test]
fn bad_input_creates_nothing_and_says_why_in_words() {
    let tmp = tempfile::tempdir().unwrap();
    let new = tmp.path().join("new");
    let out = triage(&["--state", arg(&new), "--run", "nope"]);
    out.expect_code(2).expect_stderr("no run nope");
    assert!(
        !new.exists(),
        "--run on a missing state directory created it"
    );
    triage(&["--state", arg(&new), "--task", "nope"]).expect_code(2);
    assert!(!new.exists());

    let file = tmp.path().join("afile");
    fs::write(&file, "x").unwrap();
    let sub = file.join("sub");
    let out = triage(&["--state", arg(&sub), "--task", TASK]);
    out.expect_code(2).expect_stderr(&format!(
        "bad --state {}: {} is a regular file, not a directory",
        sub.display(),
        file.display()
    ));
    assert!(!out.stderr.contains("os error"), "{}", out.stderr);
    let out = triage(&["--state", arg(&file), "--task", TASK]);
    out.expect_code(2)
        .expect_stderr("is a regular file, not a directory");
    assert_eq!(fs::read_to_string(&file).unwrap(), "x");
    let entries: Vec<PathBuf> = fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(entries, vec![file]);
}

/// Finding 11: a hint names the program as it can be run — here, from a
/// cargo build directory, `cargo run -p triage --` — and pasting its
/// arguments continues the run; counts agree with their nouns.
#[test]
fn hints_can_be_pasted_and_counts_agree() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let out = triage(&["--task", TASK, "--state", s]);
    out.expect_code(4);
    let run = only_run(&state);
    let hint = out
        .stderr
        .lines()
        .find(|l| l.starts_with("triage: hint:"))
        .unwrap_or_else(|| panic!("no hint: {}", out.stderr));
    let command = format!("cargo run -p triage -- --state {s} --run {run} --approve off");
    assert!(hint.contains(&command), "{hint}");
    assert!(!hint.contains(": triage --state"), "{hint}");
    let pasted: Vec<&str> = command
        .strip_prefix("cargo run -p triage -- ")
        .unwrap()
        .split(' ')
        .collect();
    let out = triage(&pasted);
    out.expect_code(0);
    for wrong in [" 1 turns", " 1 restarts", "1 check(s)"] {
        assert!(!out.stdout.contains(wrong), "{wrong:?} in\n{}", out.stdout);
    }
    out.expect_stdout("1 restart,");
}

/// Finding 11: the restart limit's error says where to look and what the
/// options are.
#[test]
fn the_restart_limit_says_how_to_look_and_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    let s = arg(&state);
    let args = ["--task", TASK, "--state", s];
    for _ in 0..=10 {
        triage(&args).expect_code(4);
    }
    let run = only_run(&state);
    let out = triage(&args);
    out.expect_code(5)
        .expect_stderr("more than its limit of 10")
        .expect_stderr(&format!("Look at it: its checkpoint {s}/{run}.json"))
        .expect_stderr(&format!("its world {s}/{run}.world/"))
        .expect_stderr(&format!("cargo run -p triage -- --task {TASK} --state {s}"));
}
