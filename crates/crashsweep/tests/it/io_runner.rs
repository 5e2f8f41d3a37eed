//! Everything the runner offers applies to I/O points: the unchanged
//! Python payouts example (no client, no named point) swept with
//! `--io-points` through shards and `crashsweep merge`, on 1 thread and 2,
//! with progress lines on standard error; one scenario rerun by its I/O
//! point's name with its timeline; `--artifacts` holding the final world's
//! files (and a service's directory); `--format json`.
//!
//! Few points are selected (`--io-ops`, `--io-paths`) to keep the tests
//! small: a scenario is two Python lives and a Python judge.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether python3 runs; under CI its absence fails.
fn python() -> bool {
    let runs = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        assert!(
            !sweep::report::snapshot::under_ci(std::env::var("CI").ok().as_deref()),
            "python3 is not installed, and CI must sweep the unchanged example"
        );
        eprintln!("skipped: python3 is not installed");
    }
    runs
}

/// The ledger's writes and fsyncs: `write ledger.txt#k` (before payment k
/// is written: passes) and `fsync ledger.txt#k` (paid, not saved: fails).
const LEDGER: [&str; 5] = [
    "--io-points",
    "--io-ops",
    "write,fsync",
    "--io-paths",
    "ledger.txt",
];

/// `crashsweep ARGS -- python3 payouts.py` (the unchanged example) with
/// the example judge, in the empty template `world`.
fn payouts(world: &Path, args: &[&str]) -> Output {
    let root = root();
    Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .args(args)
        .arg("--world")
        .arg(world)
        .arg("--judge")
        .arg(format!(
            "python3 {}",
            root.join("clients/examples/judge.py").display()
        ))
        .arg("--")
        .arg("python3")
        .arg(root.join("clients/examples/unchanged/payouts.py"))
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn shards_merge_into_the_whole_table_and_progress_leaves_stdout_alone() {
    if !python() {
        return;
    }
    let world = tempfile::tempdir().unwrap();
    let whole = payouts(
        world.path(),
        &with(&LEDGER, &["--depth", "1", "--threads", "1"]),
    );
    let table = text(&whole.stdout);
    assert_eq!(whole.status.code(), Some(1), "{}", text(&whole.stderr));
    // Six scenarios, the three after a payment repeat it.
    let row = table
        .lines()
        .find(|l| l.contains("payouts.py"))
        .unwrap_or_else(|| panic!("no row in\n{table}"));
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["|", "payouts.py", "6", "3", "0", "|"],
        "{table}"
    );
    // Off a terminal, progress is summary lines on standard error; the
    // table is the same byte for byte, on 2 threads.
    let shown = payouts(
        world.path(),
        &with(
            &LEDGER,
            &[
                "--depth",
                "1",
                "--threads",
                "2",
                "--progress-every",
                "100ms",
            ],
        ),
    );
    let stderr = text(&shown.stderr);
    assert_eq!(text(&shown.stdout), table, "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("progress: payouts.py"))
        .collect();
    assert!(!lines.is_empty(), "no progress line in\n{stderr}");
    for l in lines {
        let clean = l.starts_with("progress: payouts.py: clean runs, ");
        // During level 1, or once every scenario is in (the sweep ending).
        let level = (l.starts_with("progress: payouts.py, level 1 of 1: ")
            || l.starts_with("progress: payouts.py: 6 of 6 scenarios, "))
            && l.contains(" of 6 scenarios, ")
            && l.contains(" scenarios/s, ");
        assert!(clean || level, "{l:?}");
        assert!(l.ends_with(" elapsed"), "{l:?}");
    }
    // The shards, merged, give the same table and the failures.
    let shards = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for k in 1..=2 {
        let part = format!("{k}/2");
        let out = payouts(
            world.path(),
            &with(
                &LEDGER,
                &["--depth", "1", "--partition", &part, "--format", "json"],
            ),
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        let file = shards.path().join(format!("shard-{k}.json"));
        std::fs::write(&file, &out.stdout).unwrap();
        files.push(file);
    }
    let merged = Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .arg("merge")
        .args(&files)
        .output()
        .unwrap();
    assert_eq!(text(&merged.stdout), table, "{}", text(&merged.stderr));
    assert_eq!(merged.status.code(), Some(1));
    let stderr = text(&merged.stderr);
    for k in 1..=3 {
        assert!(
            stderr.contains(&format!(
                "FAILED payouts.py / fsync ledger.txt#{k}: duplicates = 1"
            )),
            "{stderr}"
        );
    }
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn a_scenario_reruns_by_its_io_point_name_with_its_timeline() {
    if !python() {
        return;
    }
    let world = tempfile::tempdir().unwrap();
    let out = payouts(
        world.path(),
        &with(&LEDGER, &["--scenario", "fsync ledger.txt#2"]),
    );
    let timeline = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    for line in [
        "scenario: fsync ledger.txt#2\n",
        "life 1: crashed at fsync ledger.txt#2\n",
        "    fsync ledger.txt#2  ← crash\n",
        "life 2: finished\n",
        "judge: duplicates=1 missing=0\n",
        "was killed by signal 9 (SIGKILL) at fsync ledger.txt, before fsync(fd ",
        "FAILED: duplicates = 1",
    ] {
        assert!(timeline.contains(line), "{line:?} not in\n{timeline}");
    }
    // Before the payment is written, a crash loses nothing.
    let out = payouts(
        world.path(),
        &with(
            &LEDGER,
            &["--scenario", "write ledger.txt#2", "--format", "json"],
        ),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sc = &v["scenarios"][0];
    assert_eq!(sc["scenario"], "write ledger.txt#2");
    assert_eq!(sc["passed"], true);
    assert_eq!(sc["lives"][0]["crash"], "write ledger.txt#2");
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn artifacts_hold_the_final_worlds_files_and_json_names_the_reruns() {
    if !python() {
        return;
    }
    let world = tempfile::tempdir().unwrap();
    let artifacts = tempfile::tempdir().unwrap();
    let out = payouts(
        world.path(),
        &[
            "--io-points",
            "--io-ops",
            "fsync",
            "--io-paths",
            "ledger.txt",
            "--depth",
            "1",
            "--format",
            "json",
            "--artifacts",
            artifacts.path().to_str().unwrap(),
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"][0]["once"], 3, "{v}");
    assert_eq!(v["rows"][0]["duplicates"], 3, "{v}");
    let failures = v["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 3, "{v}");
    assert!(
        failures[0]["rerun"]
            .as_str()
            .unwrap()
            .contains("--scenario 'fsync ledger.txt#1' -- python3 "),
        "{v}"
    );
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(artifacts.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 3, "{dirs:?}");
    let first = &dirs[0];
    assert!(
        first.ends_with("001-payouts-py-fsync-ledger-txt-1"),
        "{first:?}"
    );
    // The final world's files themselves, not a listing: a crash after
    // alice's payment was written, and before its progress was saved,
    // pays her twice.
    let ledger = std::fs::read_to_string(first.join("world/ledger.txt")).unwrap();
    assert_eq!(
        ledger.lines().filter(|l| l.starts_with("alice ")).count(),
        2,
        "{ledger}"
    );
    assert!(first.join("world/state.json").is_file());
    assert!(first.join("logs/life-1.err").is_file());
    assert!(first.join("logs/life-2.out").is_file());
    assert!(!first.join("service").exists());
    let timeline = std::fs::read_to_string(first.join("timeline.txt")).unwrap();
    assert!(
        timeline.contains("fsync ledger.txt#1  ← crash"),
        "{timeline}"
    );
}

#[test]
fn artifacts_hold_the_services_directory() {
    // A service writing a file in its directory (its URL is never called);
    // the program renames a file, and its restart does nothing, so a crash
    // before the rename leaves `a` missing.
    let world = tempfile::tempdir().unwrap();
    let artifacts = tempfile::tempdir().unwrap();
    let args = [
        "--io-points",
        "--io-ops",
        "rename",
        "--depth",
        "1",
        "--service",
        "sh -c 'echo http://127.0.0.1:9; echo kept > svc.txt; exec sleep 600'",
        "--restart",
        "true",
        "--name",
        "rename",
        "--judge",
        "test -f a && echo '{\"missing\": 0}' || echo '{\"missing\": 1}'",
        "--world",
        world.path().to_str().unwrap(),
        "--artifacts",
        artifacts.path().to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo two > a.tmp && mv a.tmp a",
    ];
    let out = Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .args(args)
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let at = artifacts.path().join("001-rename-rename-a-tmp-a-1");
    // The same directory used again: the new copy replaces the old one.
    std::fs::write(at.join("world/stale"), "").unwrap();
    let again = Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .args(args)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1), "{}", text(&again.stderr));
    assert!(!at.join("world/stale").exists());
    assert_eq!(
        std::fs::read_to_string(at.join("service/svc.txt")).unwrap(),
        "kept\n",
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(at.join("world/a.tmp")).unwrap(),
        "two\n"
    );
    assert!(!at.join("world/a").exists());
}

/// Writes b, then a through a temporary file, makes d, removes b; a
/// restart does it again.
const SAVE: &str = "echo one > b && echo two > a.tmp && mv a.tmp a && mkdir -p d && rm -f b";

/// `crashsweep --io-points ARGS -- sh -c SAVE` in `world`, judged on `a`.
fn save(world: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .arg("--io-points")
        .args(args)
        .args(["--name", "save", "--world"])
        .arg(world)
        .args([
            "--judge",
            "test -f a && echo '{\"missing\": 0}' || echo '{\"missing\": 1}'",
            "--",
            "sh",
            "-c",
            SAVE,
        ])
        .output()
        .unwrap()
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn depth_2_on_1_thread_or_4_meets_its_snapshot_and_the_budget_refuses_early() {
    let world = tempfile::tempdir().unwrap();
    let one = save(world.path(), &["--depth", "2", "--threads", "1"]);
    let table = text(&one.stdout);
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
    // 7 hits: 7 single crashes and the double ones after each.
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.contains("save"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row[..3], ["|", "save", "7"], "{table}");
    let four = save(world.path(), &["--depth", "2", "--threads", "4"]);
    assert_eq!(text(&four.stdout), table);

    // The reviewed table: met, then differing (exit 1, the diff told).
    let reviewed = tempfile::tempdir().unwrap();
    let snap = reviewed.path().join("save.txt");
    std::fs::write(&snap, &table).unwrap();
    let snap_s = snap.to_str().unwrap();
    let met = save(world.path(), &["--depth", "2", "--snapshot", snap_s]);
    assert_eq!(met.status.code(), Some(0), "{}", text(&met.stderr));
    std::fs::write(&snap, table.replace("save", "sav ")).unwrap();
    let differs = save(world.path(), &["--depth", "2", "--snapshot", snap_s]);
    assert_eq!(differs.status.code(), Some(1));
    assert!(
        text(&differs.stderr).contains("--bless"),
        "{}",
        text(&differs.stderr)
    );

    // The budget: refused before any scenario runs.
    let refused = save(world.path(), &["--depth", "2", "--max-scenarios", "10"]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused.stdout).is_empty());
    let stderr = text(&refused.stderr);
    assert!(stderr.contains("more than the limit of 10"), "{stderr}");
}
