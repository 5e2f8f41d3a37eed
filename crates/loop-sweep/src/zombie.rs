//! The zombie as a dimension of the sweep (`snapshots/zombie.txt`): the
//! run's holder is *paused* at a hit instead of crashed — a long GC pause,
//! a stalled VM, `SIGSTOP` — until its lease has expired and another process
//! has claimed the run and finished it; then the paused holder goes on,
//! unaware.
//!
//! For every hit of a clean run of the real [`agent::Agent`] on a run store
//! ([`durable::store::FileStore`] on a [`MemDir`], a lease of
//! [`LEASE`]), one scenario: holder `a` runs until the hit and is held
//! there ([`crashpoint::scope::Handle::pause_at`]); once its lease has run
//! out, holder `b` runs the same run to its end on another thread (its own
//! scope); then `a` is let go. The judge counts the tracker's records. Four
//! rows: a tracker that honours keys and one that ignores them, each with
//! the tools sending the run's fencing epoch beside the key and not
//! ([`triage_tools::IssueFile::without_epoch`]).
//!
//! * `dups`: tracker records made more than once (by `a` after `b`
//!   finished, as a rule). Without the epoch a keyless zombie duplicates;
//!   with it, the tracker refuses the stale holder and nothing does.
//! * `missing`: records the job makes that the tracker does not have.
//! * how `a` ended: its next save fenced (the store has a newer holder, or
//!   the run is done), its next tool call refused as stale
//!   ([`agent::Error::Stale`]), finished none the wiser (it was held after
//!   its last save), or otherwise (named in the last column).
//! * `b blocked`: `a` was held inside a store step, holding the run's
//!   `flock`, so `b` could not claim the run (it gave up after
//!   [`LOCK_WAIT`]) and `a` finished alone.
//!
//! Every number comes from running the scenarios; the scenarios run one
//! after another, so the table is the same on every run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::model::Transcript;
use agent::tool::Tools;
use agent::{Agent, Error};
use crashpoint::scope::Handle;
use crashpoint::Hit;
use durable::store::{FileStore, RunStore};
use durable::testing::MemDir;
use durable::{Options, RunId};
use sweep::report::Table;
use tracker::{Mode, Tracker};
use triage_tools::{IssueComment, IssueFile, Search};

/// Each holder's lease. The paused holder is held at least this long
/// before the other claims the run, so its lease has expired.
pub const LEASE: Duration = Duration::from_millis(2);

/// How long a claim waits for a store step of the paused holder to let go
/// of the run's `flock`.
pub const LOCK_WAIT: Duration = Duration::from_millis(20);

/// The zombie sweep's job: file two issues, search, comment on the first,
/// answer — the tracker half of the loop's job (the workspace is a local
/// directory no epoch can fence, so its patches are left out).
pub const JOB: &str = r#"{"task": "Triage crash groups A and B: file an issue for each and note the reproduction on A's.",
 "replies": [
  {"text": "Filing one issue per group.", "calls": [
    {"id": "call_1", "tool": "issue_file", "args": {"title": "A: panic in parser", "body": "12 reports", "cause": "A"}},
    {"id": "call_2", "tool": "issue_file", "args": {"title": "B: deadlock at shutdown", "body": "3 reports", "cause": "B"}}]},
  {"text": "Checking, then noting the reproduction.", "calls": [
    {"id": "call_3", "tool": "search", "args": {"query": "parser"}},
    {"id": "call_4", "tool": "issue_comment", "args": {"issue": 1, "body": "parse(\"\") panics"}}]},
  {"text": "Filed #1 and #2; reproduction noted on #1."}]}"#;

const RUN: &str = "zombie-run";

/// One row of the table: a tracker and whether the epoch is sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZombieCase {
    /// The tracker honours idempotency keys.
    pub keyed: bool,
    /// The tools send the run and its fencing epoch with every request.
    pub epoch: bool,
}

/// The four rows, in table order.
pub const CASES: [ZombieCase; 4] = [
    ZombieCase {
        keyed: true,
        epoch: false,
    },
    ZombieCase {
        keyed: true,
        epoch: true,
    },
    ZombieCase {
        keyed: false,
        epoch: false,
    },
    ZombieCase {
        keyed: false,
        epoch: true,
    },
];

