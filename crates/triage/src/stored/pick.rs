//! One invocation on a database store: check the input, open the store,
//! pick the run (by listing the worlds and asking the store about each),
//! open or build its world, and hand it to the loop under a lease.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use agent::state::Checkpoint;
use durable::store::RunStore;
use durable::RunId;

use super::{owner_name, Heartbeat, StoreUrl};
use crate::adopt;
use crate::exit::{Exit, Failure};
use crate::files;
use crate::output::{self, Printer};
use crate::remote;
use crate::run::input::{check_input, check_tool_option, tool_options, Input};
use crate::run::{self, Drive, Holder, How};
use crate::shutdown::Shutdown;
use crate::task::{Catalog, Task};
use crate::world::{StateDir, World};
use crate::Cli;

type Shared = Arc<std::sync::Mutex<Printer>>;

/// What a worker hands in: its store (already open), its name, its
/// shutdown flag.
pub struct Given<'a> {
    /// The store, open.
    pub store: Arc<dyn RunStore>,
    /// This process's name as a lease holder.
    pub owner: String,
    /// The worker's SIGTERM/SIGINT flag.
    pub shutdown: &'a Shutdown,
}

/// How one run on a store ended, and the lease if this process still holds
/// it (a run that did not finish: paused, failed).
pub struct Ended {
    /// The command's result.
    pub result: Result<Exit, Failure>,
    /// Still renewing this run's lease.
    pub held: Option<Heartbeat>,
}

/// `triage --store DB …`: the direct form. The lease is given up when the
/// command ends.
pub fn execute(cli: &Cli, printer: &Shared, url: &StoreUrl) -> Result<Exit, Failure> {
    let ended = execute_with(cli, printer, url, None);
    if let Some(held) = ended.held {
        held.release();
    }
    ended.result
}

/// The direct form, or one run of a worker (`given`).
pub fn execute_with(
    cli: &Cli,
    printer: &Shared,
    url: &StoreUrl,
    given: Option<Given<'_>>,
) -> Ended {
    let mut held = None;
    let result = run_one(cli, printer, url, given, &mut held);
    Ended { result, held }
}

