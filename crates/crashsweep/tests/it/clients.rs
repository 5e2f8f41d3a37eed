//! The point clients of `clients/` (Python, Go, Node), each swept through
//! the `crashsweep` command on its example program: the buggy payouts job
//! fails by name at every payment (`paid#1`, `paid#2`, `paid#3`: a crash
//! between a payment and its save pays again), and the fixed one is clean.
//!
//! The runtimes are needed: `python3`, `go` and `node`. `.ci/run` installs
//! Go from the distribution's packages. A missing runtime fails the test
//! under CI (`CI` set to a true value) and is reported and skipped
//! elsewhere, so a developer without Go still runs the rest.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn has(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
        || Command::new(program)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
}

/// Whether `CI` is set to a true value, as the snapshot checks read it.
fn under_ci() -> bool {
    sweep::report::snapshot::under_ci(std::env::var("CI").ok().as_deref())
}

/// Whether `program` is there; under CI its absence fails the test.
fn runtime(program: &str) -> bool {
    if has(program) {
        return true;
    }
    assert!(
        !under_ci(),
        "{program} is not installed, and CI must sweep its client (.ci/run installs it)"
    );
    eprintln!("skipped: {program} is not installed");
    false
}

/// [`crashsweep`] with restarts from captured worlds (the default), and
/// again with `--no-share` (every scenario replayed from a fresh world):
/// the same output, byte for byte.
fn crashsweep_both_ways(depth: u32, argv: &[String]) -> (Output, serde_json::Value) {
    let (out, json) = crashsweep(depth, &[], argv);
    let (replayed, replayed_json) = crashsweep(depth, &["--no-share"], argv);
    // Each failure's rerun command names its own world and flags.
    let without_reruns = |j: &serde_json::Value| {
        let mut j = j.clone();
        if let Some(fs) = j["failures"].as_array_mut() {
            for f in fs {
                f["rerun"] = serde_json::Value::Null;
            }
        }
        serde_json::to_string_pretty(&j).unwrap_or_default()
    };
    assert!(json.is_object(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        without_reruns(&json),
        without_reruns(&replayed_json),
        "{argv:?} at depth {depth}: restarts from captured worlds and replays differ"
    );
    assert_eq!(out.status.code(), replayed.status.code(), "{argv:?}");
    (out, json)
}

/// `crashsweep --format json --world … --judge … FLAGS -- ARGV`.
/// Sweep `argv` with the example judge at `depth` (JSON out, 2 threads).
fn crashsweep(depth: u32, flags: &[&str], argv: &[String]) -> (Output, serde_json::Value) {
    let world = tempfile::tempdir().unwrap();
    let judge = root().join("clients/examples/judge.py");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crashsweep"));
    // Worlds on a RAM disk when there is one: the same results, faster
    // (the examples sync every save).
    if let Some(ram) = sweep::process::ram_disk() {
        cmd.arg("--worlds-in").arg(ram);
    }
    let out = cmd
        .arg("--format")
        .arg("json")
        .arg("--threads")
        .arg("2")
        .arg("--depth")
        .arg(depth.to_string())
        .arg("--world")
        .arg(world.path())
        .arg("--judge")
        .arg(format!("python3 {}", judge.display()))
        .args(flags)
        .arg("--")
        .args(argv)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out, json)
}

