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
//!    is handed to the loop's [`Checkpoint::open`](agent::Checkpoint::open)
//!    through the [`Dir`] seam ([`HeldLock`]), so one lock file covers the
//!    whole life and a second process gets "locked" at once.
//! 3. A new run's world is built whole before its checkpoint exists; a
//!    world left without one (a run killed before its first save) is
//!    adopted under its own ID, and a run's first save is marked in its
//!    world before it calls anything ([`crate::adopt`]).
//! 4. A finished run is reported, never redone: `--task` with no unfinished
//!    run reports the task's most recent finished run, calling nothing;
//!    `--new-run` starts another.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use agent::provider::Prices;
use agent::{
    Agent, ApproveAll, Approver, Event, Gated, Message, Model, ModelError, Recording, Reply,
    ScriptedModel, TerminalApprover, Tool, Tools, Unattended,
};
use agent::{Checkpoint, Phase};
use durable::{Dir, DiskDir, LockGuard, RunId};
use serde_json::{json, Value};
use triage_tools::{Backend, CodePatch, IssueComment, IssueFile, Search};

use crate::adopt;
use crate::checks::{self, Evidence, Kind};
use crate::exit::{Exit, Failure};
use crate::files;
use crate::live::Mode;
use crate::output::{self, plural, PauseCause, Printer};
use crate::remote::{self, RunTracker};
use crate::select::{Selection, Wanted};
use crate::shutdown::Shutdown;
use crate::task::{self, Catalog, Task};
use crate::world::{Collected, StateDir, World};
use crate::{Approve, Cli};

type Shared = Arc<Mutex<Printer>>;

