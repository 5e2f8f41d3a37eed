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
    assert!(e.contains("the restart must be the same command"), "{e}");
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
            && err.contains(" 0 fork servers"),
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
        assert_eq!((n.services, n.servers), (0, 0), "{n:?}");
        assert_eq!(n.total(), n.lives + n.forked + n.judges);
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
