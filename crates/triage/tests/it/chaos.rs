//! Chaos: the real `triage` binary on a real directory with synced saves,
//! killed with SIGKILL at a random moment of its run, resumed until done;
//! then the files must show every effect exactly once, every check passed,
//! and nothing in the state directory but the run's files.
//!
//! The kills are aimed, so that they land while the program runs rather
//! than after it has exited: a killed life runs under the point protocol
//! (`docs/point-protocol.md`), with this test as its harness. The test
//! counts the hits the task's clean run passes (once per task), picks a hit
//! `k` among those the life has left, answers every hit up to `k`, and then
//! kills the program at a random moment before its next point (or at that
//! point, if it comes first): a random instant of the run, but one at which
//! the program is known to be running. The summary prints the fraction of
//! kills that landed mid-run, and the test requires 80 % of them to.
//!
//! CI runs a bounded number of iterations (`TRIAGE_CHAOS_ITERATIONS`,
//! default 30) from a fresh seed (`TRIAGE_CHAOS_SEED`, printed); `cargo
//! xtask chaos --iterations N --seed S` runs more. Iteration `i` of seed `S`
//! uses seed `S + i`, so a failing iteration prints the command that
//! replays it alone: `cargo xtask chaos --iterations 1 --seed S+i`.

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::{Child, Command};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent::state::Phase;
use common::*;

/// SplitMix64: a small seeded generator, enough to pick delays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What happened in the iterations.
#[derive(Debug, Default)]
struct Tally {
    iterations: u64,
    lives: u64,
    kills_sent: u64,
    /// The process was still running and died of the SIGKILL.
    kills_mid_run: u64,
    /// The process had already exited when the kill came.
    kills_too_late: u64,
    /// Kills that landed after the run's final save (the process was
    /// still printing its report).
    killed_when_done: u64,
    /// How the lives that were not killed ended, by exit code.
    exits: BTreeMap<String, u64>,
    /// Ladder questions a person (the test, at a terminal) answered.
    asked: u64,
    /// Iterations in which a run took more than one life.
    resumed: u64,
    /// Hits each task's clean run passes, counted once per task.
    clean_hits: BTreeMap<String, u64>,
    failures: Vec<(u64, String)>,
}

impl Tally {
    /// The share of the kills sent that landed while the program ran.
    fn mid_run_fraction(&self) -> f64 {
        if self.kills_sent == 0 {
            return 1.0;
        }
        self.kills_mid_run as f64 / self.kills_sent as f64
    }
}

/// The most lives one iteration kills: the run's restart limit is 10, and
/// the final clean life must stay under it.
const MAX_KILLS: u64 = 8;

/// How long a clean run takes, roughly: the random moment after the
/// aimed hit is drawn from up to this divided by the clean run's hits.
const RUN_MS: u64 = 120;

/// The least share of kills that must land mid-run (when there are enough
/// kills to tell).
const MID_RUN_AT_LEAST: f64 = 0.8;

/// The harness's end of the point protocol for one life: `command` started
/// with the other end as descriptor 3 (`CRASHSWEEP_FD`).
fn spawn_under_protocol(mut cmd: Command) -> Result<(Child, UnixStream), String> {
    let (ours, theirs) = UnixStream::pair().map_err(|e| e.to_string())?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
    cmd.env("CRASHSWEEP_FD", "3")
        .env("CRASHSWEEP_PROTOCOL", "1");
    // SAFETY: only dup2 between fork and exec (async-signal-safe); the copy
    // as descriptor 3 stays open across exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().map_err(|e| e.to_string())?;
    drop(theirs);
    Ok((child, ours))
}

/// How a life under the protocol went: the hits it passed (answered), and
/// whether a kill was sent while it still reported hits or ran.
struct Aimed {
    hits: u64,
    kill_sent: bool,
}

/// Answer `child`'s hits; at hit `at` (if any) answer it too, then wait up
/// to `then` for the next hit: kill the program at that hit (unanswered)
/// or, if it has not come, wherever the program is. With `at` = `None`,
/// answer every hit to the end.
fn run_aimed(
    child: &mut Child,
    ours: UnixStream,
    at: Option<u64>,
    then: Duration,
) -> Result<Aimed, String> {
    let io = |e: std::io::Error| format!("the point protocol: {e}");
    let mut writer = ours.try_clone().map_err(io)?;
    ours.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(io)?;
    let mut reader = BufReader::new(ours);
    let mut hits = 0;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(io)? == 0 {
            // The program closed its end: it exited before the aimed hit.
            return Ok(Aimed {
                hits,
                kill_sent: false,
            });
        }
        if !line.starts_with("hit ") {
            return Err(format!("the point protocol: unexpected line {line:?}"));
        }
        hits += 1;
        writer.write_all(b"go\n").map_err(io)?;
        if Some(hits) == at {
            break;
        }
    }
    // The aimed hit was answered: the program runs. Kill it within `then`,
    // at its next point if it reaches one first.
    reader
        .get_ref()
        .set_read_timeout(Some(then.max(Duration::from_micros(1))))
        .map_err(io)?;
    line.clear();
    match reader.read_line(&mut line) {
        Ok(_) => {}
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) => {}
        Err(e) => return Err(io(e)),
    }
    // SAFETY: kill on the child's pid, which we have not reaped.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    Ok(Aimed {
        hits,
        kill_sent: rc == 0,
    })
}