/// What one row counted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZombieRow {
    /// Scenarios: one per hit of the clean run.
    pub scenarios: usize,
    /// Scenarios with a tracker record made more than once.
    pub dups: usize,
    /// Scenarios with a record of the job missing.
    pub missing: usize,
    /// The paused holder's next save was refused (fenced or finished).
    pub fenced: usize,
    /// The paused holder's next tool call was refused as stale.
    pub stale: usize,
    /// The paused holder finished without noticing.
    pub finished: usize,
    /// The other holder could not claim the run (the paused one held the
    /// store's lock).
    pub blocked: usize,
    /// Anything else, counted; the first named.
    pub other: usize,
    /// The first scenario with a duplicate, missing record or other end.
    pub first_bad: Option<String>,
}

/// One world: the store, the tracker.
struct World {
    store: Arc<dyn RunStore>,
    tracker: Tracker,
}

impl World {
    fn new(keyed: bool) -> World {
        let store = FileStore::new(Arc::new(MemDir::new()), false).with_lock_wait(LOCK_WAIT);
        World {
            store: Arc::new(store),
            tracker: Tracker::new(if keyed { Mode::Keyed } else { Mode::Keyless }),
        }
    }

    fn agent(&self, case: ZombieCase, t: &Arc<Transcript>, owner: &str) -> Agent {
        let (file, comment) = (
            IssueFile::new(self.tracker.clone()),
            IssueComment::new(self.tracker.clone()),
        );
        let (file, comment) = if case.epoch {
            (file, comment)
        } else {
            (file.without_epoch(), comment.without_epoch())
        };
        let tools = Tools::new()
            .with(file)
            .with(comment)
            .with(Search::new(self.tracker.clone()));
        // The checkpoint directory is unused on a store.
        let unused = Arc::new(MemDir::new());
        let run =
            RunId::parse(RUN).unwrap_or_else(|e| unreachable!("{RUN} is a valid run ID: {e}"));
        Agent::scripted(run, unused, Arc::clone(t), tools)
            .unwrap_or_else(|e| unreachable!("the zombie job names only its tools: {e}"))
            .with_options(Options {
                sync: false,
                ..Options::default()
            })
            .on_store(Arc::clone(&self.store), owner, LEASE)
    }

    /// (records made more than once, records of the job missing).
    fn judge(&self) -> (usize, usize) {
        let issues = self.tracker.issues();
        let mut dups = 0;
        let mut missing = 0;
        for title in ["A: panic in parser", "B: deadlock at shutdown"] {
            match issues.iter().filter(|i| i.title == title).count() {
                0 => missing += 1,
                n => dups += n - 1,
            }
        }
        let comments: usize = issues.iter().map(|i| i.comments.len()).sum();
        match comments {
            0 => missing += 1,
            n => dups += n - 1,
        }
        (dups, missing)
    }
}

/// The hits of a clean run of `case`.
fn clean_hits(case: ZombieCase, t: &Arc<Transcript>) -> Result<Vec<Hit>, String> {
    let w = World::new(case.keyed);
    let a = w.agent(case, t, "a");
    let life = crashpoint::record(|| a.run());
    match life.outcome {
        crashpoint::Outcome::Finished(Ok(_)) => {}
        other => return Err(format!("the clean run did not finish: {other:?}")),
    }
    if life.hits.is_empty() {
        return Err("the clean run passed no point: is crashpoint's `enabled` on?".into());
    }
    let (dups, missing) = w.judge();
    if (dups, missing) != (0, 0) {
        return Err(format!(
            "the clean run's records are wrong: {dups} twice, {missing} missing"
        ));
    }
    Ok(life.hits)
}

/// Runs the run as the other process, `b`, on its own thread (while `a`
/// is held at its pause): how it ended.
fn run_other(w: &World, case: ZombieCase, t: &Arc<Transcript>) -> Result<(), String> {
    let b = w.agent(case, t, "b");
    let ran = std::thread::spawn(move || crashpoint::record(|| b.run()).outcome)
        .join()
        .map_err(|_| "b panicked".to_string());
    match ran {
        Ok(crashpoint::Outcome::Finished(Ok(_))) => Ok(()),
        Ok(crashpoint::Outcome::Finished(Err(e))) => Err(e.to_string()),
        Ok(other) => Err(format!("{other:?}")),
        Err(e) => Err(e),
    }
}