/// Run the command; `Ok` is how a run (or the listing) ended, `Err` why the
/// command stopped early.
pub fn execute(cli: &Cli, printer: &Shared) -> Result<Exit, Failure> {
    let catalog = match &cli.tasks {
        Some(dir) => Catalog::Dir(dir.clone()),
        None => Catalog::BuiltIn,
    };
    if cli.list_tasks {
        return list_tasks(&catalog, printer);
    }
    let state = cli
        .state
        .as_ref()
        .ok_or_else(|| Failure::usage("usage", "--state DIR is required"))?;

    // 1. Input that needs no state directory.
    let task = cli.task.as_deref().map(|n| catalog.get(n)).transpose()?;
    if let Some(id) = &cli.run {
        RunId::parse(id).map_err(Failure::from)?;
    }
    let env_mode = Mode::from_env(cli.model.as_deref(), |k| std::env::var(k).ok())
        .map_err(|e| Failure::usage("live", e.to_string()))?;
    let prices = Prices::parse(cli.price.as_deref().unwrap_or(""))
        .map_err(|e| Failure::usage("price", e.to_string()))?;
    if let Some(url) = &cli.tracker {
        remote::check_url(url)?;
    }
    for (option, tool) in tool_options(cli) {
        let known = task::tool_names();
        if !known.contains(tool) {
            return Err(
                Failure::usage("unknown_tool", format!("{option} {tool:?}: no such tool"))
                    .hint(format!("the tools are {}", known.join(", "))),
            );
        }
        if let Some(task) = &task {
            check_tool_option(task, option, tool)?;
        }
    }

    // From here on SIGTERM and SIGINT stop the run at its next step, after
    // the save that records where it stopped (before this, they kill the
    // process, which the run survives like any crash).
    let shutdown = Shutdown::install().map_err(|e| {
        Failure::run(
            "io",
            format!("cannot install the SIGTERM/SIGINT handlers: {e}"),
        )
    })?;

    // 2. The state directory — created only for a new run of a known task,
    // so bad input creates nothing — and, under its lock, the clean-up of
    // crashed starts, the choice of the run and the run's lock: two starts
    // of one task at once make one run (the second waits for the first to
    // create it, then finds it held and reports "locked").
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
    let wanted = Wanted {
        task: task.as_ref().map(|t| t.name.as_str()),
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
    report_collected(printer, &collected);
    let selection = sd.select(wanted, Some(&collected))?;
    let (run, how) = match selection {
        Selection::New => match task.as_ref() {
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
    let guard = take_lock(&sd, &lock_name)?;
    // A world picked for adoption while another process held it (starting)
    // may have gained its checkpoint before that process let go: then it is
    // that run, resumed from its checkpoint.
    let how = if how == How::Adopted && files::regular("the checkpoint", &sd.checkpoint_path(&run))?
    {
        How::Existing
    } else {
        how
    };

    // 3. The world: built for a new run, read for an existing or adopted
    // one; then the temp files killed writers left in it are removed (we
    // hold the run's lock, so no writer is alive).
    let (world, before) = match (how, task.as_ref()) {
        (How::New, Some(task)) => (sd.create_world(&run, task)?, None),
        (How::Adopted, _) => {
            // Killed before its first save: its world goes on under its ID,
            // and the loop saves its first checkpoint. Judged (again) now
            // that we hold its lock.
            let world = sd.adoptable(&run)?;
            for (option, tool) in tool_options(cli) {
                check_tool_option(&world.task, option, tool)?;
            }
            (world, None)
        }
        _ => {
            // Read the checkpoint first: a corrupt one stops here, untouched.
            let path = sd.checkpoint_path(&run);
            if !files::regular("the checkpoint", &path)? {
                return Err(Failure::usage("no_such_run", format!("no run {run}")));
            }
            let state = Checkpoint::load(sd.dir().as_ref(), &run)
                .map_err(Failure::from)?
                .ok_or_else(|| Failure::usage("no_such_run", format!("no run {run}")))?;
            // A live run cannot go on as a replay: its conversation holds the
            // live model's replies, not the recording's. Refused before the
            // world is touched.
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
            let world = sd.open_world(&run)?;
            for (option, tool) in tool_options(cli) {
                check_tool_option(&world.task, option, tool)?;
            }
            (world, Some(state))
        }
    };
    drop(state_guard);
    // A run with a checkpoint got past its first save: say so in its world
    // (runs started before the mark existed get it here), so a world that
    // later loses its checkpoint is refused, not adopted. A finished run is
    // left as it is: restarting it writes nothing.
    if before.as_ref().is_some_and(|s| s.phase != Phase::Done) {
        adopt::mark_saved(&world.path, &run)?;
    }
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
    let already_done = before.as_ref().is_some_and(|s| s.phase == Phase::Done);
    // A run goes on in the mode it started in (the checkpoint records it
    // with the first reply); a run with no reply saved yet takes today's.
    let replay_kept = before
        .as_ref()
        .and_then(|s| s.mode.as_deref())
        .is_some_and(|m| m == "replay")
        && env_mode.is_live();
    let mode = if replay_kept { Mode::Replay } else { env_mode };
    let mode_text = if replay_kept {
        "replay of the recorded replies (as the run started; the API key is not used)".to_owned()
    } else {
        mode.describe()
    };

    header(
        printer,
        &sd,
        (&run, how),
        &world,
        before.as_ref(),
        (&mode, &mode_text),
    );
    if already_done {
        let p = output::lock(printer);
        p.step(
            "done",
            &format!("run {run} is already done: printing its saved answer, calling nothing"),
            json!({"event": "already_done", "run": run.as_str(),
                   "picked": if how == How::Finished { "task" } else { "run" }}),
        );
        if how == How::Finished {
            p.detail(&format!(
                "(the task's most recent run, finished: the same command reports it; to run task {} again as a new run, add --new-run)",
                world.task.name
            ));
        }
    }

    // 4. The loop, on the world's tracker (or the tracker service) and
    // workspace.
    let (tracker, seeded) = RunTracker::open(cli.tracker.as_deref(), &world, &run)?;
    if let Some(line) = tracker.describe() {
        output::lock(printer).detail(&line);
    }
    if let Some(seeded) = seeded {
        output::lock(printer).step(
            "seeded",
            &seeded.describe(),
            json!({"event": "seeded", "filed": seeded.filed, "found": seeded.found,
                   "keyed": seeded.keyed}),
        );
    }
    let ws_path = world.workspace();
    let workspace: Arc<dyn Dir> = Arc::new(DiskDir::new(&ws_path).map_err(|e| {
        Failure::run(
            "io",
            format!("cannot open the workspace {}: {e}", ws_path.display()),
        )
    })?);
    let tools = build_tools(
        &tracker.backend(),
        Arc::clone(&workspace),
        &world.task.approval,
    );
    let approver: Box<dyn Approver> = match cli.approve {
        Approve::Off => Box::new(ApproveAll),
        Approve::On if io::stdin().is_terminal() => Box::new(TerminalApprover::stdio()),
        Approve::On => Box::new(Unattended),
    };
    let mark_failed: Arc<Mutex<Option<Failure>>> = Arc::new(Mutex::new(None));
    let observer = observer(
        Arc::clone(printer),
        Hooks {
            die_after: cli.die_after.clone(),
            signal_after: cli.signal_after.clone(),
            cancel: shutdown.cancel_flag(),
            first_save: before.is_none().then(|| FirstSave {
                world: world.path.clone(),
                run: run.clone(),
                failed: Arc::clone(&mark_failed),
            }),
        },
    );
    let checkpoints = HeldLock {
        dir: sd.dir(),
        name: lock_name,
        guard: Mutex::new(Some(guard)),
    };
    let model = model(cli, &mode, prices, &world, &tools, printer)?;
    let agent = Agent::new(
        run.clone(),
        Arc::new(checkpoints),
        world.task.transcript.task.clone(),
        model,
        tools,
    )
    .with_mode(mode.record())
    .with_approver(approver)
    .with_observer(observer)
    .with_workspace(workspace)
    .with_cancel(shutdown.cancel_flag());

    match agent.run() {
        Ok(result) => {
            let report = Report {
                sd: &sd,
                run: &run,
                world: &world,
                already_done,
                live: mode.is_live(),
            };
            let exit = report.print(&result, &tracker.issues()?, printer);
            // The run is done and reported, and the command has not exited
            // yet: a kill here must not make the same command redo the job.
            crashpoint::point!("exiting");
            Ok(exit)
        }
        Err(e) => {
            let failed = mark_failed.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(failure) = failed {
                return Err(failure);
            }
            Err(loop_failure(
                e,
                &run,
                &world.task.name,
                cli,
                &shutdown,
                printer,
            ))
        }
    }
}

/// What the end of a finished run prints.
struct Report<'a> {
    sd: &'a StateDir,
    run: &'a RunId,
    world: &'a World,
    already_done: bool,
    /// Live mode: the checks that compare with the recording are skipped.
    live: bool,
}

impl Report<'_> {
    /// Evaluate the task's checks against the world and the answer, print
    /// them with the answer and a summary, and say how the command ends.
    fn print(
        &self,
        result: &agent::RunResult,
        issues: &[tracker::Issue],
        printer: &Shared,
    ) -> Exit {
        let (run, world) = (self.run, self.world);
        let evidence = Evidence {
            issues,
            workspace: &world.workspace(),
            answer: &result.answer,
            turns: result.turns,
            tokens: (result.usage.input_tokens, result.usage.output_tokens),
            recorded_tokens: world.task.recorded_tokens,
        };
        // `turns` and `paid_once` compare the run with the recorded
        // replies; a live model's replies are not those.
        let (catalog, skipped): (Vec<_>, Vec<_>) =
            world.task.checks.iter().cloned().partition(|c| {
                !(self.live && matches!(c.kind, Kind::Turns { .. } | Kind::PaidOnce))
            });
        let verdicts = checks::evaluate(&catalog, &evidence);
        let passed = verdicts.iter().filter(|v| v.passed).count();
        let exit = if passed == verdicts.len() {
            Exit::Done
        } else {
            Exit::ChecksFailed
        };
        let p = output::lock(printer);
        p.step(
            "answer",
            &result.answer,
            json!({"event": "answer", "answer": result.answer}),
        );
        p.checks(&verdicts);
        if !skipped.is_empty() {
            p.detail(&format!(
                "live mode: {} check(s) that compare with the recording skipped ({})",
                skipped.len(),
                skipped
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        let u = &result.usage;
        let failed = if exit == Exit::Done {
            String::new()
        } else {
            format!("; {} FAILED", plural(verdicts.len() - passed, "check"))
        };
        let checkpoint = self.sd.checkpoint_path(run);
        p.step(
            "summary",
            &format!(
                "run {run} is done: {}, {}, {} in / {} out tokens, ${:.4}{failed}",
                plural(result.turns as usize, "turn"),
                plural(result.resumes as usize, "restart"),
                u.input_tokens,
                u.output_tokens,
                u.dollars,
            ),
            json!({"event": "summary", "run": run.as_str(), "task": world.task.name,
                   "status": exit.name(), "exit": exit.code(),
                   "answer": result.answer, "turns": result.turns,
                   "resumes": result.resumes, "usage": u,
                   "already_done": self.already_done,
                   "checks": verdicts.iter().map(|v| json!({"name": v.name, "passed": v.passed, "detail": v.detail})).collect::<Vec<_>>(),
                   "passed": passed, "total": verdicts.len(),
                   "checkpoint": checkpoint, "world": world.path}),
        );
        p.detail(&format!("checkpoint {}", checkpoint.display()));
        exit
    }
}

/// Take `<run>.lock` without waiting: another process holding it is
/// [`durable::Error::Locked`], with the store's own message.
fn take_lock(sd: &StateDir, lock_name: &str) -> Result<LockGuard, Failure> {
    let dir = sd.dir();
    dir.lock(lock_name).map_err(|e| {
        let path = dir.path_of(lock_name);
        if e.kind() == io::ErrorKind::WouldBlock {
            Failure::from(durable::Error::Locked { path })
        } else {
            Failure::run("io", format!("cannot lock {}: {e}", path.display()))
        }
    })
}

/// The options that name a tool: `--die-after`, `--signal-after`.
fn tool_options(cli: &Cli) -> impl Iterator<Item = (&'static str, &String)> {
    [
        ("--die-after", cli.die_after.as_ref()),
        ("--signal-after", cli.signal_after.as_ref()),
    ]
    .into_iter()
    .filter_map(|(option, tool)| tool.map(|t| (option, t)))
}

/// `--die-after TOOL` (and `--signal-after TOOL`) must name a tool the task
/// calls.
fn check_tool_option(task: &Task, option: &str, tool: &str) -> Result<(), Failure> {
    let tools = task.tools();
    if tools.contains(&tool) {
        return Ok(());
    }
    Err(Failure::usage(
        "unknown_tool",
        format!("{option} {tool}: task {} never calls {tool}", task.name),
    )
    .hint(format!("it calls {}", tools.join(", "))))
}

/// How the command came to work on its run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// A new run, with a new ID and a new world.
    New,
    /// A run killed before its first save, continued under its ID.
    Adopted,
    /// A run with a checkpoint: `--run ID`, or the task's unfinished run.
    Existing,
    /// The task's most recent run, finished, picked without `--run`.
    Finished,
}

/// The first lines: which run, where its files are.
fn header(
    printer: &Shared,
    sd: &StateDir,
    (run, how): (&RunId, How),
    world: &World,
    before: Option<&durable::Saved<agent::State>>,
    (mode, mode_text): (&Mode, &str),
) {
    let p = output::lock(printer);
    let checkpoint = sd.checkpoint_path(run);
    let text = match before {
        None if how == How::Adopted => format!(
            "adopted run {run} of task {}: it was killed before its first save, so it goes on \
             under its own ID (the same idempotency keys) in its world; {mode_text}",
            world.task.name
        ),
        None => format!("new run {run} of task {}; {mode_text}", world.task.name),
        Some(s) => format!(
            "found run {run} of task {} in phase {} after {}; {mode_text}",
            world.task.name,
            s.phase,
            plural(s.turns as usize, "turn")
        ),
    };
    p.step(
        "run",
        &text,
        json!({"event": "run", "run": run.as_str(), "task": world.task.name,
               "mode": mode.record(), "live": mode.is_live(),
               "new": how == How::New, "adopted": how == How::Adopted,
               "phase": before.map(|s| s.phase.as_str()),
               "started": world.meta.started,
               "state": sd.path(), "checkpoint": checkpoint, "world": world.path}),
    );
    p.detail(&format!("checkpoint {}", checkpoint.display()));
    p.detail(&format!(
        "world      {} (tracker.json, workspace/)",
        world.path.display()
    ));
}

/// The triage tools on this run's world; tools named in `gated` wait for a
/// person's yes.
fn build_tools(tracker: &Backend, workspace: Arc<dyn Dir>, gated: &[String]) -> Tools {
    fn add<T: Tool + std::fmt::Debug + 'static>(tools: &mut Tools, tool: T, gated: &[String]) {
        if gated.iter().any(|g| g == tool.name()) {
            tools.insert(Gated(tool));
        } else {
            tools.insert(tool);
        }
    }
    let mut tools = Tools::new();
    add(&mut tools, IssueFile::new(tracker.clone()), gated);
    add(&mut tools, IssueComment::new(tracker.clone()), gated);
    add(&mut tools, Search::new(tracker.clone()), gated);
    add(&mut tools, CodePatch::new(workspace), gated);
    tools
}

/// The run's model: the recording's replies or a live provider, then
/// `--record FILE` and `--die-after-reply N` around it.
fn model(
    cli: &Cli,
    mode: &Mode,
    prices: Prices,
    world: &World,
    tools: &Tools,
    printer: &Shared,
) -> Result<Box<dyn Model>, Failure> {
    let transcript = &world.task.transcript;
    let mut model: Box<dyn Model> = match mode {
        Mode::Replay => {
            transcript
                .check_tools(tools)
                .map_err(|e| Failure::run("bad_task", e.to_string()))?;
            Box::new(ScriptedModel::new(transcript.clone()))
        }
        Mode::Live(live) => live
            .model(prices)
            .map_err(|e| Failure::usage("live", e.to_string()))?,
    };
    if let Some(path) = &cli.record {
        let mut header = match serde_json::from_str::<Value>(&world.task.text) {
            Ok(Value::Object(fields)) => fields,
            _ => serde_json::Map::new(),
        };
        header.remove("replies");
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        header.insert(
            "name".into(),
            Value::String(
                stem.filter(|s| task::valid_name(s))
                    .unwrap_or_else(|| world.task.name.clone()),
            ),
        );
        header.insert("task".into(), Value::String(transcript.task.clone()));
        model = Box::new(
            Recording::new(model, path, header)
                .map_err(|e| Failure::usage("record", e.to_string()))?,
        );
    }
    if let Some(turn) = cli.die_after_reply {
        model = Box::new(DieAfterReply {
            inner: model,
            turn,
            printer: Arc::clone(printer),
        });
    }
    Ok(model)
}

/// `--die-after-reply N`: SIGKILL as soon as reply N arrives, before the
/// loop saves it (the reply is paid for, and lost).
struct DieAfterReply {
    inner: Box<dyn Model>,
    turn: u32,
    printer: Shared,
}

impl Model for DieAfterReply {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        let reply = self.inner.reply(conversation)?;
        let turn = conversation
            .iter()
            .filter(|m| m.role == agent::Role::Assistant)
            .count()
            + 1;
        if u32::try_from(turn).is_ok_and(|t| t == self.turn) {
            let p = output::lock(&self.printer);
            kill_self(
                &p,
                &format!("--die-after-reply {turn}: reply {turn} arrived"),
                "it",
                json!({"event": "die_after_reply", "turn": turn}),
            );
        }
        Ok(reply)
    }
}

/// What the observer does besides printing: the first-save mark, the test
/// hooks, and the cancel flag `--signal-after` waits on.
struct Hooks {
    die_after: Option<String>,
    signal_after: Option<String>,
    cancel: Arc<AtomicBool>,
    /// A run without a checkpoint yet: mark its world once the loop's
    /// start save is done.
    first_save: Option<FirstSave>,
}

/// Where to write the first-save mark ([`adopt::SAVED_MARK`]), and where to
/// leave the failure if it cannot be written.
struct FirstSave {
    world: PathBuf,
    run: RunId,
    failed: Arc<Mutex<Option<Failure>>>,
}

/// The loop's observer: print each event; once a fresh run's start save is
/// done, mark it in the world before the loop calls anything (if that
/// fails, the failure is kept and the loop cancelled at its next step, so
/// no call is made unmarked); with `--die-after TOOL` die as soon as a call
/// of TOOL returns; with `--signal-after TOOL` send SIGTERM to this process
/// once, as soon as a call of TOOL returns.
fn observer(printer: Shared, hooks: Hooks) -> impl Fn(&Event) + Send {
    let signalled = AtomicBool::new(false);
    move |e: &Event| {
        let mut p = output::lock(&printer);
        p.event(e);
        if let (Event::Started { .. }, Some(first)) = (e, &hooks.first_save) {
            if let Err(failure) = adopt::mark_saved(&first.world, &first.run) {
                let failure = failure.hint(format!(
                    "the run's first checkpoint is saved and it called nothing; fix the cause \
                     and rerun to continue it (the rerun writes the mark {} first)",
                    adopt::SAVED_MARK
                ));
                *first.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
                hooks.cancel.store(true, Ordering::SeqCst);
            }
        }
        let Event::ToolReturned { tool, call, .. } = e else {
            return;
        };
        if hooks.die_after.as_ref() == Some(tool) {
            die_now(&p, tool, call);
        }
        if hooks.signal_after.as_ref() == Some(tool) && !signalled.swap(true, Ordering::SeqCst) {
            signal_now(&p, tool, call, &hooks.cancel);
        }
    }
}

/// Send SIGTERM to this process, a real signal to our own pid, in the same
/// window `--die-after` dies in: the tool has returned, its result is not
/// saved. The handler sets the cancel flag; the loop then saves the result
/// and stops at its next step.
fn signal_now(p: &Printer, tool: &str, call: &str, cancel: &AtomicBool) {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    p.step(
        "signal",
        &format!("--signal-after {tool}: {call} returned; sending SIGTERM to myself (pid {pid}) before its result is saved"),
        json!({"event": "signal_after", "tool": tool, "call": call, "pid": pid, "signal": "SIGTERM"}),
    );
    // SAFETY: sending a signal to our own pid has no memory-safety
    // preconditions; the handler installed by `Shutdown::install` only
    // stores to atomics.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    // POSIX delivers a signal a single-threaded process sends itself before
    // kill returns, so the flag is already set; should the handler run on
    // another thread, wait for it rather than let the loop race past.
    while !cancel.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
}

/// Die in the window no checkpoint can close: the tool has returned, its
/// result is not saved. A real SIGKILL, not a panic: no unwinding, no
/// destructors, no flushing by anyone but us.
fn die_now(p: &Printer, tool: &str, call: &str) -> ! {
    kill_self(
        p,
        &format!("--die-after {tool}: {call} returned"),
        "its result",
        json!({"event": "die_after", "tool": tool, "call": call}),
    )
}

/// Print what happened (`what`, and `value` with the pid added), then send
/// this process SIGKILL before `unsaved` is saved.
fn kill_self(p: &Printer, what: &str, unsaved: &str, mut value: Value) -> ! {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    value["pid"] = json!(pid);
    p.step(
        "kill",
        &format!("{what}; sending SIGKILL to myself (pid {pid}) before {unsaved} is saved"),
        value,
    );
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    // SAFETY: sending a signal to our own pid has no memory-safety
    // preconditions; SIGKILL cannot be caught, so this does not return.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    // POSIX delivers a signal sent to oneself before kill returns; never
    // run on past this point regardless.
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// Map the loop's error to the command's failure.
fn loop_failure(
    e: agent::Error,
    run: &RunId,
    task: &str,
    cli: &Cli,
    shutdown: &Shutdown,
    printer: &Shared,
) -> Failure {
    use agent::Error as E;
    match e {
        E::Checkpoint(e @ durable::Error::MaxResumes { .. }) => {
            Failure::from(e).hint(max_resumes_hint(&state_arg(cli), run, task))
        }
        E::Checkpoint(e) => Failure::from(e),
        E::Paused { waiting } => {
            let cause = output::lock(printer).pause.clone();
            let rerun = rerun_command(cli, run, None);
            let (why, hint) = match cause {
                Some(PauseCause::Approval { tool, call }) => {
                    if cli.approve == Approve::On && !io::stdin().is_terminal() {
                        (
                            format!("{tool} call {call} needs a person's approval, and stdin is not a terminal to ask at"),
                            format!(
                                "rerun at a terminal to be asked, or approve gated calls with --approve off: {}",
                                rerun_command(cli, run, Some("off"))
                            ),
                        )
                    } else {
                        (
                            format!("{tool} call {call} waits for a person's approval"),
                            format!("rerun to be asked again: {rerun}"),
                        )
                    }
                }
                Some(PauseCause::Question { tool, call, why }) => (
                    format!("{tool} call {call} may have acted before the run stopped; {why}; only a person can say whether it did"),
                    format!(
                        "rerun at a terminal with --approve on to answer: {}",
                        rerun_command(cli, run, Some("on"))
                    ),
                ),
                None => (
                    format!("waiting on a person for {}", waiting.join(", ")),
                    format!("rerun to continue: {rerun}"),
                ),
            };
            Failure::new(
                Exit::Paused,
                "paused",
                format!("run {run} is paused (phase paused, saved): {why}"),
            )
            .hint(hint)
        }
        E::Model { .. } => Failure::run("model", e.to_string()),
        E::TurnLimit { .. } | E::TokenLimit { .. } | E::DollarLimit { .. } => {
            Failure::run("limit", e.to_string())
        }
        E::OutcomeUnknown { .. } => Failure::run("outcome_unknown", e.to_string()),
        E::UnknownTool { .. } => Failure::run("unknown_tool", e.to_string()),
        E::ToolFatal { .. } => Failure::run("tool_refused", e.to_string()),
        E::BadCallId { .. } => Failure::run("bad_call_id", e.to_string()),
        E::Cancelled { phase } => Failure::new(
            Exit::Stopped,
            "stopped",
            format!(
                "run {run} stopped by {} in phase {phase} after saving; run the same command again to continue",
                shutdown.cause()
            ),
        )
        .hint(format!("or continue it by its ID: {}", rerun_command(cli, run, None))),
    }
}

/// The command that continues this run, for hints.
fn rerun_command(cli: &Cli, run: &RunId, approve: Option<&str>) -> String {
    let approve = approve.unwrap_or(match cli.approve {
        Approve::On => "on",
        Approve::Off => "off",
    });
    let tracker = cli
        .tracker
        .as_ref()
        .map_or_else(String::new, |url| format!(" --tracker {url}"));
    format!(
        "{} --state {} --run {run} --approve {approve}{tracker}",
        invocation(),
        state_arg(cli)
    )
}

/// `--state`'s value, quoted for a shell.
fn state_arg(cli: &Cli) -> String {
    let state = cli.state.as_ref().map_or_else(PathBuf::new, PathBuf::clone);
    shell_quote(&state.to_string_lossy())
}

/// How to run this program again, for hints a person can paste: the name it
/// was invoked by when that finds it on `PATH`, `cargo run -p triage --`
/// when it runs from a cargo build directory, else the path it was invoked
/// by.
pub fn invocation() -> String {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    program_name(Path::new(&argv0), std::env::var_os("PATH").as_deref())
}

/// [`invocation`] for a given `argv[0]` and `PATH`.
pub fn program_name(argv0: &Path, path_var: Option<&std::ffi::OsStr>) -> String {
    let shown = argv0.to_string_lossy();
    if shown.is_empty() {
        return "cargo run -p triage --".to_owned();
    }
    if !shown.contains('/') {
        // Found by the shell on PATH.
        return shell_quote(&shown);
    }
    let Some(file) = argv0.file_name() else {
        return shell_quote(&shown);
    };
    let me = std::fs::canonicalize(argv0).ok();
    if let (Some(me), Some(path_var)) = (&me, path_var) {
        for dir in std::env::split_paths(path_var) {
            if std::fs::canonicalize(dir.join(file)).ok().as_ref() == Some(me) {
                return shell_quote(&file.to_string_lossy());
            }
        }
    }
    // A cargo build directory: target/<profile>/triage beside .fingerprint.
    if let Some(profile_dir) = argv0.parent() {
        let profile = profile_dir
            .file_name()
            .map(|p| p.to_string_lossy().into_owned());
        if profile_dir.join(".fingerprint").is_dir() {
            return match profile.as_deref() {
                Some("debug") => "cargo run -p triage --".to_owned(),
                Some("release") => "cargo run --release -p triage --".to_owned(),
                Some(other) => format!("cargo run --profile {} -p triage --", shell_quote(other)),
                None => "cargo run -p triage --".to_owned(),
            };
        }
    }
    shell_quote(&shown)
}

/// `text` as one shell word: as it is when that is safe, else in single
/// quotes.
pub fn shell_quote(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b));
    if safe {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// Say what [`StateDir::collect`] removed, if anything.
fn report_collected(printer: &Shared, c: &Collected) {
    if c.half_built.is_empty() && c.temps.is_empty() && c.probes.is_empty() {
        return;
    }
    let mut parts = Vec::new();
    if !c.half_built.is_empty() {
        parts.push(format!(
            "{} of killed starts ({})",
            plural(c.half_built.len(), "half-built world"),
            c.half_built.join(", ")
        ));
    }
    if !c.temps.is_empty() {
        parts.push(format!(
            "{} of killed saves ({})",
            plural(c.temps.len(), "checkpoint temp file"),
            c.temps.join(", ")
        ));
    }
    if !c.probes.is_empty() {
        parts.push(format!(
            "{} of killed starts ({})",
            plural(c.probes.len(), "write probe"),
            c.probes.join(", ")
        ));
    }
    output::lock(printer).step(
        "cleanup",
        &format!("removed {}", parts.join("; ")),
        json!({"event": "cleanup",
               "half_built": c.half_built,
               "probes": c.probes,
               "checkpoint_temps": c.temps}),
    );
}

/// What the restart limit's error says to do: where to look, and the
/// options.
fn max_resumes_hint(state: &str, run: &RunId, task: &str) -> String {
    format!(
        "the run stops for good rather than restart again. Look at it: its checkpoint \
         {state}/{run}.json (phase, turns, calls, restarts) and its world {state}/{run}.world/ \
         (tracker.json, workspace/). Options: find out why it keeps stopping (each restart \
         follows a kill, a crash, a pause or a signal) and fix that; then keep the run as \
         a record, or start the task over as a new run in a fresh world: move both away \
         and run `{} --task {} --state {state}` (what this run did stays in its own world)",
        invocation(),
        shell_quote(task),
    )
}

/// `--list-tasks`: one task a line, name first.
fn list_tasks(catalog: &Catalog, printer: &Shared) -> Result<Exit, Failure> {
    let tasks = catalog.all()?;
    let width = tasks.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let p = output::lock(printer);
    for t in &tasks {
        let tools = t.tools();
        let line = format!(
            "{:<width$}  {} [{}; {} checks]",
            t.name,
            t.description,
            tools.join(", "),
            t.checks.len()
        );
        let value = json!({"name": t.name, "description": t.description,
                           "tools": tools, "approval": t.approval,
                           "calls": t.calls.len(), "checks": t.checks.len(),
                           "source": t.source});
        if p.is_json() {
            p.step("", "", value);
        } else {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{line}");
        }
    }
    Ok(Exit::Done)
}

/// The state directory as the loop's checkpoint [`Dir`], with the run's lock
/// already held: the command takes `<run>.lock` before it opens the run's
/// world, and hands the guard to [`Checkpoint::open`] when the loop asks for
/// that lock, so the lock is held without a gap from before the world is
/// touched until the life ends. Every other operation goes to the real
/// directory.
#[derive(Debug)]
struct HeldLock {
    dir: Arc<DiskDir>,
    name: String,
    guard: Mutex<Option<LockGuard>>,
}

impl Dir for HeldLock {
    fn create_temp(&self, prefix: &str) -> io::Result<String> {
        self.dir.create_temp(prefix)
    }
    fn write(&self, name: &str, data: &[u8]) -> io::Result<()> {
        self.dir.write(name, data)
    }
    fn sync(&self, name: &str) -> io::Result<()> {
        self.dir.sync(name)
    }
    fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        self.dir.rename(from, to)
    }
    fn sync_dir(&self) -> io::Result<()> {
        self.dir.sync_dir()
    }
    fn read(&self, name: &str) -> io::Result<Option<Vec<u8>>> {
        self.dir.read(name)
    }
    fn remove(&self, name: &str) -> io::Result<()> {
        self.dir.remove(name)
    }
    fn list(&self) -> io::Result<Vec<String>> {
        self.dir.list()
    }
    fn lock(&self, name: &str) -> io::Result<LockGuard> {
        if name == self.name {
            let held = self.guard.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let Some(guard) = held {
                return Ok(guard);
            }
        }
        self.dir.lock(name)
    }
    fn path_of(&self, name: &str) -> PathBuf {
        self.dir.path_of(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_lock_hands_over_its_guard_once() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Arc::new(DiskDir::new(tmp.path()).unwrap());
        let guard = dir.lock("r.lock").unwrap();
        let held = HeldLock {
            dir: Arc::clone(&dir),
            name: "r.lock".into(),
            guard: Mutex::new(Some(guard)),
        };
        let g = held.lock("r.lock").expect("the held guard");
        // The lock is still held: by the guard just handed over.
        assert_eq!(
            held.lock("r.lock").unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        drop(g);
        assert!(held.lock("r.lock").is_ok(), "released with the guard");
    }
}