/// The hits the clean run of `task` passes (a run of its own, answered to
/// the end under the protocol).
fn clean_hits(task: &TaskFile) -> Result<u64, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let state = tmp.path().join("state");
    let args = [
        "--task",
        task.name.as_str(),
        "--state",
        arg(&state),
        "--approve",
        "off",
    ];
    let (mut child, ours) = spawn_under_protocol(command(&args))?;
    let aimed = run_aimed(&mut child, ours, None, Duration::ZERO)?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "the clean run of task {} ended {:?}",
            task.name, out.status
        ));
    }
    Ok(aimed.hits)
}

/// What a truthful person answers to "did this patch happen?": the task
/// patches the file once, so it happened if and only if the file no longer
/// holds what the task seeded.
fn person_answer(
    task: &TaskFile,
    state: &std::path::Path,
    stderr: &str,
) -> Result<&'static str, String> {
    let call_id = stderr
        .split("code_patch call ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .ok_or_else(|| format!("which call is asked about? {stderr}"))?;
    let calls = task.calls();
    let call = calls
        .iter()
        .find(|c| c.id == call_id)
        .ok_or_else(|| format!("no call {call_id} in task {}", task.name))?;
    let path = call.args["path"].as_str().unwrap_or_default();
    let patches = calls
        .iter()
        .filter(|c| c.tool == "code_patch" && c.args["path"] == path)
        .count();
    if patches != 1 {
        return Err(format!(
            "{path} is patched {patches} times: no simple truth to answer with"
        ));
    }
    let run = only_run(state);
    let now = std::fs::read_to_string(world(state, &run).join("workspace").join(path)).ok();
    let seeded = task.json["workspace"][path].as_str().map(str::to_owned);
    Ok(if now == seeded {
        "r\n"
    } else {
        "done the patch is in the file\n"
    })
}

/// One iteration from `seed`: start, kill, resume until done, check.
fn iteration(seed: u64, tally: &mut Tally) -> Result<(), String> {
    let mut rng = Rng(seed);
    let tasks = tasks();
    let task = &tasks[rng.below(tasks.len() as u64) as usize];
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let state = tmp.path().join("state");
    let s = arg(&state);
    let by_task = [
        "--task",
        task.name.as_str(),
        "--state",
        s,
        "--approve",
        "off",
    ];
    let kills = rng.below(MAX_KILLS + 1);
    let expected = match tally.clean_hits.get(&task.name) {
        Some(&n) => n,
        None => {
            let n = clean_hits(task)?;
            tally.clean_hits.insert(task.name.clone(), n);
            n
        }
    };
    // Hits the killed lives passed so far: a resumed life has about the
    // clean run's hits less these left.
    let mut passed = 0;
    let mut lives = 0;
    let mut done = None;
    // What each life did, for the message of a failure.
    let mut log = Vec::new();
    for life in 0..=MAX_KILLS + 1 {
        lives += 1;
        // A kill that landed after the final save leaves a done run: the
        // same command reports it, calling nothing (and exits 0), as it
        // would for a person or a supervisor that reruns until exit 0.
        let existing = if state.exists() {
            runs(&state)
        } else {
            Vec::new()
        };
        if existing
            .iter()
            .any(|r| checkpoint(&state, r).phase == Phase::Done)
        {
            tally.killed_when_done += 1;
        }
        let args: Vec<&str> = by_task.to_vec();
        let (child, killed) = if life < kills {
            tally.kills_sent += 1;
            let left = expected.saturating_sub(passed).max(1);
            let at = 1 + rng.below(left);
            let gap = RUN_MS * 1000 / expected.max(1);
            let then = Duration::from_micros(rng.below(gap.max(1)));
            let (mut child, ours) = spawn_under_protocol(command(&args))?;
            let aimed = run_aimed(&mut child, ours, Some(at), then)?;
            passed += aimed.hits;
            (child, aimed.kill_sent)
        } else {
            (command(&args).spawn().map_err(|e| e.to_string())?, false)
        };
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        use std::os::unix::process::ExitStatusExt;
        let first = stdout
            .lines()
            .next()
            .unwrap_or("(nothing printed)")
            .to_owned();
        if killed && out.status.signal() == Some(libc::SIGKILL) {
            tally.kills_mid_run += 1;
            log.push(format!(
                "life {}: killed mid-run; it printed first: {first}",
                life + 1
            ));
            continue;
        }
        log.push(format!(
            "life {}: {:?}; it printed first: {first}",
            life + 1,
            out.status
        ));
        if life < kills {
            tally.kills_too_late += 1;
        }
        let code = out.status.code();
        *tally
            .exits
            .entry(code.map_or_else(|| format!("{:?}", out.status), |c| c.to_string()))
            .or_default() += 1;
        match code {
            Some(0) => {
                done = Some(stdout);
                break;
            }
            // A kill between a patch and its save, of a patch whose new
            // text holds the old one, is a question only a person can
            // answer (the ladder's rung 3): answer it truthfully, at a
            // terminal, from the workspace, as a person would.
            Some(4) if stderr.contains("only a person can say whether it did") => {
                tally.asked += 1;
                let answer = person_answer(task, &state, &stderr)?;
                let run = only_run(&state);
                let mut person =
                    AtTerminal::spawn(&["--run", run.as_str(), "--state", s, "--approve", "on"]);
                person.answer_prompts(&[
                    (
                        "did it happen? [r]erun (it did not) / [d]one <what you found> / [l]ater: ",
                        answer,
                    ),
                    ("? [y]es / [n]o [reason] / [l]ater: ", "y\n"),
                ]);
                let out = person.finish();
                lives += 1;
                log.push(format!("life {}: a person answered {answer:?}: {:?}", life + 2, out.status));
                if out.code() == Some(0) {
                    done = Some(out.stdout);
                    break;
                }
                return Err(format!(
                    "after a person answered, task {} ended {:?}\n--- stdout\n{}--- stderr\n{}",
                    task.name, out.status, out.stdout, out.stderr
                ));
            }
            _ => {
                return Err(format!(
                    "life {} of task {} ended {:?} (not killed by the test)\n--- stdout\n{stdout}--- stderr\n{stderr}",
                    life + 1,
                    task.name,
                    out.status
                ))
            }
        }
    }
    tally.lives += lives;
    if lives > 1 {
        tally.resumed += 1;
    }
    let Some(stdout) = done else {
        return Err(format!("task {}: not done after {lives} lives", task.name));
    };
    // From the files: the checks, the effects, the checkpoint, the tree.
    let checked = catch_unwind(AssertUnwindSafe(|| {
        assert!(stdout.contains(&all_passed(task)), "{stdout}");
        let run = only_run(&state);
        let st = checkpoint(&state, &run);
        assert_eq!(st.phase, Phase::Done, "the checkpoint says done");
        assert_each_effect_once(task, &tracker(&state, &run));
        let created = created_files(task);
        let created: Vec<&str> = created.iter().map(String::as_str).collect();
        // The state directory's own lock is the command's, not a leftover.
        let mut want = one_run_files(&run, task, &created);
        want.remove(".triage.lock");
        let mut held = tree(&state);
        held.remove(".triage.lock");
        assert_eq!(
            held, want,
            "the state directory holds nothing but the run's files"
        );
    }));
    checked.map_err(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
            .unwrap_or_default();
        format!(
            "task {} after {lives} lives: {msg}\n{}\nthe state directory held: {:?}",
            task.name,
            log.join("\n"),
            tree(&state)
        )
    })
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    match v.parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={v:?} is not a number"),
    }
}