fn run_one(
    cli: &Cli,
    printer: &Shared,
    url: &StoreUrl,
    given: Option<Given<'_>>,
    held: &mut Option<Heartbeat>,
) -> Result<Exit, Failure> {
    let catalog = match &cli.tasks {
        Some(dir) => Catalog::Dir(dir.clone()),
        None => Catalog::BuiltIn,
    };
    // 1. Input that needs neither the store nor the worlds.
    let Input {
        task,
        env_mode,
        prices,
    } = check_input(cli, &catalog)?;
    let worlds = url.worlds(cli.state.as_deref())?;
    if cli.tracker.is_none() && cli.run.is_none() {
        return Err(no_tracker());
    }
    let installed;
    let (shutdown, store, owner) = match given {
        Some(g) => (g.shutdown, g.store, g.owner),
        None => {
            installed = Shutdown::install().map_err(|e| {
                Failure::run(
                    "io",
                    format!("cannot install the SIGTERM/SIGINT handlers: {e}"),
                )
            })?;
            // 2. The store: a new run may create the SQLite file; a run
            // named by ID must already be there.
            let create = cli.run.is_none() && task.is_some();
            if create {
                // A new run records its tracker for good: one that does
                // not answer is refused before anything is made.
                if let Some(tracker) = cli.tracker.as_deref() {
                    remote::check_answers(tracker)?;
                }
            }
            let Some(store) = url.open(create)? else {
                return Err(no_run(cli, url));
            };
            // A busy or restarting database is waited for within the lease.
            let store = super::Patient::wrap(store, Duration::from_secs(cli.lease_secs));
            (&installed, store, owner_name())
        }
    };

    // 3. The worlds' directory (created only for a new run), and under its
    // lock the choice of the run (two starts on one host make one run).
    let sd = match StateDir::existing(&worlds)? {
        Some(sd) => sd,
        None if cli.run.is_some() || task.is_none() => return Err(no_run(cli, url)),
        None => StateDir::open(&worlds)?,
    };
    let state_guard = sd.lock()?;
    // Half-built worlds a killed start or enqueue left (only one under the
    // state lock builds, and we hold it), removed as a directory's are.
    run::report::report_collected(printer, &sd.collect_half_built()?);
    let (run, how) = select(cli, &sd, store.as_ref(), task.as_ref())?;
    output::lock(printer).run = Some(run.to_string());
    let (world, before) = match (how, task.as_ref()) {
        (How::New, Some(task)) => {
            let tracker = cli.tracker.as_deref().ok_or_else(no_tracker)?;
            run::report::new_run_line(
                printer,
                (sd.path(), &store.path_of(&run), &sd.world_path(&run)),
                &run,
                &task.name,
                &env_mode,
            );
            (sd.create_world_for(&run, task, Some(tracker))?, None)
        }
        _ => {
            let world = sd.open_world(&run)?;
            for (option, tool) in tool_options(cli) {
                check_tool_option(&world.task, option, tool)?;
            }
            let before = Checkpoint::load_store(store.as_ref(), &run)
                .map_err(Failure::from)?
                .and_then(|(_, saved)| saved);
            if let Some(saved) = &before {
                run::check_live(saved, &run, &env_mode)?;
            }
            (world, before)
        }
    };
    drop(state_guard);
    if let Some(gone) = super::end_gone_holders_lease(store.as_ref(), &run)? {
        output::lock(printer).detail(&format!(
            "lease      {gone} held run {run}, and its process on this host is gone: \
             its lease ended now, so this process takes the run over"
        ));
    }
    let recorded = recorded_tracker(&run, &world, cli)?;
    let mut cli = cli.clone();
    cli.tracker = Some(recorded);

    let checkpoint_path = store.path_of(&run);
    let (already_done, mode) = run::announce(
        printer,
        (sd.path(), &checkpoint_path),
        (&run, how),
        &world,
        before.as_ref(),
        env_mode,
    );

    // 4. The loop claims the run under a lease; the heartbeat renews it
    // once the loop holds it, and the world is cleaned and marked then.
    let lease = Duration::from_secs(cli.lease_secs);
    let beat = Arc::new(Heartbeat::start(
        Arc::clone(&store),
        run.clone(),
        owner.clone(),
        lease,
    ));
    let on_claimed = claim_hook(&beat, &store, printer, &world);
    let asked = Arc::clone(&store);
    let result = run::drive(Drive {
        cli: &cli,
        printer,
        checkpoints: sd.dir(),
        checkpoint_path: checkpoint_path.clone(),
        run: &run,
        world: &world,
        fresh: before.is_none(),
        already_done,
        mode,
        prices,
        shutdown,
        holder: Holder::Store {
            store,
            owner,
            lease,
        },
        on_claimed: Some(on_claimed),
        done: run::finished_result(&run, before.as_ref()),
        written: before.map(|s| s.state.files).unwrap_or_default(),
    })
    .map_err(|f| leased_until(f, asked.as_ref(), &run));
    // The hook is gone with the loop: the heartbeat is ours alone again.
    if let Ok(beat) = Arc::try_unwrap(beat) {
        let done = matches!(result, Ok(Exit::Done | Exit::ChecksFailed));
        if done {
            drop(beat);
        } else {
            *held = Some(beat);
        }
    }
    result
}

/// `failure` of a step in the run's world, unless the run has a newer
/// holder by now: a process paused mid-step, past its lease, may find the
/// world changed under it by the process that took the run over (its temp
/// file removed as a killed writer's leftover); that is being fenced
/// (exit 3), not an I/O failure.
fn fenced_or(store: &dyn RunStore, lease: &durable::store::Lease, failure: Failure) -> Failure {
    match store.load(&lease.run) {
        Ok(Some(record)) if record.epoch != lease.epoch => Failure::from(durable::Error::Fenced {
            path: store.path_of(&lease.run),
            ours: lease.epoch,
            on_disk: record.epoch,
        }),
        _ => failure,
    }
}

/// What runs once the loop has claimed the run: the heartbeat learns the
/// lease, and under it the world is marked as past its first save and
/// cleaned of killed writers' temp files (fenced: a failure once another
/// holder has the run is exit 3). It returns the lease's epoch.
fn claim_hook(
    beat: &Arc<Heartbeat>,
    store: &Arc<dyn RunStore>,
    printer: &Shared,
    world: &World,
) -> run::OnLeased {
    let (beat, store, printer, world) = (
        Arc::clone(beat),
        Arc::clone(store),
        Arc::clone(printer),
        world.clone(),
    );
    Box::new(move || {
        beat.learn()?;
        let run = beat.run().clone();
        let Some(lease) = beat.lease() else {
            return not_held(store.as_ref(), &run);
        };
        adopt::mark_saved(&world.path, &run)
            .and_then(|()| run::remove_leftovers(&printer, &world))
            .map_err(|e| fenced_or(store.as_ref(), &lease, e))?;
        Ok(Some(lease.epoch))
    })
}

