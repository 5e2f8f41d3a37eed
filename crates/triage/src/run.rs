//! One invocation of the command: pick the run, lock it, open its world,
//! replay, and report.
//!
//! The order matters:
//!
//! 1. Everything that can be checked without touching the state directory is
//!    checked first (task, run ID, `--die-after`, `--signal-after`), so bad
//!    input creates nothing. Then the SIGTERM/SIGINT handlers are installed
//!    ([`Shutdown`]): a signal sets the loop's cancel flag, and the loop
//!    stops at its next step after saving (exit 6).
//! 2. The run's lock (`<run>.lock`) is taken before its world is opened:
//!    opening the file-backed tracker removes temp files a killed writer left,
//!    which must never race a live writer in another process. The held lock
//!    is handed to the loop's [`Checkpoint::open`](agent::state::Checkpoint::open)
//!    through the [`Dir`] seam ([`HeldLock`]), so one lock file covers the
//!    whole life and a second process gets "locked" at once.
//! 3. A new run's world is built whole before its checkpoint exists; a
//!    world left without one (a run killed before its first save) is
//!    adopted under its own ID, and a run's first save is marked in its
//!    world before it calls anything ([`crate::adopt`]).
//! 4. A finished run is reported, never redone: `--task` with no unfinished
//!    run reports the task's most recent finished run, calling nothing;
//!    `--new-run` starts another.

mod failure;
mod finished;
mod hooks;
pub(crate) mod input;
mod list;
mod lock;
mod opened;
mod parts;
pub(crate) mod report;
mod seeding;
mod tools;

pub(crate) use self::finished::finished_result;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use agent::provider::Prices;
use agent::state::{Checkpoint, Phase};
use agent::Agent;
use durable::checkpoint::Saved;
use durable::dir::LockGuard;
use durable::store::RunStore;
use durable::{Dir, DiskDir, RunId};
use serde_json::json;

use self::finished::{report_finished, report_saved};
use self::hooks::{FirstSave, Hooks};
use self::input::{check_tool_option, tool_options, Input};
use self::lock::{take_lock, HeldLock};
use self::opened::open_run;
use self::report::Report;
use self::seeding::{open_tracker, seed, seed_when_leased};
use self::tools::{approver, workspace_and_tools};
use crate::exit::{Exit, Failure};
use crate::files;
use crate::live::Mode;
use crate::output::{self, plural, Printer};
use crate::select::{Selection, Wanted};
use crate::shutdown::Shutdown;
use crate::stored;
use crate::task::{Catalog, Task};
use crate::world::{StateDir, World};
use crate::Cli;

type Shared = Arc<Mutex<Printer>>;

/// Run the command; `Ok` is how a run (or the listing) ended, `Err` why the
/// command stopped early.
pub fn execute(cli: &Cli, printer: &Shared) -> Result<Exit, Failure> {
    let catalog = match &cli.tasks {
        Some(dir) => Catalog::Dir(dir.clone()),
        None => Catalog::BuiltIn,
    };
    if cli.list_tasks {
        return list::list_tasks(&catalog, printer);
    }
    // `--store DIR` is `--state DIR`; a database store goes its own way.
    let as_dir = match input::store_of(cli)? {
        input::Store::Database(url) => return stored::execute(cli, printer, &url),
        input::Store::Dir(as_dir) => as_dir,
    };
    let cli = as_dir.as_deref().unwrap_or(cli);
    let state = cli
        .state
        .as_ref()
        .ok_or_else(|| Failure::usage("usage", "--state DIR is required"))?;

    // 1. Input that needs no state directory.
    let Input {
        task,
        env_mode,
        prices,
    } = input::check_input(cli, &catalog)?;

    // From here on SIGTERM and SIGINT stop the run at its next step, after
    // the save that records where it stopped (before this, they kill the
    // process, which the run survives like any crash).
    let shutdown = install_shutdown()?;

    // 2. The state directory and the run, locked; 3. its world.
    let opened = open_run(cli, printer, state, task.as_ref(), &env_mode)?;
    let (already_done, mode) = announce(
        printer,
        (opened.sd.path(), &opened.sd.checkpoint_path(&opened.run)),
        (&opened.run, opened.how),
        &opened.world,
        opened.before.as_ref(),
        env_mode,
    );

    // 4. The loop, on the world's tracker (or the tracker service) and
    // workspace.
    drive(Drive {
        cli,
        printer,
        checkpoints: opened.sd.dir(),
        checkpoint_path: opened.sd.checkpoint_path(&opened.run),
        run: &opened.run,
        world: &opened.world,
        fresh: opened.before.is_none(),
        already_done,
        mode,
        prices,
        shutdown: &shutdown,
        holder: Holder::Lock(opened.held),
        on_claimed: None,
        done: finished_result(&opened.run, opened.before.as_ref()),
        written: opened.before.map(|s| s.state.files).unwrap_or_default(),
    })
}