pub(crate) fn failed_scenarios(json: &serde_json::Value) -> Vec<String> {
    json["failures"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f["scenario"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Sweep the buggy and the fixed example given by `argv` (`--fixed` added
/// for the fixed one).
/// The buggy example fails at each payment's single crash (depth 1 shows
/// it); the fixed one passes every single and double crash (depth 2).
fn sweep_both(language: &str, argv: Vec<String>) {
    // Restarts against replays where captures are taken: the Python and
    // Rust programs run one thread at their hits. Node and Go run several,
    // so no world is captured there and both ways would replay alike.
    let sweep = |depth: u32, argv: &[String]| match language {
        "python" | "rust" => crashsweep_both_ways(depth, argv),
        _ => crashsweep(depth, &[], argv),
    };
    let (out, json) = sweep(1, &argv);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{language} buggy: {stderr}");
    let failed = failed_scenarios(&json);
    for hit in ["paid#1", "paid#2", "paid#3"] {
        assert!(
            failed.iter().any(|f| f == hit),
            "{language}: {hit} not among the failures {failed:?}\n{stderr}"
        );
    }
    // Each failure line names its scenario and the command that reruns it.
    assert!(
        stderr.contains("paid#2") && stderr.contains("--scenario"),
        "{stderr}"
    );
    let row = &json["rows"][0];
    assert!(row["duplicates"].as_u64().unwrap_or(0) > 0, "{json}");
    assert!(row["once"].as_u64().unwrap_or(0) >= 6, "{json}");

    let mut fixed = argv;
    fixed.push("--fixed".into());
    let (out, json) = sweep(2, &fixed);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{language} fixed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(failed_scenarios(&json).is_empty(), "{json}");
    let row = &json["rows"][0];
    assert_eq!(row["duplicates"], 0, "{json}");
    assert_eq!(row["missing"], 0, "{json}");
    assert!(row["twice"].as_u64().unwrap_or(0) > 0, "{json}");
}

fn path(p: PathBuf) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn python_client_bug_found_and_fix_clean() {
    if !runtime("python3") {
        return;
    }
    let script = root().join("clients/python/examples/payouts.py");
    sweep_both("python", vec!["python3".into(), path(script)]);
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn node_client_bug_found_and_fix_clean() {
    if !runtime("node") {
        return;
    }
    let script = root().join("clients/node/examples/payouts.js");
    sweep_both("node", vec!["node".into(), path(script)]);
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn go_client_bug_found_and_fix_clean() {
    if !runtime("go") {
        return;
    }
    let bin = tempfile::tempdir().unwrap();
    let exe = bin.path().join("payouts");
    let cache = bin.path().join("gocache");
    let out = Command::new("go")
        .current_dir(root().join("clients/go"))
        .args(["build", "-o"])
        .arg(&exe)
        .arg("./examples/payouts")
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOFLAGS", "-mod=mod")
        .env("GOCACHE", &cache)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    sweep_both("go", vec![path(exe)]);
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn the_rust_example_is_swept_by_the_command_too() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_crashsweep"));
    let exe = bin.parent().unwrap().join("examples/payouts");
    sweep_both("rust", vec![path(exe)]);
}

/// `crashsweep ARGS -- the Rust example`, output and exit code.
fn rust_example(args: &[&str], fixed: bool) -> Output {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_crashsweep"));
    let exe = bin.parent().unwrap().join("examples/payouts");
    let world = tempfile::tempdir().unwrap();
    let judge = root().join("clients/examples/judge.py");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crashsweep"));
    cmd.args(args)
        .arg("--world")
        .arg(world.path())
        .arg("--judge")
        .arg(format!("python3 {}", judge.display()))
        .arg("--")
        .arg(exe);
    if fixed {
        cmd.arg("--fixed");
    }
    cmd.output().unwrap()
}

#[test]
fn a_scenario_is_rerun_by_name_with_its_timeline() {
    let out = rust_example(&["--scenario", "paid#2"], false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("crashed at paid#2"), "{stdout}");
    assert!(stdout.contains("killed by signal 9 (SIGKILL)"), "{stdout}");
    assert!(stdout.contains("duplicates"), "{stdout}");
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn shards_merge_into_the_whole_table_and_threads_change_nothing() {
    let whole = rust_example(&["--depth", "1", "--threads", "1"], true);
    assert!(whole.status.success(), "{whole:?}");
    let two = rust_example(&["--depth", "1", "--threads", "2"], true);
    assert_eq!(whole.stdout, two.stdout, "1 thread and 2 give one table");
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for k in 1..=2 {
        let part = format!("{k}/2");
        let out = rust_example(
            &["--depth", "1", "--partition", &part, "--format", "json"],
            true,
        );
        assert!(out.status.success(), "{out:?}");
        let f = dir.path().join(format!("part-{k}.json"));
        std::fs::write(&f, &out.stdout).unwrap();
        files.push(f);
    }
    let merged = Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .arg("merge")
        .args(&files)
        .output()
        .unwrap();
    assert!(merged.status.success(), "{merged:?}");
    assert_eq!(
        String::from_utf8_lossy(&merged.stdout),
        String::from_utf8_lossy(&whole.stdout)
    );
}

#[test]
fn worlds_are_made_where_worlds_in_says_and_a_missing_directory_runs_nothing() {
    let here = tempfile::tempdir().unwrap();
    let judge = root().join("clients/examples/judge.py");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_crashsweep"));
    let exe = bin.parent().unwrap().join("examples/payouts");
    // The judge runs in the scenario's world: outside `here`, it counts a
    // required "outside", and the scenario fails.
    let inside = format!(
        "case \"$PWD\" in {}/*) python3 {};; *) echo '{{\"outside\": 1}}';; esac",
        here.path().display(),
        judge.display()
    );
    let out = Command::new(&bin)
        .args(["--depth", "1", "--worlds-in"])
        .arg(here.path())
        .args(["--judge", &inside, "--"])
        .arg(&exe)
        .arg("--fixed")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("outside"), "{stdout}");
    let left: Vec<_> = std::fs::read_dir(here.path()).unwrap().collect();
    assert!(
        left.is_empty(),
        "every world is removed after its scenario: {left:?}"
    );

    let missing = here.path().join("no-such-dir");
    let out = Command::new(&bin)
        .arg("--worlds-in")
        .arg(&missing)
        .args(["--judge", "true", "--"])
        .arg(&exe)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--worlds-in") && stderr.contains("not a directory"),
        "{stderr}"
    );
    assert!(!missing.exists(), "nothing is created");
}