#[test]
fn chaos_kill_and_resume_until_done() {
    let iterations = env_u64("TRIAGE_CHAOS_ITERATIONS").unwrap_or(30);
    let seed = env_u64("TRIAGE_CHAOS_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    println!("chaos: {iterations} iterations from seed {seed}");
    let mut tally = Tally::default();
    for i in 0..iterations {
        let s = seed.wrapping_add(i);
        tally.iterations += 1;
        if let Err(e) = iteration(s, &mut tally) {
            eprintln!(
                "chaos: iteration {i} (seed {s}) FAILED: {e}\nreplay it: cargo xtask chaos --iterations 1 --seed {s}"
            );
            tally.failures.push((s, e));
        }
    }
    println!(
        "chaos: {} iterations, {} lives, {} kills sent, {} landed mid-run ({:.0} %; {} of them after the final save), \
         {} came after the process had exited; {} iterations resumed at least once; \
         {} ladder questions answered by a person; exits of lives not killed: {:?}; {} failed",
        tally.iterations,
        tally.lives,
        tally.kills_sent,
        tally.kills_mid_run,
        100.0 * tally.mid_run_fraction(),
        tally.killed_when_done,
        tally.kills_too_late,
        tally.resumed,
        tally.asked,
        tally.exits,
        tally.failures.len()
    );
    let replay: Vec<String> = tally
        .failures
        .iter()
        .map(|(s, _)| format!("cargo xtask chaos --iterations 1 --seed {s}"))
        .collect();
    assert!(
        tally.failures.is_empty(),
        "{} of {} iterations failed; replay with:\n{}",
        tally.failures.len(),
        tally.iterations,
        replay.join("\n")
    );
    // A kill that comes after the program exited tests nothing: the kills
    // are aimed, and most of them must land (with enough kills to tell).
    assert!(
        tally.kills_sent < 10 || tally.mid_run_fraction() >= MID_RUN_AT_LEAST,
        "only {} of {} kills landed mid-run ({:.0} %, at least {:.0} % wanted)",
        tally.kills_mid_run,
        tally.kills_sent,
        100.0 * tally.mid_run_fraction(),
        100.0 * MID_RUN_AT_LEAST
    );
}
