//! Programs with threads (`clients/examples/threads/`): a writer thread in
//! Python, a writer goroutine in Go, libuv's thread pool in Node. Their
//! hits interleave differently from run to run, which refused the sweep
//! as nondeterministic before. Now the clean runs are compared by their
//! hits as sets and by their worlds: each program is swept three times
//! and gives one table every time. A scenario whose crash never fires is
//! counted apart, not as the program's failure.
//!
//! The runtimes are needed; as in `unchanged.rs`, a missing one fails the
//! test under CI and is reported and skipped elsewhere.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use sweep::process::{IoPoints, Process, ProcessWorld};
use sweep::report::Failure;
use sweep::{Config, Counter, Report, Verdict};

use crate::unchanged::{go_build, judge, python, root, runtime};

fn threads(file: &str) -> String {
    root()
        .join("clients/examples/threads")
        .join(file)
        .to_string_lossy()
        .into_owned()
}

fn config(depth: u32) -> Config {
    Config {
        depth,
        threads: Some(2),
        ..Config::default()
    }
}

/// `argv` swept with I/O points (and the payouts judge) at depth 1. The
/// programs pay alice and bob alone (`--payees=2`), so carol's `missing`
/// only counts.
fn sweep_io(name: &str, argv: &[String]) -> Report {
    let mut argv = argv.to_vec();
    argv.push("--payees=2".into());
    let mut p = Process::new(name, argv)
        .io_points(IoPoints::all())
        .judge_with(judge)
        .count_only("missing");
    if let Some(ram) = sweep::process::ram_disk() {
        p = p.worlds_in(ram);
    }
    let p = p.discover().unwrap_or_else(|e| panic!("{name}: {e}"));
    sweep::run(&p, &config(1)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The failing (or flaky) scenarios of `r`, by name.
fn failing(r: &Report) -> Vec<String> {
    (r.scenarios.iter())
        .filter(|s| s.failure.is_some())
        .map(|s| s.scenario.to_string())
        .collect()
}

/// The fixed version, swept three times, gives one table every time and
/// passes every scenario; the buggy one is swept (not refused) and fails
/// where a crash falls between the first payment and its save. (Its
/// other failures depend on where the writer was: some are flaky.)
fn one_table_run_after_run(language: &str, argv: Vec<String>) {
    let mut fixed = argv.clone();
    fixed.push("--fixed".into());
    let mut tables = Vec::new();
    for _ in 0..3 {
        let r = sweep_io(&format!("{language} --fixed"), &fixed);
        let table = sweep::table(&r.rows());
        assert!(
            failing(&r).is_empty(),
            "{language} fixed: {:?}\n{table}",
            failing(&r)
        );
        // Two payments and two saves: the same hits every run.
        assert_eq!(r.row().depth_counts, vec![15], "{language}\n{table}");
        tables.push(table);
    }
    assert!(
        tables.iter().all(|t| *t == tables[0]),
        "{language}: the tables differ:\n{}",
        tables.join("\n")
    );

    let buggy = sweep_io(language, &argv);
    let failed = failing(&buggy);
    // A crash before the first payment's sync: the payment is written,
    // its progress not yet handed to the writer. The restart pays again,
    // whatever the writer was doing.
    let first = buggy
        .scenarios
        .iter()
        .find(|s| s.scenario.to_string() == "fsync ledger.txt#1")
        .unwrap_or_else(|| panic!("{language}: fsync ledger.txt#1 did not fail: {failed:?}"));
    assert!(
        matches!(first.failure, Some(Failure::Broken { .. })),
        "{language}: {:?}",
        first.failure
    );
    // Before the first payment is written, a crash loses nothing.
    for safe in ["open-create ledger.txt#1", "write ledger.txt#1"] {
        assert!(!failed.contains(&safe.to_owned()), "{language}: {failed:?}");
    }
    assert_eq!(buggy.row().depth_counts, vec![15], "{language}");
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn python_writer_thread_gives_one_table_run_after_run() {
    if !runtime("python3") {
        return;
    }
    one_table_run_after_run("python", vec![python(), threads("writer.py")]);
}

#[test]
fn go_writer_goroutine_gives_one_table_run_after_run() {
    if !runtime("go") {
        return;
    }
    let (_bin, exe) = go_build("clients/examples/threads/go");
    one_table_run_after_run("go", vec![exe]);
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn node_thread_pool_gives_one_table_run_after_run() {
    if !runtime("node") {
        return;
    }
    one_table_run_after_run("node", vec!["node".into(), threads("writer.js")]);
}

/// Named points on two threads, at depth 2: every life passes the same
/// four hits in some order, so each sweep (two here) runs 4 scenarios
/// once and 16 twice, named alike.
#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn named_points_on_two_threads_at_depth_2_give_one_table() {
    if !runtime("python3") {
        return;
    }
    // Each thread's file ends with its second line once the final life is
    // done (how many lines came before depends on the interleaving).
    let unfinished = |w: &ProcessWorld| -> Result<Verdict, String> {
        let n = (["main", "writer"].iter())
            .filter(|who| {
                let text = std::fs::read_to_string(w.dir().join(format!("{who}.txt")));
                !text.unwrap_or_default().ends_with(&format!("{who} 2\n"))
            })
            .count();
        Ok(Verdict::new().count("unfinished", n as u64))
    };
    let mut p = Process::new("points", [python(), threads("points.py")])
        .judge_with(unfinished)
        .counters(vec![Counter::new("unfinished").required()]);
    if let Some(ram) = sweep::process::ram_disk() {
        p = p.worlds_in(ram);
    }
    let mut tables = Vec::new();
    let mut names = Vec::new();
    for _ in 0..2 {
        let r = sweep::run(&p, &config(2)).unwrap();
        assert_eq!(r.row().depth_counts, vec![4, 16]);
        assert!(failing(&r).is_empty(), "{:?}", failing(&r));
        tables.push(sweep::table(&r.rows()));
        let listed: Vec<String> = (r.scenarios.iter())
            .map(|s| s.scenario.to_string())
            .collect();
        names.push(listed);
    }
    assert!(tables.iter().all(|t| *t == tables[0]), "{tables:?}");
    let mut sorted = names[0].clone();
    sorted.sort();
    for n in &names {
        let mut s = n.clone();
        s.sort();
        assert_eq!(s, sorted, "the same scenarios every sweep");
    }
    assert!(sorted.contains(&"writer step#2 → main step#1".to_owned()));
}

/// A program whose hits change after its clean runs: the scenarios at the
/// hits it no longer passes never fire. They are counted apart (the
/// table's `not fired` column), not as failures of the program.
#[test]
fn a_crash_that_never_fires_is_counted_apart_not_as_a_failure() {
    let marker = tempfile::NamedTempFile::new().unwrap();
    let script = format!(
        "echo a > a; if [ -e '{}' ]; then echo x > extra; fi",
        marker.path().display()
    );
    // The marker goes once the two clean runs have been judged: no later
    // life writes `extra`.
    let judged = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&judged);
    let path = marker.path().to_owned();
    let p = Process::new("vary", ["sh", "-c", &script])
        .io_points(IoPoints::all())
        .judge_with(move |w: &ProcessWorld| {
            if w.dir().join("extra").exists() && seen.fetch_add(1, Ordering::SeqCst) + 1 == 2 {
                std::fs::remove_file(&path).map_err(|e| e.to_string())?;
            }
            Ok(Verdict::new().count("lost", 0))
        })
        .counters(vec![Counter::new("lost").required()]);
    let r = sweep::run(&p, &config(1)).unwrap();
    let row = r.row();
    assert_eq!(row.depth_counts, vec![4]);
    assert_eq!((row.failed, row.flaky, row.unfired), (0, 0, 2));
    let unfired: Vec<String> = r.unfired().map(|s| s.scenario.to_string()).collect();
    assert_eq!(unfired, ["open-create extra#1", "write extra#1"]);
    assert_eq!(r.failures().count(), 0);
    let table = sweep::table(&r.rows());
    assert!(table.contains("not fired"), "{table}");
}

/// The crash's line in the timeline names the thread that made the call,
/// by creation order: the writer is thread 2; the main thread is not named.
/// The listing of points names it too.
#[test]
fn the_crash_names_the_thread_that_made_the_call() {
    if !runtime("python3") {
        return;
    }
    let p = Process::new(
        "writer",
        [python(), threads("writer.py"), "--payees=1".into()],
    )
    .io_points(IoPoints::all())
    .judge_with(judge)
    .counters(vec![
        Counter::new("duplicates").required(),
        Counter::new("missing"),
    ]);
    let at = |scenario: &str| {
        let r = sweep::rerun(&p, &Config::default(), scenario).unwrap();
        r.timeline()
    };
    let saved = at("rename state.json.tmp→state.json#1");
    assert!(
        saved.contains("before rename(state.json.tmp, state.json) on thread 2\n"),
        "{saved}"
    );
    let paid = at("fsync ledger.txt#1");
    assert!(paid.contains("before fsync(fd "), "{paid}");
    assert!(!paid.contains(" on thread"), "{paid}");
    // The listing names the threads after the first that made each point.
    let listing = p.list_points().unwrap();
    assert_eq!(
        listing.threads,
        [
            "open-create state.json.tmp",
            "write state.json.tmp",
            "fsync state.json.tmp",
            "rename state.json.tmp→state.json",
            "fsync .",
        ]
        .map(|point| (point.to_owned(), vec!["thread 2".to_owned()]))
    );
}
