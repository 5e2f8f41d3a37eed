//! The payouts examples with their crash points removed
//! (`clients/examples/unchanged/`: Python, Go with its raw system calls,
//! Node), swept unchanged with I/O points at depth 1: the buggy version
//! fails where a crash falls between a payment and the save of its
//! progress, and the fixed version passes every scenario.
//!
//! The runtimes are needed; as in `clients.rs`, a missing one fails the
//! test under CI and is reported and skipped elsewhere.

use std::path::{Path, PathBuf};
use std::process::Command;

use sweep::process::{IoPoints, Process, ProcessWorld};
use sweep::{Config, Verdict};

pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn unchanged(file: &str) -> String {
    root()
        .join("clients/examples/unchanged")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

/// Whether `program` runs; under CI (`CI` true) its absence fails.
pub(crate) fn runtime(program: &str) -> bool {
    let runs = |arg: &str| {
        Command::new(program)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if runs("--version") || runs("version") {
        return true;
    }
    assert!(
        !sweep::report::snapshot::under_ci(std::env::var("CI").ok().as_deref()),
        "{program} is not installed, and CI must sweep the unchanged example (.ci/run installs it)"
    );
    eprintln!("skipped: {program} is not installed");
    false
}

/// Duplicates and missing payees in the world's ledger (the judge of
/// `clients/examples/judge.py`, in Rust: a line cut short is no payment).
pub(crate) fn judge(world: &ProcessWorld) -> Result<Verdict, String> {
    let ledger = std::fs::read_to_string(world.dir().join("ledger.txt")).unwrap_or_default();
    let (mut dups, mut missing) = (0, 0);
    for payee in ["alice", "bob", "carol"] {
        let n = ledger
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n') && l.split(' ').next() == Some(payee))
            .count() as u64;
        dups += n.saturating_sub(1);
        missing += u64::from(n == 0);
    }
    Ok(Verdict::new()
        .count("duplicates", dups)
        .count("missing", missing))
}

fn sweep_one(name: &str, argv: &[String]) -> sweep::Report {
    let mut p = Process::new(name, argv)
        .io_points(IoPoints::all())
        .judge_with(judge);
    if let Some(ram) = sweep::process::ram_disk() {
        p = p.worlds_in(ram);
    }
    let p = p.discover().unwrap_or_else(|e| panic!("{name}: {e}"));
    let config = Config {
        depth: 1,
        threads: Some(2),
        ..Config::default()
    };
    sweep::run(&p, &config).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The buggy version fails at the I/O hits between each payment and its
/// save, and not before the payment; the fixed version passes.
fn buggy_fails_fixed_passes(language: &str, argv: Vec<String>) {
    let buggy = sweep_one(language, &argv);
    let failed: Vec<String> = buggy
        .scenarios
        .iter()
        .filter(|s| s.failure.is_some())
        .map(|s| s.scenario.to_string())
        .collect();
    for k in 1..=3 {
        for hit in [
            format!("fsync ledger.txt#{k}"),
            format!("rename state.json.tmp→state.json#{k}"),
        ] {
            assert!(
                failed.contains(&hit),
                "{language}: {hit} not among the failures {failed:?}"
            );
        }
        // Before its payment is written, a crash loses nothing.
        let before = format!("write ledger.txt#{k}");
        assert!(
            !failed.contains(&before),
            "{language}: {before} failed: {failed:?}"
        );
    }
    // After the rename the progress is saved: no payment is repeated.
    assert!(
        !failed.iter().any(|f| f.starts_with("fsync .#")),
        "{failed:?}"
    );
    assert_eq!(buggy.row().depth_counts, vec![22], "{language}");

    let mut fixed_argv = argv;
    fixed_argv.push("--fixed".into());
    let fixed = sweep_one(&format!("{language} --fixed"), &fixed_argv);
    assert!(
        fixed.scenarios.iter().all(|s| s.failure.is_none()),
        "{language} fixed:\n{}",
        sweep::table(&fixed.rows())
    );
    assert_eq!(fixed.row().depth_counts, vec![22], "{language} fixed");
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn python_unchanged_bug_found_and_fix_clean() {
    if !runtime("python3") {
        return;
    }
    buggy_fails_fixed_passes("python", vec![python(), unchanged("payouts.py")]);
}

/// The Python interpreter itself, not a version manager's shim script
/// (pyenv's costs a shell and more at every life).
pub(crate) fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let exe = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if exe.is_empty() {
        "python3".into()
    } else {
        exe
    }
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn node_unchanged_bug_found_and_fix_clean() {
    if !runtime("node") {
        return;
    }
    buggy_fails_fixed_passes("node", vec!["node".into(), unchanged("payouts.js")]);
}

#[test]
fn go_unchanged_bug_found_and_fix_clean() {
    if !runtime("go") {
        return;
    }
    let (_bin, exe) = go_build("clients/examples/unchanged/go");
    buggy_fails_fixed_passes("go", vec![exe]);
}

/// The Go program in `dir` (of the repository) built offline into a
/// temporary directory (kept while the first value lives), and its path.
pub(crate) fn go_build(dir: &str) -> (tempfile::TempDir, String) {
    let bin = tempfile::tempdir().unwrap();
    let exe = bin.path().join("program");
    let out = Command::new("go")
        .current_dir(root().join(dir))
        .args(["build", "-o"])
        .arg(&exe)
        .arg(".")
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=mod")
        .env("GOCACHE", bin.path().join("gocache"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let exe = exe.to_string_lossy().into_owned();
    (bin, exe)
}