/// A run another process leases: say until when.
fn leased_until(mut failure: Failure, store: &dyn RunStore, run: &RunId) -> Failure {
    if failure.kind == "leased" {
        if let Some(until) = super::lease_until(store, run) {
            failure.message = failure.message.replace("until its lease expires", &until);
        }
    }
    failure
}

/// The loop claimed the run, yet the store names another holder: this
/// process was stopped past its lease right after its claim, and another
/// took the run over. Fenced (exit 3), before anything is written.
fn not_held(store: &dyn RunStore, run: &RunId) -> Result<Option<u64>, Failure> {
    match store.load(run).map_err(Failure::from)? {
        Some(record) if !record.done => Err(Failure::new(
            Exit::Locked,
            "fenced",
            format!(
                "run {run} was taken over by a newer holder (epoch {} in the store, held by {}) \
                 right after this process claimed it",
                record.epoch,
                record.owner.as_deref().unwrap_or("nobody now")
            ),
        )
        .hint("another process holds the run and finishes it; this one wrote nothing and called nothing")),
        // Done: the loop found it done and only reads it (or, had it opened
        // the run before it was done, its next save is refused).
        Some(_) | None => Ok(None),
    }
}

/// A database store's runs send their effects to the tracker service.
fn no_tracker() -> Failure {
    Failure::usage(
        "needs_tracker",
        "a database --store needs --tracker URL: a run's file-backed tracker lives in one \
         process's memory, so a process stopped past its lease would write its stale copy \
         over the newer holder's records; the tracker service refuses a stale holder by its \
         epoch",
    )
    .hint("start one with: cargo run -p tracker -- serve --dir DIR --addr 127.0.0.1:0, and pass its URL as --tracker")
}

/// The tracker service the run records (made on this store with one), and
/// `--tracker`, which must agree with it.
fn recorded_tracker(run: &RunId, world: &World, cli: &Cli) -> Result<String, Failure> {
    let Some(recorded) = &world.meta.tracker else {
        return Err(Failure::usage(
            "needs_tracker",
            format!(
                "run {run} records no tracker service in {}: it was not made on a database store",
                world.path.join("run.json").display()
            ),
        )
        .hint("run it with the store it was made on (its directory: --state DIR)"));
    };
    if let Some(given) = cli.tracker.as_deref().filter(|g| *g != recorded) {
        return Err(Failure::usage(
            "tracker_mismatch",
            format!("--tracker {given}: the run sends its effects to {recorded}, recorded when it was made"),
        )
        .hint(format!(
            "leave --tracker out, or pass the run's own; a run's effects cannot move to another \
             service halfway. If {recorded} is gone for good, give the run up: remove its world \
             {} and its row in the store (DELETE FROM runs WHERE run_id = '{run}'), then start \
             a new run",
            world.path.display()
        )));
    }
    remote::check_url(recorded)?;
    Ok(recorded.clone())
}

fn no_run(cli: &Cli, url: &StoreUrl) -> Failure {
    let id = cli.run.as_deref().unwrap_or_default();
    Failure::usage(
        "no_such_run",
        format!("no run {id} on {}", url.describe()),
    )
    .hint("the store or its worlds' directory does not exist, so it holds no runs; nothing was created")
}

