//! The fork server (point protocol 2) against real programs: a forked sweep
//! gives the exec'd sweep's table, and what would make forked lives differ
//! from exec'd ones is refused by name — threads alive at `ready()`, state
//! read from the world before it, a restart command of its own.

use std::path::Path;
use std::process::{Command, Output};

use sweep::process::{Process, ProcessError};

use super::process::{config, judge, payouts};

fn forked(args: &[&str]) -> Process {
    let mut argv = vec![payouts().to_string_lossy().into_owned()];
    argv.extend(args.iter().map(|a| (*a).to_owned()));
    Process::new("payouts", argv)
        .judge_with(judge)
        .fork_server()
}

fn refusal(p: Process) -> String {
    match p.discover() {
        Err(e @ ProcessError::ForkServer { .. }) => e.to_string(),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("the fork server was not refused"),
    }
}

#[test]
#[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
fn a_forked_sweep_gives_the_exec_d_table() {
    for args in [&[][..], &["--fixed"][..]] {
        let exec = Process::new(
            "payouts",
            [payouts().to_string_lossy().into_owned()]
                .into_iter()
                .chain(args.iter().map(|a| (*a).to_owned())),
        )
        .judge_with(judge)
        .discover()
        .unwrap();
        let fork = forked(args).discover().unwrap();
        let a = sweep::run(&exec, &config(2)).unwrap();
        let b = sweep::run(&fork, &config(2)).unwrap();
        assert_eq!(sweep::table(&a.rows()), sweep::table(&b.rows()), "{args:?}");
        let names = |r: &sweep::Report| -> Vec<(String, bool)> {
            r.scenarios
                .iter()
                .map(|s| (s.scenario.to_string(), s.failure.is_some()))
                .collect()
        };
        assert_eq!(names(&a), names(&b), "{args:?}");
        assert!(b.scenarios.len() > 20, "{}", b.scenarios.len());
    }
}

#[test]
fn a_thread_alive_at_ready_is_refused_by_name() {
    let e = refusal(forked(&["--thread-before-ready"]));
    assert!(
        e.contains("poller") && e.contains("start threads after ready()"),
        "{e}"
    );
}

/// The harness counts the threads itself: a program that says `ready` with
/// a second thread alive (a client that does not check) is refused too.
#[test]
fn the_harness_counts_the_threads_at_ready_itself() {
    let script = "import os, threading, time\n\
                  threading.Thread(target=time.sleep, args=(60,), name='poller', daemon=True).start()\n\
                  time.sleep(0.2)\n\
                  os.write(3, b'ready\\n')\n\
                  time.sleep(60)\n";
    let e = refusal(
        Process::new("raw", ["python3", "-c", script])
            .judge_with(judge)
            .fork_server(),
    );
    assert!(
        e.contains("had 2 threads at ready()") && e.contains("poller"),
        "{e}"
    );
}

#[test]
fn a_world_read_before_ready_is_refused_at_the_first_differing_hit() {
    let e = refusal(forked(&["--load-before-ready"]));
    assert!(
        e.contains("a second life on the world a clean life left, forked, passed paid#1 where the exec'd one passed its end"),
        "{e}"
    );
}

#[test]
fn a_restart_of_its_own_is_refused() {
    let p = forked(&[]).restart(["true"]);
    let e = refusal(p);
    assert!(e.contains("a restart command of its own"), "{e}");
}

