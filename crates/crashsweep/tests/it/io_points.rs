//! I/O points: the tracer makes points of a program's calls on its world
//! and its peers, with no change to the program. Named points and I/O
//! points form one sequence; the crash lands before the call; the filters
//! (`--io-ops`, `--io-paths`), the mask (`--io-mask`) and `--list-points`
//! do what they say.

use std::path::PathBuf;
use std::process::{Command, Output};

use sweep::process::{IoPoints, Process, ProcessError, ProcessWorld};
use sweep::Verdict;

/// The Rust example (named points `start`, `paid`, `mid-save`).
fn payouts() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_crashsweep"));
    bin.parent().unwrap().join("examples/payouts")
}

/// `crashsweep ARGS -- ARGV` in an empty world.
fn crashsweep(args: &[&str], argv: &[&str]) -> Output {
    let world = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .args(args)
        .args(["--name", "sh", "--world"])
        .arg(world.path())
        .arg("--")
        .args(argv)
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Writes b, then a through a temporary file, makes d, removes b; a
/// restart does it again.
const SAVE: &str = "echo one > b && echo two > a.tmp && mv a.tmp a && mkdir -p d && rm -f b";

#[test]
fn named_points_and_io_points_form_one_sequence() {
    let listing = Process::new("payouts", [payouts()])
        .io_points(IoPoints::all())
        .list_points()
        .unwrap();
    let at = |h: &str| {
        listing
            .hits
            .iter()
            .position(|x| x == h)
            .unwrap_or_else(|| panic!("{h} not in {:?}", listing.hits))
    };
    // The program pays (its ledger written and synced), passes `paid`,
    // saves to a temporary file, passes `mid-save`, renames.
    assert_eq!(at("start#1"), 0);
    assert!(at("fsync ledger.txt#1") < at("paid#1"));
    assert!(at("paid#1") < at("open-create state.json.tmp#1"));
    assert!(at("fsync state.json.tmp#1") < at("mid-save#1"));
    assert!(at("mid-save#1") < at("rename state.json.tmp→state.json#1"));
    assert_eq!(listing.hits.last().unwrap(), "fsync .#3");
}

/// Whether `a` holds `two` and whether `a.tmp` is there.
fn judge(world: &ProcessWorld) -> Result<Verdict, String> {
    let dir = world.dir();
    let renamed = std::fs::read_to_string(dir.join("a")).is_ok_and(|s| s == "two\n");
    Ok(Verdict::new()
        .count("renamed", u64::from(renamed))
        .count("tmp", u64::from(dir.join("a.tmp").exists())))
}

#[test]
fn the_crash_lands_before_the_call_and_the_timeline_shows_it() {
    // The restart does nothing: the world is what the crash left.
    let p = Process::new("save", ["sh", "-c", SAVE])
        .restart(["true"])
        .io_points(IoPoints::all())
        .judge_with(judge)
        .count_only("renamed")
        .count_only("tmp")
        .discover()
        .unwrap();
    let r = sweep::rerun(&p, &sweep::Config::default(), "rename a.tmp→a#1").unwrap();
    let timeline = r.timeline();
    assert_eq!(
        (r.verdict.get("renamed"), r.verdict.get("tmp")),
        (0, 1),
        "{timeline}"
    );
    assert!(
        timeline
            .contains("killed by signal 9 (SIGKILL) at rename a.tmp→a, before rename(a.tmp, a)"),
        "{timeline}"
    );
    let r = sweep::rerun(&p, &sweep::Config::default(), "mkdir d#1").unwrap();
    assert_eq!((r.verdict.get("renamed"), r.verdict.get("tmp")), (1, 0));
    let r = sweep::rerun(&p, &sweep::Config::default(), "write a.tmp#1").unwrap();
    let timeline = r.timeline();
    assert!(
        timeline.contains("before write(fd 1 → a.tmp, 4 bytes)"),
        "{timeline}"
    );
    assert_eq!((r.verdict.get("renamed"), r.verdict.get("tmp")), (0, 1));
}

#[test]
fn list_points_groups_hits_with_counts_and_estimates() {
    let out = crashsweep(&["--io-points", "--list-points"], &["sh", "-c", SAVE]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for line in [
        "  open-create b ",
        "  write b ",
        "  open-create a.tmp ",
        "  write a.tmp ",
        "  rename a.tmp→a ",
        "  mkdir d ",
        "  unlink b ",
    ] {
        assert!(stdout.contains(line), "{line:?} not in\n{stdout}");
    }
    assert!(
        stdout.starts_with("sh: 7 hits of 7 points in a clean run\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("scenarios: depth 1: 8, depth 2: at most 57"),
        "{stdout}"
    );
}

#[test]
fn io_ops_and_io_paths_select_the_points() {
    let out = crashsweep(
        &["--io-points", "--io-ops", "rename,mkdir", "--list-points"],
        &["sh", "-c", SAVE],
    );
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("sh: 2 hits of 2 points"), "{stdout}");
    assert!(
        stdout.contains("rename a.tmp→a") && stdout.contains("mkdir d"),
        "{stdout}"
    );

    let out = crashsweep(
        &["--io-points", "--io-paths", "a*", "--list-points"],
        &["sh", "-c", SAVE],
    );
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("sh: 3 hits of 3 points"), "{stdout}");
    assert!(stdout.contains("write a.tmp"), "{stdout}");
    assert!(!stdout.contains(" b "), "{stdout}");

    let out = crashsweep(
        &["--io-points", "--io-ops", "renam", "--list-points"],
        &["true"],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("\"renam\" is not an operation"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_random_name_is_refused_with_the_mask_to_use_and_the_mask_makes_it_sweepable() {
    let script = "f=tmp$$; echo x > $f && mv $f state";
    let out = crashsweep(
        &["--io-points", "--judge", "echo '{\"x\": 0}'"],
        &["sh", "-c", script],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("two clean runs made different I/O points"),
        "{stderr}"
    );
    assert!(stderr.contains("open-create tmp"), "{stderr}");
    assert!(stderr.contains("--io-mask"), "{stderr}");

    let out = crashsweep(
        &[
            "--io-points",
            "--io-mask",
            "tmp[0-9]+",
            "--depth",
            "1",
            "--judge",
            "echo '{\"x\": 0}'",
        ],
        &["sh", "-c", script],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = crashsweep(
        &["--io-points", "--io-mask", "tmp[0-9]+", "--list-points"],
        &["sh", "-c", script],
    );
    assert!(
        text(&out.stdout).contains("rename *→state"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn a_program_without_named_points_is_swept_with_io_points_only() {
    let judge = "test -f a && echo '{\"missing\": 0}' || echo '{\"missing\": 1}'";
    let out = crashsweep(&["--judge", judge], &["sh", "-c", SAVE]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("without reporting a crash point"));
    let out = crashsweep(
        &["--io-points", "--depth", "1", "--judge", judge],
        &["sh", "-c", SAVE],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("  7 "), "{}", text(&out.stdout));

    // With every call filtered out, nothing is left to crash: refused.
    let e = Process::new("save", ["sh", "-c", SAVE])
        .io_points(IoPoints::all().paths(["*.db"]).unwrap())
        .discover()
        .unwrap_err();
    assert!(matches!(e, ProcessError::NoIoPoints { .. }), "{e}");
}

/// `--list-points` of the Python `program` with a service that prints its
/// URL, then reads every connection to its end (None without python3).
fn list_points_with_service(program: &str) -> Option<String> {
    let has_python = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_python {
        eprintln!("skipped: python3 is not installed");
        return None;
    }
    let service = "import socket,sys\n\
        s=socket.socket(); s.bind(('127.0.0.1',0)); s.listen()\n\
        print('http://127.0.0.1:%d' % s.getsockname()[1], flush=True)\n\
        while True:\n\
        \x20   c,_=s.accept()\n\
        \x20   while c.recv(100): pass\n";
    let world = tempfile::tempdir().unwrap();
    let svc_file = world.path().join("svc.py");
    std::fs::write(&svc_file, service).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .args(["--io-points", "--list-points", "--service"])
        .arg(format!("python3 {}", svc_file.display()))
        .arg("--")
        .args(["python3", "-c", program])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    Some(text(&out.stdout))
}

/// Connects to the service, sends twice (`sendall`, then `send`), closes.
const SEND: &str = "import os,socket\n\
    def send():\n\
    \x20   host,port=os.environ['CRASHSWEEP_SERVICE'][7:].split(':')\n\
    \x20   c=socket.create_connection((host,int(port)))\n\
    \x20   c.sendall(b'one'); c.send(b'two'); c.close()\n";

#[test]
fn connects_and_sends_to_the_service_are_named_service() {
    let Some(stdout) = list_points_with_service(&format!("{SEND}send()\n")) else {
        return;
    };
    assert!(stdout.contains("connect service  ×1"), "{stdout}");
    assert!(stdout.contains("send service     ×2"), "{stdout}");
}

/// A send from a thread other than the main one is a point too (a tool in
/// LangGraph's ToolNode runs on a worker thread): the socket's peer is read
/// through the thread's process, not the thread's own id.
#[test]
fn sends_from_another_thread_are_points() {
    let program = format!(
        "{SEND}import threading\n\
         t=threading.Thread(target=send); t.start(); t.join()\n"
    );
    let Some(stdout) = list_points_with_service(&program) else {
        return;
    };
    assert!(stdout.contains("connect service  ×1"), "{stdout}");
    assert!(stdout.contains("send service     ×2"), "{stdout}");
}