/// Install the SIGTERM/SIGINT handlers ([`Shutdown`]).
pub(crate) fn install_shutdown() -> Result<Shutdown, Failure> {
    Shutdown::install().map_err(|e| {
        Failure::run(
            "io",
            format!("cannot install the SIGTERM/SIGINT handlers: {e}"),
        )
    })
}

/// Who holds the run while the loop runs.
pub(crate) enum Holder {
    /// The run's `flock`, taken before its world was opened.
    Lock(HeldLock),
    /// A lease in a run store, which the loop claims.
    Store {
        store: Arc<dyn RunStore>,
        owner: String,
        lease: Duration,
    },
}

/// A hook run once the loop holds the run (started or resumed); an error
/// stops the run before it calls anything.
pub(crate) type OnClaimed = Box<dyn Fn() -> Result<(), Failure> + Send + Sync>;

/// On a store: the hook run once the loop has claimed the run; it returns
/// the epoch of the lease this process holds (`None`: it holds none), and
/// an error stops the run before it calls anything.
pub(crate) type OnLeased = Box<dyn Fn() -> Result<Option<u64>, Failure> + Send + Sync>;

/// What [`drive`] needs: the run picked, its world open.
pub(crate) struct Drive<'a> {
    pub(crate) cli: &'a Cli,
    pub(crate) printer: &'a Shared,
    /// The loop's checkpoint directory (unused on a store).
    pub(crate) checkpoints: Arc<DiskDir>,
    /// Where the checkpoint lives, for the report.
    pub(crate) checkpoint_path: PathBuf,
    pub(crate) run: &'a RunId,
    pub(crate) world: &'a World,
    /// The run has no checkpoint yet: mark its world at its first save.
    pub(crate) fresh: bool,
    pub(crate) already_done: bool,
    pub(crate) mode: Mode,
    pub(crate) prices: Prices,
    pub(crate) shutdown: &'a Shutdown,
    pub(crate) holder: Holder,
    pub(crate) on_claimed: Option<OnLeased>,
    /// A finished run's saved result ([`finished_result`]).
    pub(crate) done: Option<agent::RunResult>,
    /// The workspace files the run wrote, as its checkpoint records them
    /// (name → SHA-256).
    pub(crate) written: std::collections::BTreeMap<String, String>,
}

/// Step 4: the loop, on the world's tracker (or the tracker service) and
/// workspace, then the report.
pub(crate) fn drive(mut d: Drive<'_>) -> Result<Exit, Failure> {
    if let Some(exit) = report_saved(&d)? {
        return Ok(exit);
    }
    let Drive {
        cli,
        printer,
        run,
        world,
        ..
    } = d;
    let tracker = open_tracker(cli, printer, world, run)?;
    // Nothing happens to the run's outside world before it is held: under
    // its lock (held now) seed at once; on a store, once the loop holds
    // the lease, with its epoch.
    let on_claimed = match d.on_claimed.take() {
        None => {
            seed(&tracker, printer, world, run, None)?;
            None
        }
        Some(hook) => Some(seed_when_leased(hook, &tracker, printer, world, run)),
    };
    let (workspace, tools) = workspace_and_tools(&d, &tracker)?;
    let approver = approver(cli);
    let mark_failed: Arc<Mutex<Option<Failure>>> = Arc::new(Mutex::new(None));
    let observer = hooks::observer(
        Arc::clone(printer),
        Hooks {
            die_after: cli.die_after.clone(),
            signal_after: cli.signal_after.clone(),
            cancel: d.shutdown.cancel_flag(),
            // On a store the claim hook writes the mark, fenced by the
            // lease's epoch.
            first_save: (d.fresh && on_claimed.is_none()).then(|| FirstSave {
                world: world.path.clone(),
                run: run.clone(),
                failed: Arc::clone(&mark_failed),
            }),
            on_claimed: on_claimed.map(|hook| (hook, Arc::clone(&mark_failed))),
        },
    );
    let model = parts::model(cli, &d.mode, d.prices, world, &tools, printer)?;
    let report = Report {
        checkpoint: &d.checkpoint_path,
        run,
        world,
        already_done: d.already_done,
        live: d.mode.is_live(),
    };
    let (checkpoints, on_store): (Arc<dyn Dir>, _) = match d.holder {
        Holder::Lock(held) => (Arc::new(held), None),
        Holder::Store {
            store,
            owner,
            lease,
        } => (d.checkpoints, Some((store, owner, lease))),
    };
    let mut agent = Agent::new(
        run.clone(),
        checkpoints,
        world.task.transcript.task.clone(),
        model,
        tools,
    )
    .with_mode(d.mode.record())
    .with_approver(approver)
    .with_observer(observer)
    .with_workspace(workspace)
    .with_cancel(d.shutdown.cancel_flag());
    if let Some((store, owner, lease)) = on_store {
        agent = agent.on_store(store, owner, lease);
    }

    match agent.run() {
        Ok(result) => report_finished(&report, &tracker, &result, printer),
        Err(e) => {
            let failed = mark_failed.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(failure) = failed {
                return Err(failure);
            }
            Err(failure::loop_failure(
                e,
                run,
                &world.task.name,
                cli,
                d.shutdown,
                printer,
            ))
        }
    }
}

