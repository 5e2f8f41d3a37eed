//! `triage enqueue` and `triage worker`: a pool of processes, on one host
//! or many, sharing the runs of one database store.
//!
//! `enqueue` builds a new run's world in the worlds' directory (recording
//! the tracker service its tools send to), then adds the run to the store
//! as runnable, and prints its ID. A worker claims the next runnable run
//! nobody holds (`FOR UPDATE SKIP LOCKED` on Postgres), runs it to its end
//! exactly as `triage --store URL --run ID` would, and claims the next,
//! until none is left; then it exits.
//!
//! A claim from the pool is handed straight back and the run claimed again
//! by its ID, the way every command opens a run: another worker may win it
//! in between, and this one simply goes on to the next. A run that does not
//! finish here (it paused for a person, failed, or was stopped) stays
//! claimed by this worker, its lease renewed, until the worker exits, so
//! the worker does not claim it again and again; a run the worker was
//! fenced from (another process took it over) belongs to that process.
//!
//! Exit codes: 0 when no runnable run is left and every run this worker
//! ran is done with its checks passed (none at all included); 1 if some
//! run's checks failed; 3 if it was fenced from some run, or if runs other
//! processes hold were still unfinished when nothing was left to claim
//! (a worker waits one lease, and a second, for such a run's lease to end,
//! so a killed holder's run is taken over; a live holder renews its lease,
//! and the worker stops naming each run left and its holder); 4 if some run
//! waits for a person (resume it at a terminal: `triage --store URL --run
//! ID`); 5 if some run could not go on; 6 when SIGTERM or SIGINT stopped
//! it (the run under way stopped at its next step, saved). With several,
//! the highest of 5, 3, 4, 1 in that order; 2 for bad input, before any
//! claim.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use durable::RunId;
use serde_json::json;

use crate::exit::{Exit, Failure};
use crate::output::{self, Printer};
use crate::remote;
use crate::stored::{self, owner_name, Given, Heartbeat, StoreUrl};
use crate::task::Catalog;
use crate::world::StateDir;
use crate::{Cli, Enqueue, Worker};

type Shared = Arc<std::sync::Mutex<Printer>>;

/// A database store, parsed: a directory is refused (a directory's runs
/// need no queue: `triage --state DIR`).
fn database(url: &str) -> Result<StoreUrl, Failure> {
    match StoreUrl::parse(url)? {
        StoreUrl::Dir(dir) => Err(Failure::usage(
            "bad_store",
            format!(
                "--store {}: enqueue and worker need a database store (sqlite:PATH or postgres://…)",
                dir.display()
            ),
        )
        .hint("a directory's runs are run with triage --state DIR --task NAME")),
        db => Ok(db),
    }
}

/// `triage enqueue`.
pub fn enqueue(e: &Enqueue, printer: &Shared) -> Result<Exit, Failure> {
    let url = database(&e.store)?;
    let catalog = match &e.tasks {
        Some(dir) => Catalog::Dir(dir.clone()),
        None => Catalog::BuiltIn,
    };
    let task = catalog.get(&e.task)?;
    let Some(tracker) = e.tracker.as_deref() else {
        return Err(Failure::usage(
            "needs_tracker",
            "enqueue needs --tracker URL: a run on a database store sends its effects to the \
             tracker service, which refuses a stale holder by its epoch",
        )
        .hint("start one with: cargo run -p tracker -- serve --dir DIR --addr 127.0.0.1:0"));
    };
    let worlds = url.worlds(e.state.as_deref())?;
    remote::check_answers(tracker)?;
    let Some(store) = url.open(true)? else {
        return Err(Failure::run("store", "the store could not be opened"));
    };
    let sd = StateDir::open(&worlds)?;
    for _ in 0..e.count {
        // The world first, whole, then the run in the store: a run in the
        // store always has a world (a world without its run is a queued
        // run an interrupted enqueue left, picked up like any other).
        let run = RunId::generate(&task.name, SystemTime::now());
        // Under the state lock, as a start builds its world: a half-built
        // world is then only ever a killed builder's, which the next start
        // removes.
        let state_guard = sd.lock()?;
        let world = sd.create_world_for(&run, &task, Some(tracker))?;
        drop(state_guard);
        store.add(&run).map_err(Failure::from)?;
        output::lock(printer).step(
            "queued",
            &format!("run {run} of task {} on {}", task.name, url.describe()),
            json!({"event": "queued", "run": run.as_str(), "task": task.name,
                   "store": url.describe(), "world": world.path, "tracker": tracker}),
        );
    }
    Ok(Exit::Done)
}

