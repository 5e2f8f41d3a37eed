//! Chaos: the real `triage` binary on a real directory with synced saves,
//! killed with SIGKILL after a random delay, resumed until done; then the
//! files must show every effect exactly once, every check passed, and
//! nothing in the state directory but the run's files.
//!
//! CI runs a bounded number of iterations (`TRIAGE_CHAOS_ITERATIONS`,
//! default 30) from a fresh seed (`TRIAGE_CHAOS_SEED`, printed); `cargo
//! xtask chaos --iterations N --seed S` runs more. Iteration `i` of seed `S`
//! uses seed `S + i`, so a failing iteration prints the command that
//! replays it alone: `cargo xtask chaos --iterations 1 --seed S+i`.

use crate::common;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
    failures: Vec<(u64, String)>,
}

/// The most lives one iteration kills: the run's restart limit is 10, and
/// the final clean life must stay under it.
const MAX_KILLS: u64 = 8;

/// How long a clean run takes, roughly, so the delays spread over it.
const RUN_MS: u64 = 120;

/// Wait for `child` until it exits or `after` passes; then SIGKILL it if it
/// still runs. Whether a kill was sent (the process was still running).
fn kill_after(child: &mut Child, after: Duration) -> bool {
    let deadline = Instant::now() + after;
    while Instant::now() < deadline {
        if child.try_wait().expect("poll").is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1).min(after));
    }
    // SAFETY: kill on the child's pid, which we have not reaped.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    rc == 0
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
        let mut child = command(&args).spawn().map_err(|e| e.to_string())?;
        let killed = if life < kills {
            tally.kills_sent += 1;
            let delay = Duration::from_micros(rng.below(RUN_MS * 1000));
            kill_after(&mut child, delay)
        } else {
            false
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
        "chaos: {} iterations, {} lives, {} kills sent, {} landed mid-run ({} of them after the final save), \
         {} came after the process had exited; {} iterations resumed at least once; \
         {} ladder questions answered by a person; exits of lives not killed: {:?}; {} failed",
        tally.iterations,
        tally.lives,
        tally.kills_sent,
        tally.kills_mid_run,
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
}