/// `crashsweep --fork-server OPTIONS --world EMPTY -- payouts ARGS`.
fn payouts_forked(options: &[&str], args: &[&str]) -> Output {
    let world = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_crashsweep"))
        .arg("--fork-server")
        .args(options)
        .arg("--world")
        .arg(world.path())
        .arg("--")
        .arg(payouts())
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_command_line_forks_and_refuses() {
    let judge = format!(
        "python3 {}/../../clients/examples/judge.py",
        env!("CARGO_MANIFEST_DIR")
    );
    // Every scenario replayed: the counts below are a replay's.
    let options = ["--no-share", "--depth", "1", "--judge", &judge];
    let run = |args: &[&str]| payouts_forked(&options, args);
    let ok = run(&["--fixed"]);
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    let err = String::from_utf8_lossy(&ok.stderr);
    assert!(
        err.contains("payouts: ")
            && err.contains(" processes for 8 scenarios: 0 lives, 16 forked, ")
            // The example judge calls ready(): every judge is forked.
            && err.contains(" 0 judges, ")
            // The program's server, and the judge's.
            && err.contains(" 2 fork servers"),
        "{err}"
    );
    let refused = run(&["--load-before-ready"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("the fork server is refused"), "{err}");
}

/// Every process a sweep starts is counted by kind: each life is one
/// (exec'd, or forked from the server started at discovery), and each
/// scenario's judge command another.
#[test]
fn the_processes_a_sweep_starts_are_counted() {
    let argv = [payouts().to_string_lossy().into_owned(), "--fixed".into()];
    let judge = "printf '{\"n\": 0}'";
    let exec = Process::new("payouts", argv.clone())
        .judge_command(judge)
        .discover()
        .unwrap();
    let fork = Process::new("payouts", argv)
        .judge_command(judge)
        .fork_server()
        .discover()
        .unwrap();
    for (p, forked) in [(&exec, false), (&fork, true)] {
        // Every scenario replayed from a fresh world: a life per crash.
        let replayed = sweep::Config {
            share: false,
            ..config(1)
        };
        let r = sweep::run(p, &replayed).unwrap();
        let n = r.stats.processes.expect("a process subject counts");
        let (lives, by_fork) = if forked {
            (0, r.stats.lives)
        } else {
            (r.stats.lives, 0)
        };
        assert_eq!((n.lives, n.forked), (lives, by_fork), "{n:?}");
        assert!(r.stats.lives > r.stats.scenarios, "{:?}", r.stats);
        // One judge a scenario (the clean run is judged again by the
        // determinism net), nothing else.
        assert!(
            n.judges >= r.stats.scenarios && n.judges <= r.stats.scenarios + 1,
            "{n:?} {:?}",
            r.stats
        );
        // The fork server discovery started serves the sweep; the judge
        // command ended before ready(), so it is no server.
        let servers = u64::from(forked);
        assert_eq!((n.services, n.servers), (0, servers), "{n:?}");
        assert_eq!(n.total(), n.lives + n.forked + n.judges + n.servers);
    }
}

/// `--list-points` with `--fork-server` checks the server as a sweep
/// would, then lists a forked clean life's points; a server that a sweep
/// would refuse is refused here too, by name.
#[test]
fn the_points_are_listed_under_a_fork_server() {
    let run = |args: &[&str]| payouts_forked(&["--list-points"], args);
    let ok = run(&["--fixed"]);
    let out = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{ok:?}");
    assert!(
        out.contains("7 hits of 3 points in a clean run")
            && out.contains("start     ×1")
            && out.contains("paid      ×3")
            && out.contains("mid-save  ×3"),
        "{out}"
    );
    let refused = run(&["--load-before-ready"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("the fork server is refused"), "{err}");
    assert!(!err.contains("Process::discover"), "{err}");
}

/// A Python program using the client (`clients/python`), forked.
fn python_forked(name: &str, script: &str) -> Process {
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python");
    Process::new(name, ["python3", "-c", script])
        .env("PYTHONPATH", client)
        .judge_with(|_| Ok(sweep::Verdict::new().count("lost", 0)))
        .fork_server()
}

/// The check compares what the safety nets compare: hits as sets and the
/// world as the subject describes it (names and sizes). A time stamp the
/// judge never reads and two points passed in another order (as a writer
/// thread's are) do not refuse the fork server.
#[test]
fn worlds_that_differ_only_where_the_judge_does_not_look_are_accepted() {
    let script = "import os, time, crashsweep\n\
                  crashsweep.ready()\n\
                  crashsweep.point('start')\n\
                  # Another order under the fork server than exec'd, as threads racing.\n\
                  parent = open('/proc/%d/comm' % os.getppid()).read()\n\
                  for p in (['left', 'right'] if 'crashsweep' in parent else ['right', 'left']):\n\
                  \x20   crashsweep.point(p)\n\
                  with open('stamp.txt', 'w') as f:\n\
                  \x20   f.write('%020d\\n' % time.time_ns())\n";
    let p = python_forked("stamped", script)
        .discover()
        .unwrap_or_else(|e| panic!("refused: {e}"));
    let r = sweep::run(&p, &config(1)).unwrap();
    let names: Vec<(String, bool)> = (r.scenarios.iter())
        .map(|s| (s.scenario.to_string(), s.failure.is_some()))
        .collect();
    let crashed = |h: &str| (h.to_owned(), false);
    assert_eq!(
        names,
        // In the forked lives' order.
        [crashed("start#1"), crashed("right#1"), crashed("left#1")],
        "{}",
        sweep::table(&r.rows())
    );
}

/// A world that differs as the subject describes it is refused, though
/// every hit matches: a log read before `ready()` and written after, so a
/// forked second life forgets the first.
#[test]
fn a_world_that_differs_with_the_same_hits_is_refused() {
    let script = "import os, crashsweep\n\
                  seen = open('log.txt').read() if os.path.exists('log.txt') else ''\n\
                  crashsweep.ready()\n\
                  crashsweep.point('start')\n\
                  with open('log.txt', 'w') as f:\n\
                  \x20   f.write(seen + 'life\\n')\n";
    let e = refusal(python_forked("log", script));
    assert!(
        e.contains("a second life on the world a clean life left, forked, left another world")
            && e.contains("log.txt (10 B)")
            && e.contains("log.txt (5 B)"),
        "{e}"
    );
}

/// A depth-1 sweep of `argv` with I/O points, exec'd or forked: its table
/// and its scenarios (name, failed), and how many lives it forked.
fn traced(argv: &[String], fork: bool) -> (String, Vec<(String, bool)>, u64) {
    let mut p = Process::new("traced", argv)
        .io_points(sweep::process::IoPoints::all())
        .judge_with(judge);
    if fork {
        p = p.fork_server();
    }
    let p = p.discover().unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let r = sweep::run(&p, &config(1)).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    let names = r
        .scenarios
        .iter()
        .map(|s| (s.scenario.to_string(), s.failure.is_some()))
        .collect();
    let forked = r.stats.processes.map_or(0, |n| n.forked);
    (sweep::table(&r.rows()), names, forked)
}

/// With I/O points, a forked life is traced as an exec'd one is: the same
/// hits (named points and I/O calls in one sequence), the crash before the
/// same call, the same table. For the Rust example (`crashpoint::ready()`)
/// and the Python one (`crashsweep.ready()`), buggy and fixed.
#[test]
fn a_traced_forked_sweep_gives_the_exec_d_table() {
    let python = super::unchanged::root().join("clients/python/examples/payouts.py");
    let mut programs = vec![vec![payouts().to_string_lossy().into_owned()]];
    if super::unchanged::runtime("python3") {
        programs.push(vec![
            "python3".into(),
            python.to_string_lossy().into_owned(),
        ]);
    }
    for program in programs {
        for fixed in [false, true] {
            let mut argv = program.clone();
            if fixed {
                argv.push("--fixed".into());
            }
            let (table, names, none) = traced(&argv, false);
            let (forked_table, forked_names, forked) = traced(&argv, true);
            assert_eq!(table, forked_table, "{argv:?}");
            assert_eq!(names, forked_names, "{argv:?}");
            assert_eq!(none, 0);
            // Every life of the sweep was forked (none exec'd).
            assert!(forked > names.len() as u64, "{argv:?}: {forked} forked");
            // I/O points among the hits, and the buggy job fails.
            assert!(
                names
                    .iter()
                    .any(|(n, _)| n.starts_with("write ledger.txt#")),
                "{argv:?}: {names:?}"
            );
            assert!(
                fixed || names.iter().any(|(_, failed)| *failed),
                "{argv:?}: {names:?}"
            );
        }
    }
}

/// A forked life's threads and processes are traced too: a thread's
/// write and a forked child's write are hits, as in an exec'd life.
#[test]
fn a_forked_life_s_threads_and_children_are_traced() {
    if !super::unchanged::runtime("python3") {
        return;
    }
    let clients = super::unchanged::root().join("clients/python");
    let script = format!(
        "import os, sys, threading\n\
         sys.path.insert(0, {:?})\n\
         import crashsweep\n\
         crashsweep.ready()\n\
         def w():\n    open('thread.txt', 'w').write('t')\n\
         t = threading.Thread(target=w); t.start(); t.join()\n\
         pid = os.fork()\n\
         if pid == 0:\n    open('child.txt', 'w').write('c'); os._exit(0)\n\
         os.waitpid(pid, 0)\n\
         open('ledger.txt', 'w').write('alice 1\\nbob 2\\ncarol 3\\n')\n",
        clients.to_string_lossy()
    );
    let argv = vec!["python3".to_owned(), "-c".into(), script];
    let (table, names, _) = traced(&argv, false);
    let (forked_table, forked_names, forked) = traced(&argv, true);
    assert_eq!(table, forked_table);
    assert_eq!(names, forked_names);
    assert!(forked > 0);
    for hit in [
        "open-create thread.txt#1",
        "write thread.txt#1",
        "open-create child.txt#1",
        "write child.txt#1",
        "write ledger.txt#1",
    ] {
        assert!(
            forked_names.iter().any(|(n, _)| n == hit),
            "{hit}: {forked_names:?}"
        );
    }
}

/// A life that counts its runs in `runs.txt`, crashing at `counted`.
const COUNTING_LIFE: &str = "import crashsweep\n\
                             crashsweep.ready()\n\
                             try:\n\
                             \x20   n = int(open('runs.txt').read())\n\
                             except FileNotFoundError:\n\
                             \x20   n = 0\n\
                             open('runs.txt', 'w').write(str(n + 1))\n\
                             crashsweep.point('counted')\n";

/// A judge command in Python: `early` reads the world before `ready()`
/// (the mistake the check refuses), else after it.
fn runs_judge(early: bool) -> String {
    let read = "r = open('runs.txt').read() if os.path.exists('runs.txt') else '0'";
    let (before, after) = if early { (read, "") } else { ("", read) };
    format!(
        "python3 -c \"import os, json, crashsweep\n{before}\ncrashsweep.ready()\n{after}\n\
         print(json.dumps({{'reruns': max(int(r) - 1, 0), 'runs': int(r)}}))\""
    )
}

/// A depth-1 sweep of [`COUNTING_LIFE`] judged by `judge`, forked or not.
fn judged(judge: &str, fork: bool) -> Result<(Process, sweep::Report), ProcessError> {
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python");
    let mut p = Process::new("counting", ["python3", "-c", COUNTING_LIFE])
        .env("PYTHONPATH", client)
        .judge_command(judge)
        .count_only("runs");
    if fork {
        p = p.fork_server();
    }
    let p = p.discover()?;
    let r = sweep::run(&p, &config(1)).unwrap();
    Ok((p, r))
}

/// A judge command that calls `ready()` is forked like the lives: one
/// forked judge a scenario, none started, and the exec'd judges' table.
#[test]
fn a_judge_that_calls_ready_is_forked() {
    let judge = runs_judge(false);
    let (p, forked) = judged(&judge, true).unwrap();
    let (_, exec) = judged(&judge, false).unwrap();
    assert_eq!(sweep::table(&forked.rows()), sweep::table(&exec.rows()));
    // The crash at `counted` repeats the count: one rerun.
    assert!(
        sweep::table(&forked.rows()).contains("   1 "),
        "{}",
        sweep::table(&forked.rows())
    );
    let n = forked.stats.processes.unwrap();
    assert_eq!(n.judges, 0, "{n:?}");
    assert!(n.forked_judges >= forked.stats.scenarios, "{n:?}");
    assert_eq!(p.judge_not_forked(), None);
    assert_eq!(exec.stats.processes.unwrap().forked_judges, 0);
}

/// A judge that reads the world before `ready()` judges its fork server's
/// world, not the scenario's: refused at discovery, naming both verdicts.
#[test]
fn a_judge_that_reads_the_world_before_ready_is_refused() {
    let e = judged(&runs_judge(true), true).unwrap_err().to_string();
    assert!(
        e.contains("forked from its fork server gave [(\"reruns\", 0), (\"runs\", 0)]")
            && e.contains("where exec'd it gave [(\"reruns\", 0), (\"runs\", 1)]")
            && e.contains("read the world after ready()"),
        "{e}"
    );
}

/// A judge that never calls `ready()` is started per scenario, and says why.
#[test]
fn a_judge_without_ready_is_started_per_scenario() {
    let judge = "printf '{\"reruns\": 0, \"runs\": 1}'";
    let (p, r) = judged(judge, true).unwrap();
    let n = r.stats.processes.unwrap();
    assert_eq!(n.forked_judges, 0, "{n:?}");
    assert!(n.judges >= r.stats.scenarios, "{n:?}");
    let why = p.judge_not_forked().expect("a reason");
    assert!(why.contains("ended before ready()"), "{why}");
}

/// A forked life of `ready(exit_fast=True)` ending with `end`: it leaves a
/// file unclosed and registers an atexit handler that writes another.
fn fast_exit(end: &str) -> Process {
    let script = format!(
        "import atexit, sys, crashsweep\n\
         crashsweep.ready(exit_fast=True)\n\
         crashsweep.point('start')\n\
         f = open('unclosed.txt', 'w')\n\
         f.write('kept')\n\
         atexit.register(lambda: open('atexit.txt', 'w').write('ran'))\n\
         {end}\n"
    );
    python_forked("fast", &script).judge_with(|w| {
        let read = |f: &str| std::fs::read_to_string(w.dir().join(f)).unwrap_or_default();
        let lost =
            u64::from(read("unclosed.txt") != "kept") + u64::from(read("atexit.txt") != "ran");
        Ok(sweep::Verdict::new().count("lost", lost))
    })
}

/// `ready(exit_fast=True)`: a forked life that runs to its end skips
/// Python's teardown, yet its unclosed file's buffer and its atexit
/// handler's file reach the world; `sys.exit`, `SystemExit` and an
/// exception keep the status Python gives them.
#[test]
fn a_fast_exit_keeps_buffered_writes_atexit_and_exit_statuses() {
    let p = fast_exit("pass")
        .discover()
        .unwrap_or_else(|e| panic!("{e}"));
    let r = sweep::run(&p, &config(1)).unwrap();
    assert!(
        r.scenarios.iter().all(|s| s.failure.is_none()),
        "{}",
        sweep::table(&r.rows())
    );
    for (end, status) in [
        ("sys.exit(3)", "exited with status 3"),
        ("raise SystemExit(4)", "exited with status 4"),
        ("1/0", "exited with status 1"),
    ] {
        let e = match fast_exit(end).discover() {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{end}: discovered"),
        };
        assert!(e.contains(status), "{end}: {e}");
        // The program fails exec'd too: its error, not the fork server's.
        assert!(
            e.contains("its clean run (no crash) failed: a clean life, exec'd: ")
                && !e.contains("fork server is refused"),
            "{end}: {e}"
        );
    }
}

/// The fast exit is taken: a finalizer (`__del__`) of an object still
/// alive at the end runs at Python's teardown, which the fast exit skips,
/// as `ready()`'s documentation says. The check sees the exec'd life's
/// file the forked one lacks, and refuses, saying why.
#[test]
fn a_fast_exit_skips_python_s_teardown() {
    let ran = |fast: &str| -> Result<Vec<bool>, String> {
        let script = format!(
            "import crashsweep\n\
             import os\n\
             class Noisy:\n\
             \x20   def __del__(self, open=os.open, write=os.write, flags=os.O_WRONLY | os.O_CREAT):\n\
             \x20       write(open('del.txt', flags, 0o644), b'ran')\n\
             crashsweep.ready({fast})\n\
             crashsweep.point('start')\n\
             noisy = Noisy()\n"
        );
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = std::sync::Arc::clone(&seen);
        python_forked("teardown", &script)
            .judge_with(move |w| {
                s.lock().unwrap().push(w.dir().join("del.txt").exists());
                Ok(sweep::Verdict::new().count("lost", 0))
            })
            .discover()
            .map_err(|e| e.to_string())?;
        let v = seen.lock().unwrap().clone();
        Ok(v)
    };
    let e = ran("exit_fast=True").unwrap_err();
    assert!(
        e.contains(r#"exec'd "line 10: world: del.txt (3 B)", forked "line 10: world: empty""#)
            && e.contains("ready(exit_fast=True)"),
        "{e}"
    );
    // Without it, the forked life's teardown runs the finalizer too.
    assert_eq!(ran("").unwrap(), [true]);
}