/// `triage worker`.
pub fn work(w: &Worker, printer: &Shared) -> Result<Exit, Failure> {
    let url = database(&w.store)?;
    let worlds = url.worlds(w.state.as_deref())?;
    let shutdown = crate::run::install_shutdown()?;
    // A worker makes no store: a path that holds none is a mistake, not
    // an empty queue.
    let Some(store) = url.open(false)? else {
        return Err(Failure::usage(
            "no_such_store",
            format!("--store {}: no such database", url.describe()),
        )
        .hint("triage enqueue --store URL … creates it with the first run it queues; nothing was created"));
    };
    // A busy or restarting database is waited for within the lease.
    let store = crate::stored::Patient::wrap(store, Duration::from_secs(w.lease_secs));
    let owner = owner_name();
    let lease = Duration::from_secs(w.lease_secs);
    output::lock(printer).step(
        "worker",
        &format!(
            "{owner} on {}, worlds in {}, lease {} s",
            url.describe(),
            worlds.display(),
            w.lease_secs
        ),
        json!({"event": "worker", "owner": owner, "store": url.describe(),
               "worlds": worlds, "lease_secs": w.lease_secs}),
    );
    let cancel = shutdown.cancel_flag();
    let mut tried: BTreeSet<RunId> = BTreeSet::new();
    let mut held: Vec<Heartbeat> = Vec::new();
    let mut worst = Exit::Done;
    let mut ran = 0u32;
    let mut stopped = false;
    let mut waiting: Option<Instant> = None;
    let mut claim_now = true;
    let mut free_before: Vec<RunId> = Vec::new();
    let mut unfinished: Vec<(RunId, String)> = Vec::new();
    loop {
        if cancel.load(std::sync::atomic::Ordering::SeqCst) {
            stopped = true;
            break;
        }
        if w.max_runs.is_some_and(|max| ran >= max) {
            break;
        }
        let claimed = if claim_now {
            store.claim_next(&owner, lease).map_err(Failure::from)?
        } else {
            None
        };
        let Some((claim, _)) = claimed else {
            // Nothing to claim now; runs other processes hold may still be
            // unfinished. A dead holder's lease ends within one lease:
            // wait that long (and a second) for it, then stop saying
            // which runs are left and who holds them.
            let (left, free) = pending(store.as_ref(), &worlds, &owner)?;
            if left.is_empty() && free.is_empty() {
                break;
            }
            let until = *waiting.get_or_insert_with(|| {
                output::lock(printer).detail(&format!(
                    "{} unfinished run(s) held by other processes; waiting up to {} s for \
                     their leases to end: {}",
                    left.len(),
                    w.lease_secs + 1,
                    describe_left(&left)
                ));
                Instant::now() + lease + Duration::from_secs(1)
            });
            if Instant::now() >= until {
                unfinished = left;
                break;
            }
            // A run nobody holds may be between another worker's hand-back
            // of its pool claim and its claim by ID (milliseconds): claim
            // only once every such run was free at the last look too, so a
            // waiting worker does not snatch runs from that gap.
            claim_now = free.iter().all(|r| free_before.contains(r));
            free_before = free;
            std::thread::sleep(Duration::from_millis(300));
            continue;
        };
        waiting = None;
        claim_now = true;
        free_before.clear();
        let run = claim.run.clone();
        if tried.contains(&run) {
            // A run this worker tried already and could not finish (it
            // failed before it was claimed by ID, so nothing held it):
            // keep this claim, renewed, so the worker goes on to other
            // runs instead of trying it again and again.
            let beat = Heartbeat::start(Arc::clone(&store), run, owner.clone(), lease);
            beat.holding(claim);
            held.push(beat);
            continue;
        }
        tried.insert(run.clone());
        // Hand the claim back: the run's own command claims it by ID.
        store.release(&claim).map_err(Failure::from)?;
        let cli = run_cli(w, &worlds, &run);
        ran += 1;
        let ended = stored::execute_with(
            &cli,
            printer,
            &url,
            Some(Given {
                store: Arc::clone(&store),
                owner: owner.clone(),
                shutdown: &shutdown,
            }),
        );
        // A hook that stopped this one run set the cancel flag; only a
        // signal stops the worker.
        if !shutdown.signalled() {
            cancel.store(false, std::sync::atomic::Ordering::SeqCst);
        }
        let exit = match &ended.result {
            Ok(Exit::Done | Exit::ChecksFailed)
                if finished_by_another(store.as_ref(), &run, &owner) =>
            {
                // Another worker claimed the run between our hand-back and
                // our claim by ID, and finished it: this one only read it.
                output::lock(printer).detail(&format!(
                    "run {run}: another worker finished it before this one opened it"
                ));
                ran -= 1;
                continue;
            }
            Ok(exit) => *exit,
            Err(f) if f.kind == "leased" => {
                // Another worker won it between our release and our claim.
                output::lock(printer).detail(&format!("run {run}: another worker took it"));
                // Not tried here: if it comes back to the pool (its holder
                // gave it up), this worker may run it.
                tried.remove(&run);
                ran -= 1;
                continue;
            }
            Err(f) => {
                output::lock(printer).failure(f);
                // Input this worker was given is fine: what a run refuses
                // is that run's trouble.
                if f.exit == Exit::Usage {
                    Exit::RunError
                } else {
                    f.exit
                }
            }
        };
        output::lock(printer).step(
            "worker",
            &format!("run {run} ended: {} (exit {})", exit.name(), exit.code()),
            json!({"event": "run_ended", "run": run.as_str(), "status": exit.name(),
                   "exit": exit.code()}),
        );
        if let Some(beat) = ended.held {
            held.push(beat);
        }
        if exit == Exit::Stopped {
            stopped = true;
            break;
        }
        worst = worse(worst, exit);
    }
    Ok(wrap_up(
        printer,
        &owner,
        ran,
        held,
        &unfinished,
        (stopped, worst),
    ))
}