/// The state directory `--state` names: one that exists, else a new one,
/// made only for a new run of a known task (anything else is refused, and
/// nothing is created).
fn state_dir(cli: &Cli, state: &Path, task: Option<&Task>) -> Result<StateDir, Failure> {
    let sd = match StateDir::existing(state)? {
        Some(sd) => sd,
        None if cli.run.is_some() || task.is_none() => {
            let id = cli.run.as_deref().unwrap_or_default();
            return Err(Failure::usage(
                "no_such_run",
                format!("no run {id} in {}", state.display()),
            )
            .hint(format!(
                "{} does not exist, so it holds no runs; nothing was created",
                state.display()
            )));
        }
        None => StateDir::open(state)?,
    };
    Ok(sd)
}

/// The run the command works on, as [`pick_run`] found and locked it.
struct Picked {
    /// The state directory's lock, held until the run's world is open.
    state_guard: LockGuard,
    run: RunId,
    how: How,
    /// `<run>.lock`, the run's lock file.
    lock_name: String,
    /// The run's lock, held.
    guard: LockGuard,
}

/// Under the state directory's lock: clean up after crashed starts, pick
/// the run, and take the run's own lock.
fn pick_run(
    cli: &Cli,
    printer: &Shared,
    sd: &StateDir,
    task: Option<&Task>,
) -> Result<Picked, Failure> {
    let wanted = Wanted {
        task: task.map(|t| t.name.as_str()),
        run: cli.run.as_deref(),
        new_run: cli.new_run,
    };
    if cli.run.is_some() {
        // An unknown run is bad input: refuse it before the state lock's
        // file is created.
        sd.select(wanted, None)?;
    }
    let state_guard = sd.lock()?;
    let collected = sd.collect()?;
    report::report_collected(printer, &collected);
    let selection = sd.select(wanted, Some(&collected))?;
    let (run, how) = match selection {
        Selection::New => match task {
            Some(task) => (RunId::generate(&task.name, SystemTime::now()), How::New),
            None => {
                return Err(Failure::usage(
                    "usage",
                    "--task NAME or --run ID is required",
                ))
            }
        },
        Selection::Existing(run) => (run, How::Existing),
        Selection::Finished(run) => (run, How::Finished),
        Selection::Adopt(run) => (run, How::Adopted),
    };
    output::lock(printer).run = Some(run.to_string());
    let lock_name = Checkpoint::lock_name(&run);
    let guard = take_lock(sd, &lock_name)?;
    // A world picked for adoption while another process held it (starting)
    // may have gained its checkpoint before that process let go: then it is
    // that run, resumed from its checkpoint.
    let how = if how == How::Adopted && files::regular("the checkpoint", &sd.checkpoint_path(&run))?
    {
        How::Existing
    } else {
        how
    };
    Ok(Picked {
        state_guard,
        run,
        how,
        lock_name,
        guard,
    })
}

/// The run's world — built for a new run, read for an existing or adopted
/// one — and, for an existing run, its checkpoint.
fn open_world(
    cli: &Cli,
    printer: &Shared,
    sd: &StateDir,
    (run, how): (&RunId, How),
    task: Option<&Task>,
    env_mode: &Mode,
) -> Result<(World, Option<Saved<agent::state::State>>), Failure> {
    let opened = match (how, task) {
        (How::New, Some(task)) => {
            // A new run's tracker must answer before its world is built.
            if let Some(tracker) = cli.tracker.as_deref() {
                crate::remote::check_answers(tracker)?;
            }
            report::new_run_line(
                printer,
                (sd.path(), &sd.checkpoint_path(run), &sd.world_path(run)),
                run,
                &task.name,
                env_mode,
            );
            (sd.create_world(run, task)?, None)
        }
        (How::Adopted, _) => {
            // Killed before its first save: its world goes on under its ID,
            // and the loop saves its first checkpoint. Judged (again) now
            // that we hold its lock.
            let world = sd.adoptable(run)?;
            for (option, tool) in tool_options(cli) {
                check_tool_option(&world.task, option, tool)?;
            }
            (world, None)
        }
        _ => {
            let state = load_checkpoint(sd, run, env_mode)?;
            let world = sd.open_world(run)?;
            for (option, tool) in tool_options(cli) {
                check_tool_option(&world.task, option, tool)?;
            }
            (world, Some(state))
        }
    };
    Ok(opened)
}