/// The run this command works on (the same rules as a directory's,
/// [`crate::select`]): `--run ID`, or the task's one unfinished run, else
/// its most recent finished one, else (or with `--new-run`) a new run.
fn select(
    cli: &Cli,
    sd: &StateDir,
    store: &dyn RunStore,
    task: Option<&Task>,
) -> Result<(RunId, How), Failure> {
    if let Some(id) = &cli.run {
        let run = RunId::parse(id).map_err(Failure::from)?;
        if !sd.has_world(&run)? {
            return Err(Failure::usage(
                "no_such_run",
                format!("no run {run} in {}", sd.path().display()),
            )
            .hint("a run on a database store has its world in the worlds' directory (--state)"));
        }
        if let (Some(task), Some(meta)) = (task, sd.meta(&run)?) {
            if meta.task != task.name {
                return Err(Failure::usage(
                    "wrong_task",
                    format!("run {run} runs task {:?}, not {:?}", meta.task, task.name),
                ));
            }
        }
        let (how, _) = state_of(sd, store, &run)?;
        return Ok((run, how));
    }
    let Some(task) = task else {
        return Err(Failure::usage(
            "usage",
            "--task NAME or --run ID is required",
        ));
    };
    let mut unfinished: Vec<(RunId, String, How)> = Vec::new();
    let mut done: Vec<(u64, RunId)> = Vec::new();
    for run in sd.worlds()? {
        let Ok(Some(meta)) = sd.meta(&run) else {
            continue;
        };
        if meta.task != task.name {
            continue;
        }
        match state_of(sd, store, &run)? {
            (How::Finished, _) => done.push((meta.started, run)),
            (how, what) => unfinished.push((run, what, how)),
        }
    }
    let listed = |runs: &[(RunId, String, How)]| {
        runs.iter()
            .map(|(r, p, _)| format!("{r} ({p})"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if cli.new_run && !unfinished.is_empty() {
        return Err(Failure::usage(
            "unfinished_run",
            format!(
                "--new-run: task {:?} has an unfinished run: {}",
                task.name,
                listed(&unfinished)
            ),
        )
        .hint(format!(
            "continue it: the same command without --new-run (or name it with --run); to give \
             it up (its tracker service is gone for good, say), remove its world and its row: \
             {}",
            unfinished
                .iter()
                .map(|(r, _, _)| format!(
                    "{} and DELETE FROM runs WHERE run_id = '{r}'",
                    sd.path().join(format!("{r}.world")).display()
                ))
                .collect::<Vec<_>>()
                .join("; ")
        )));
    }
    match unfinished.len() {
        0 => Ok(match done.into_iter().max().filter(|_| !cli.new_run) {
            Some((_, run)) => (run, How::Finished),
            None => (RunId::generate(&task.name, SystemTime::now()), How::New),
        }),
        1 => {
            let (run, _, how) = unfinished.remove(0);
            Ok((run, how))
        }
        n => Err(Failure::usage(
            "several_runs",
            format!("task {:?} has {n} unfinished runs", task.name),
        )
        .hint(format!("pick one with --run: {}", listed(&unfinished)))),
    }
}

/// What the store says of a run with a world: done (`Finished`), with a
/// checkpoint (`Existing`), or not started (`Queued`); and a word for
/// listings. A world marked as past its first save whose run the store
/// does not hold is refused: its checkpoint is lost.
fn state_of(sd: &StateDir, store: &dyn RunStore, run: &RunId) -> Result<(How, String), Failure> {
    let loaded = Checkpoint::load_store(store, run).map_err(|e| {
        Failure::from(e).hint(format!(
            "run {run} may be the unfinished run; its row was left as it is"
        ))
    })?;
    let marked = files::regular(
        "the run's first-save mark",
        &sd.world_path(run).join(adopt::SAVED_MARK),
    )?;
    Ok(match loaded {
        None if marked => {
            return Err(Failure::run(
                "checkpoint_lost",
                format!(
                    "run {run} got past its first save, but {} has no such run",
                    store.path_of(run).display()
                ),
            )
            .hint(format!(
                "is this the store the run was made on? its world {} was left as it is",
                sd.world_path(run).display()
            )))
        }
        None => (How::Queued, "queued".to_owned()),
        Some((record, _)) if record.done => (How::Finished, "done".to_owned()),
        Some((_, Some(saved))) => (How::Existing, saved.phase.to_string()),
        Some((_, None)) => (How::Queued, "queued".to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use durable::store::{Claim, SqliteStore};

    /// A failure in the world after the run has a newer holder is being
    /// fenced (exit 3); while the run is still ours it is the failure.
    #[test]
    fn a_world_failure_after_a_newer_claim_is_fenced() {
        let tmp = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(tmp.path().join("runs.db")).unwrap();
        let run = RunId::parse("m1-x").unwrap();
        let io = || Failure::run("io", "cannot write the first-save mark");
        let Claim::Won { lease: ours, .. } = store
            .claim(&run, "paused", Duration::from_millis(1))
            .unwrap()
        else {
            panic!("the first claim wins")
        };
        let still_ours = fenced_or(&store, &ours, io());
        assert_eq!((still_ours.exit, still_ours.kind), (Exit::RunError, "io"));
        std::thread::sleep(Duration::from_millis(20));
        let Claim::Won { lease: newer, .. } = store
            .claim(&run, "rescuer", Duration::from_secs(60))
            .unwrap()
        else {
            panic!("the expired lease is taken over")
        };
        let fenced = fenced_or(&store, &ours, io());
        assert_eq!(
            (fenced.exit, fenced.kind),
            (Exit::Locked, "fenced"),
            "{fenced}"
        );
        assert!(
            fenced.message.contains(&format!("epoch {}", newer.epoch)),
            "{fenced}"
        );
    }
}