/// The flags of `triage --store URL --run ID` for a run this worker claimed:
/// the run is opened exactly as that command opens it.
fn run_cli(w: &Worker, worlds: &std::path::Path, run: &RunId) -> Cli {
    Cli {
        task: None,
        state: Some(worlds.to_path_buf()),
        store: Some(w.store.clone()),
        lease_secs: w.lease_secs,
        die_after: None,
        signal_after: None,
        approve: w.approve,
        run: Some(run.to_string()),
        new_run: false,
        json: w.json,
        list_tasks: false,
        tasks: None,
        model: None,
        record: None,
        price: None,
        die_after_reply: None,
        tracker: None,
        command: None,
    }
}

/// The worker's end: the runs it still holds given back, and its last line
/// (what it ran, gave back and left); the exit code, `Stopped` first, then
/// the worst run's, with runs left unfinished counted as fenced.
fn wrap_up(
    printer: &Shared,
    owner: &str,
    ran: u32,
    held: Vec<Heartbeat>,
    unfinished: &[(RunId, String)],
    (stopped, worst): (bool, Exit),
) -> Exit {
    // The runs this worker holds, once each (a run it tried and holds
    // again is one run, and a heartbeat that never won a lease holds none).
    let kept: BTreeSet<RunId> = held
        .iter()
        .filter_map(|b| b.lease().map(|l| l.run))
        .collect();
    let kept = kept.len();
    for beat in held {
        beat.release();
    }
    let exit = if stopped {
        Exit::Stopped
    } else if unfinished.is_empty() {
        worst
    } else {
        worse(worst, Exit::Locked)
    };
    let left = if unfinished.is_empty() {
        String::new()
    } else {
        format!(
            ", left {} unfinished run(s) other processes still hold ({})",
            unfinished.len(),
            describe_left(unfinished)
        )
    };
    output::lock(printer).step(
        "worker",
        &format!(
            "{owner}: ran {ran} run(s){}{left}; exit {}",
            if kept > 0 {
                format!(", gave back {kept} it could not finish")
            } else {
                String::new()
            },
            exit.code()
        ),
        json!({"event": "worker_done", "owner": owner, "ran": ran, "gave_back": kept,
               "left": unfinished.iter().map(|(r, o)| json!({"run": r.as_str(), "leased_by": o}))
                   .collect::<Vec<_>>(),
               "status": exit.name(), "exit": exit.code()}),
    );
    exit
}

/// Whether `run` is done in the store by another holder's final save: the
/// finisher's name stays on a done run's row. (A worker's claim from the
/// pool is handed back before the run's command claims it by ID; another
/// worker may claim and finish it in between, and this one then only
/// opens a done run.)
fn finished_by_another(store: &dyn durable::store::RunStore, run: &RunId, owner: &str) -> bool {
    matches!(store.load(run), Ok(Some(r)) if r.done && r.owner.as_deref() != Some(owner))
}

/// The unfinished runs in the store: those whose lease another process
/// holds (each with its holder), and those nobody holds; their worlds
/// listed, each run's row read.
type Pending = (Vec<(RunId, String)>, Vec<RunId>);

fn pending(
    store: &dyn durable::store::RunStore,
    worlds: &std::path::Path,
    owner: &str,
) -> Result<Pending, Failure> {
    let Some(sd) = StateDir::existing(worlds)? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let (mut held, mut free) = (Vec::new(), Vec::new());
    for run in sd.worlds()? {
        let Some(record) = store.load(&run).map_err(Failure::from)? else {
            continue;
        };
        if record.done {
            continue;
        }
        match record.owner {
            // A holder on this host whose process is gone: its lease is
            // ended now, not waited out.
            Some(holder)
                if holder != owner
                    && crate::stored::gone_local_holder(&holder)
                    && store.end_lease_of(&run, &holder).map_err(Failure::from)? =>
            {
                free.push(run);
            }
            Some(holder) if holder != owner => {
                let holder = match crate::stored::lease_until(store, &run) {
                    Some(until) => format!("{holder} {until}"),
                    None => holder,
                };
                held.push((run, holder));
            }
            Some(_) => {}
            None => free.push(run),
        }
    }
    Ok((held, free))
}

fn describe_left(left: &[(RunId, String)]) -> String {
    left.iter()
        .map(|(run, holder)| format!("{run} leased by {holder}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The worse of two ends, for the worker's exit code: a run that could not
/// go on, then a fenced one, then one waiting for a person, then failed
/// checks.
fn worse(a: Exit, b: Exit) -> Exit {
    let rank = |e: Exit| match e {
        Exit::RunError | Exit::Usage => 4,
        Exit::Locked => 3,
        Exit::Paused => 2,
        Exit::ChecksFailed => 1,
        Exit::Done | Exit::Stopped => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}
