//! A LangGraph agent swept unchanged (`clients/examples/langgraph/`): a
//! `StateGraph` with LangGraph's `SqliteSaver` in the world, a fake chat
//! model that calls a tool, the tool posting tickets to a tracker service,
//! LangGraph's default durability (`async`). Crashed with `--io-points` at
//! depth 1, the buggy agent files a ticket twice: its tool ran, then the
//! crash came before LangGraph committed the tool's result, and the
//! resumed thread runs the tool again. The fixed agent sends an
//! idempotency key (the thread and the tool call's id) and is clean.
//!
//! The agent needs LangGraph, which `cargo test --workspace` must not
//! install or import: these tests are ignored there. Make the virtualenv
//! (`target/langgraph-venv`, the pinned
//! `clients/examples/langgraph/requirements.txt`) and run them with
//! `--ignored`, its Python in `CRASHSWEEP_LANGGRAPH_PYTHON`, as CI does.
//! Run with `--ignored` but without a working virtualenv, they fail:
//! nothing here skips. The tracker and the judge run with the same Python:
//! a `python3` behind a version manager's shim (pyenv) starts a few hundred
//! milliseconds slower, twice a scenario.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The variable naming the virtualenv's Python.
const PYTHON: &str = "CRASHSWEEP_LANGGRAPH_PYTHON";

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/examples/langgraph")
}

/// The virtualenv's Python, checked to import LangGraph's stack.
fn python() -> String {
    let python = std::env::var(PYTHON).unwrap_or_else(|_| {
        panic!(
            "{PYTHON} is not set: set it to a virtualenv's python with \
             clients/examples/langgraph/requirements.txt installed \
             (make target/langgraph-venv as docs/sweep-an-unchanged-program.md says)"
        )
    });
    let out = Command::new(&python)
        .args([
            "-c",
            "import langgraph.checkpoint.sqlite, langgraph.prebuilt, langchain_core",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{PYTHON}={python} does not run: {e}"));
    assert!(
        out.status.success(),
        "{PYTHON}={python} cannot import LangGraph's stack (is the virtualenv broken?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    python
}

/// `crashsweep --fork-server --depth 1 --format json FLAGS` of `agent`
/// (in the example's directory) with the tracker and the judge (`judge`'s
/// arguments after its path), the agent's `args` after its path. Every
/// life is forked after the agent's imports: an exec'd life would import
/// LangGraph again, about 1.7 s of CPU.
fn crashsweep(
    flags: &[&str],
    judge: &[&str],
    agent: &str,
    args: &[&str],
) -> (Output, serde_json::Value) {
    let python = python();
    let dir = example();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_crashsweep"));
    if let Some(ram) = sweep::process::ram_disk() {
        cmd.arg("--worlds-in").arg(ram);
    }
    let out = cmd
        .args(["--fork-server", "--depth", "1", "--format", "json"])
        .args(flags)
        .args(["--threads", "2", "--world"])
        .arg(dir.join("world"))
        .arg("--service")
        .arg(format!("'{python}' '{}'", dir.join("tracker.py").display()))
        .arg("--judge")
        .arg(format!(
            "'{python}' '{}' {}",
            dir.join("judge.py").display(),
            judge.join(" ")
        ))
        .arg("--")
        .arg(&python)
        .arg(dir.join(agent))
        .args(args)
        .output()
        .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out, json)
}

/// The unchanged agent with I/O points (its forked lives traced, point
/// protocol 3) at the WAL's writes, where LangGraph's writes commit, and
/// at the posts; one ticket (the windows of one tool call, a third of the
/// hits).
fn sweep(args: &[&str]) -> (Output, serde_json::Value) {
    let io = ["--io-points", "--io-ops", "write,send,connect"];
    let flags = [&io[..], &["--io-paths", "checkpoints.db-wal"]].concat();
    let args = [&["--tickets", "1"][..], args].concat();
    crashsweep(&flags, &["--tickets", "1"], "agent.py", &args)
}

#[test]
#[ignore = "needs the LangGraph virtualenv (docs/sweep-an-unchanged-program.md) and minutes of sweeping"]
fn langgraph_buggy_tool_runs_again_after_a_crash_before_its_write_is_saved() {
    let (out, json) = sweep(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{json}");
    let row = &json["rows"][0];
    assert!(row["duplicates"].as_u64().unwrap_or(0) > 0, "{json}");
    assert_eq!(row["missing"], 0, "{json}");
    let failed = crate::clients::failed_scenarios(&json);
    // The duplicates are found at the SQLite writes that save the tool's
    // result: its post had landed, its pending write had not.
    assert!(
        failed
            .iter()
            .any(|f| f.starts_with("write checkpoints.db-wal#")),
        "no failure at a write of checkpoints.db-wal: {failed:?}\n{stderr}"
    );
    // Before the first post nothing can be filed twice.
    for f in &failed {
        assert!(
            !f.starts_with("open-create checkpoints.db#") && f != "connect service#1",
            "{f} failed: {failed:?}"
        );
    }
}

#[test]
#[ignore = "needs the LangGraph virtualenv (docs/sweep-an-unchanged-program.md) and minutes of sweeping"]
fn langgraph_fixed_tool_with_an_idempotency_key_is_clean() {
    let (out, json) = sweep(&["--fixed"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{json}");
    assert!(crate::clients::failed_scenarios(&json).is_empty(), "{json}");
    let row = &json["rows"][0];
    assert_eq!(row["duplicates"], 0, "{json}");
    assert_eq!(row["missing"], 0, "{json}");
    // The sweep crashed the agent at every hit of a clean run.
    assert!(row["once"].as_u64().unwrap_or(0) > 30, "{json}");
}

/// `agent_points.py` (named points around `SqliteSaver`'s writes and
/// after the tool's post), `args` after its path.
fn forked_sweep(args: &[&str]) -> (Output, serde_json::Value) {
    crashsweep(&[], &[], "agent_points.py", args)
}

#[test]
#[ignore = "needs the LangGraph virtualenv (docs/sweep-an-unchanged-program.md)"]
fn langgraph_forked_lives_find_the_duplicate_and_pass_the_fix() {
    let (out, json) = forked_sweep(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}\n{json}");
    assert!(
        stderr.contains(" forked, ") && !stderr.contains("fork server is refused"),
        "{stderr}"
    );
    let failed = crate::clients::failed_scenarios(&json);
    assert!(
        failed.iter().any(|f| f.starts_with("posted#")),
        "no failure right after a post: {failed:?}\n{stderr}"
    );
    let (out, json) = forked_sweep(&["--fixed"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}\n{json}");
    let row = &json["rows"][0];
    assert_eq!(row["duplicates"], 0, "{json}");
    assert_eq!(row["missing"], 0, "{json}");
    assert!(row["once"].as_u64().unwrap_or(0) >= 20, "{json}");
}