/// An existing run's checkpoint, read before its world is touched; a run
/// started live is refused as a replay.
fn load_checkpoint(
    sd: &StateDir,
    run: &RunId,
    env_mode: &Mode,
) -> Result<Saved<agent::state::State>, Failure> {
    // Read the checkpoint first: a corrupt one stops here, untouched.
    let path = sd.checkpoint_path(run);
    if !files::regular("the checkpoint", &path)? {
        return Err(Failure::usage("no_such_run", format!("no run {run}")));
    }
    let state = Checkpoint::load(sd.dir().as_ref(), run)
        .map_err(Failure::from)?
        .ok_or_else(|| Failure::usage("no_such_run", format!("no run {run}")))?;
    check_live(&state, run, env_mode)?;
    Ok(state)
}

/// A live run cannot go on as a replay: its conversation holds the live
/// model's replies, not the recording's. Refused before the world is
/// touched.
pub(crate) fn check_live(
    state: &Saved<agent::state::State>,
    run: &RunId,
    env_mode: &Mode,
) -> Result<(), Failure> {
    if let Some(saved) = state.mode.as_deref().filter(|m| m.starts_with("live")) {
        if !env_mode.is_live() && state.phase != Phase::Done {
            let var = if saved.starts_with("live anthropic") {
                "ANTHROPIC_API_KEY"
            } else {
                "OPENAI_API_KEY"
            };
            return Err(Failure::usage(
                "live_needs_key",
                format!("run {run} was started live ({saved}) and holds that model's replies; it cannot resume as a replay"),
            )
            .hint(format!("set {var} (and the endpoint it used) to resume it")));
        }
    }
    Ok(())
}

/// Remove the temp files killed writers left in the run's world, and say
/// what was removed.
pub(crate) fn remove_leftovers(printer: &Shared, world: &World) -> Result<(), Failure> {
    let removed = world.remove_leftovers()?;
    if !removed.is_empty() {
        output::lock(printer).step(
            "cleanup",
            &format!(
                "removed {} left by a killed writer in the world: {}",
                plural(removed.len(), "temp file"),
                removed.join(", ")
            ),
            json!({"event": "cleanup", "world_temps": removed}),
        );
    }
    Ok(())
}

/// Prints the run's header (and, for a finished run, its saved answer):
/// whether the run is already done, and the mode it goes on in.
pub(crate) fn announce(
    printer: &Shared,
    paths: (&Path, &Path),
    picked: (&RunId, How),
    world: &World,
    before: Option<&Saved<agent::state::State>>,
    env_mode: Mode,
) -> (bool, Mode) {
    let already_done = before.is_some_and(|s| s.phase == Phase::Done);
    let (mode, mode_text) = run_mode(before, env_mode);
    report::header(printer, paths, picked, world, before, (&mode, &mode_text));
    if already_done {
        report::already_done(printer, picked.0, picked.1, world);
    }
    (already_done, mode)
}

/// The mode the run goes on in, and how the header describes it.
fn run_mode(before: Option<&Saved<agent::state::State>>, env_mode: Mode) -> (Mode, String) {
    // A run goes on in the mode it started in (the checkpoint records it
    // with the first reply); a run with no reply saved yet takes today's.
    let replay_kept = before
        .and_then(|s| s.mode.as_deref())
        .is_some_and(|m| m == "replay")
        && env_mode.is_live();
    let mode = if replay_kept { Mode::Replay } else { env_mode };
    let mode_text = if replay_kept {
        "replay of the recorded replies (as the run started; the API key is not used)".to_owned()
    } else {
        mode.describe()
    };
    (mode, mode_text)
}

/// How the command came to work on its run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum How {
    /// A new run, with a new ID and a new world.
    New,
    /// A run killed before its first save, continued under its ID.
    Adopted,
    /// A run with a checkpoint: `--run ID`, or the task's unfinished run.
    Existing,
    /// The task's most recent run, finished, picked without `--run`.
    Finished,
    /// A run on a database store that no process has started yet (queued
    /// by `triage enqueue`, or a start stopped before its first save).
    Queued,
}