/// Sweep one row: every hit of the clean run, the holder held there.
pub fn sweep_case(case: ZombieCase) -> Result<ZombieRow, String> {
    let t = Arc::new(Transcript::parse(JOB, "the zombie job").map_err(|e| e.to_string())?);
    let hits = clean_hits(case, &t)?;
    let mut row = ZombieRow {
        scenarios: hits.len(),
        ..ZombieRow::default()
    };
    for hit in hits {
        let w = Arc::new(World::new(case.keyed));
        let a = w.agent(case, &t, "a");
        let b_ended: Arc<Mutex<Option<Result<(), String>>>> = Arc::default();
        let (wb, tb, ended) = (Arc::clone(&w), Arc::clone(&t), Arc::clone(&b_ended));
        let life = Handle::new(None)
            .pause_at(hit.clone(), move || {
                // Held past the lease; then another process runs the run.
                std::thread::sleep(LEASE * 2);
                let end = run_other(&wb, case, &tb);
                *ended.lock().unwrap_or_else(|e| e.into_inner()) = Some(end);
            })
            .run(|| a.run());
        let b_end = b_ended.lock().unwrap_or_else(|e| e.into_inner()).take();
        let (dups, missing) = w.judge();
        let bad = |what: String, row: &mut ZombieRow| {
            if row.first_bad.is_none() {
                row.first_bad = Some(format!("{hit}: {what}"));
            }
        };
        if dups > 0 {
            row.dups += 1;
            bad(format!("{dups} record(s) twice"), &mut row);
        }
        if missing > 0 {
            row.missing += 1;
            bad(format!("{missing} record(s) missing"), &mut row);
        }
        let blocked = matches!(&b_end, Some(Err(e)) if e.contains("locked"));
        match (&b_end, life.outcome) {
            (None, _) => {
                row.other += 1;
                bad("the holder never reached its pause".into(), &mut row);
            }
            (Some(Err(_)), crashpoint::Outcome::Finished(Ok(_))) if blocked => row.blocked += 1,
            (Some(Err(e)), _) => {
                row.other += 1;
                bad(format!("b: {e}"), &mut row);
            }
            (Some(Ok(())), crashpoint::Outcome::Finished(Ok(_))) => row.finished += 1,
            (Some(Ok(())), crashpoint::Outcome::Finished(Err(Error::Stale { .. }))) => {
                row.stale += 1
            }
            (
                Some(Ok(())),
                crashpoint::Outcome::Finished(Err(Error::Checkpoint(
                    durable::Error::Fenced { .. } | durable::Error::Finished { .. },
                ))),
            ) => row.fenced += 1,
            (Some(Ok(())), other) => {
                row.other += 1;
                bad(format!("a: {other:?}"), &mut row);
            }
        }
    }
    Ok(row)
}

/// The whole table, as `snapshots/zombie.txt` holds it.
pub fn render() -> Result<String, String> {
    let mut out = String::new();
    out.push_str(
        "The zombie: the run's holder paused at each hit of a clean run until its lease \
         expired and another holder finished the run, then let go (file store, in process)\n\n",
    );
    let mut table = Table::new([
        "tracker",
        "epoch sent",
        "scenarios",
        "dups",
        "missing",
        "a's save fenced",
        "a's call refused as stale",
        "a finished unaware",
        "b blocked by a's step",
        "other",
        "first bad scenario",
    ])
    .left([0, 1, 10]);
    for case in CASES {
        let r = sweep_case(case)?;
        let counts = [
            r.scenarios,
            r.dups,
            r.missing,
            r.fenced,
            r.stale,
            r.finished,
            r.blocked,
            r.other,
        ];
        table.row(
            [
                if case.keyed { "keyed" } else { "keyless" }.to_owned(),
                if case.epoch { "yes" } else { "no" }.to_owned(),
            ]
            .into_iter()
            .chain(counts.iter().map(ToString::to_string))
            .chain([r.first_bad.unwrap_or_else(|| "-".into())]),
        );
    }
    out.push_str(&table.markdown());
    Ok(out)
}
