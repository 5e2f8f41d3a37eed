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
//! 3. A new run's world is built whole before its checkpoint exists.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use agent::{Agent, ApproveAll, Approver, Event, Gated, TerminalApprover, Tool, Tools, Unattended};
use agent::{Checkpoint, Phase};
use durable::{Dir, DiskDir, LockGuard, RunId};
use serde_json::json;
use triage_tools::{CodePatch, IssueComment, IssueFile, Search};

use crate::checks::{self, Evidence};
use crate::exit::{Exit, Failure};
use crate::output::{self, PauseCause, Printer};
use crate::shutdown::Shutdown;
use crate::task::{self, Catalog, Task};
use crate::world::{Selection, StateDir, World};
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

    // 2. The state directory, the run, its lock.
    let sd = StateDir::open(state)?;
    let task_name = task.as_ref().map(|t| t.name.as_str());
    let selection = sd.select(task_name, cli.run.as_deref())?;
    let (run, fresh) = match selection {
        Selection::New => {
            let task = task.as_ref().expect("select returns New only for a task");
            (RunId::generate(&task.name, SystemTime::now()), true)
        }
        Selection::Existing(run) => (run, false),
    };
    output::lock(printer).run = Some(run.to_string());
    let lock_name = Checkpoint::lock_name(&run);
    let guard = take_lock(&sd, &lock_name)?;

    // 3. The world: built for a new run, read for an existing one.
    let (world, before) = if fresh {
        let task = task.as_ref().expect("a new run has a task");
        (sd.create_world(&run, task)?, None)
    } else {
        // Read the checkpoint first: a corrupt one stops here, untouched.
        let state = Checkpoint::load(sd.dir().as_ref(), &run)
            .map_err(Failure::from)?
            .ok_or_else(|| Failure::usage("no_such_run", format!("no run {run}")))?;
        let world = sd.open_world(&run)?;
        for (option, tool) in tool_options(cli) {
            check_tool_option(&world.task, option, tool)?;
        }
        (world, Some(state))
    };
    let already_done = before.as_ref().is_some_and(|s| s.phase == Phase::Done);

    header(printer, &sd, &run, &world, before.as_ref());
    if already_done {
        output::lock(printer).step(
            "done",
            &format!("run {run} is already done: printing its saved answer, calling nothing"),
            json!({"event": "already_done", "run": run.as_str()}),
        );
    }

    // 4. The loop, on the world's tracker and workspace.
    let tracker = tracker::Tracker::open_dir(
        crate::faults::tracker_dir(world.dir()?)?,
        tracker::Mode::Keyed,
    )?;
    let ws_path = world.workspace();
    let workspace: Arc<dyn Dir> = Arc::new(DiskDir::new(&ws_path).map_err(|e| {
        Failure::run(
            "io",
            format!("cannot open the workspace {}: {e}", ws_path.display()),
        )
    })?);
    let tools = build_tools(&tracker, Arc::clone(&workspace), &world.task.approval);
    let approver: Box<dyn Approver> = match cli.approve {
        Approve::Off => Box::new(ApproveAll),
        Approve::On if io::stdin().is_terminal() => Box::new(TerminalApprover::stdio()),
        Approve::On => Box::new(Unattended),
    };
    let observer = observer(
        Arc::clone(printer),
        Hooks {
            die_after: cli.die_after.clone(),
            signal_after: cli.signal_after.clone(),
            cancel: shutdown.cancel_flag(),
        },
    );
    let checkpoints = HeldLock {
        dir: sd.dir(),
        name: lock_name,
        guard: Mutex::new(Some(guard)),
    };
    let agent = Agent::scripted(
        run.clone(),
        Arc::new(checkpoints),
        world.task.transcript.clone(),
        tools,
    )
    .map_err(|e| Failure::run("bad_task", e.to_string()))?
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
            };
            Ok(report.print(&result, &tracker.issues(), printer))
        }
        Err(e) => Err(loop_failure(e, &run, cli, &shutdown, printer)),
    }
}

/// What the end of a finished run prints.
struct Report<'a> {
    sd: &'a StateDir,
    run: &'a RunId,
    world: &'a World,
    already_done: bool,
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
        let verdicts = checks::evaluate(&world.task.checks, &evidence);
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
        let u = &result.usage;
        let failed = if exit == Exit::Done {
            String::new()
        } else {
            format!("; {} check(s) FAILED", verdicts.len() - passed)
        };
        let checkpoint = self.sd.checkpoint_path(run);
        p.step(
            "summary",
            &format!(
                "run {run} is done: {} turns, {} restart{}, {} in / {} out tokens, ${:.4}{failed}",
                result.turns,
                result.resumes,
                if result.resumes == 1 { "" } else { "s" },
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

/// The first lines: which run, where its files are.
fn header(
    printer: &Shared,
    sd: &StateDir,
    run: &RunId,
    world: &World,
    before: Option<&durable::Saved<agent::State>>,
) {
    let p = output::lock(printer);
    let checkpoint = sd.checkpoint_path(run);
    let text = match before {
        None => format!("new run {run} of task {}", world.task.name),
        Some(s) => format!(
            "found run {run} of task {} in phase {} after {} turns",
            world.task.name, s.phase, s.turns
        ),
    };
    p.step(
        "run",
        &text,
        json!({"event": "run", "run": run.as_str(), "task": world.task.name,
               "new": before.is_none(), "phase": before.map(|s| s.phase.as_str()),
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
fn build_tools(tracker: &tracker::Tracker, workspace: Arc<dyn Dir>, gated: &[String]) -> Tools {
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

/// What the observer does besides printing: the test hooks, and the cancel
/// flag `--signal-after` waits on.
struct Hooks {
    die_after: Option<String>,
    signal_after: Option<String>,
    cancel: Arc<AtomicBool>,
}

/// The loop's observer: print each event; with `--die-after TOOL` die as
/// soon as a call of TOOL returns; with `--signal-after TOOL` send SIGTERM
/// to this process once, as soon as a call of TOOL returns.
fn observer(printer: Shared, hooks: Hooks) -> impl Fn(&Event) + Send {
    let signalled = AtomicBool::new(false);
    move |e: &Event| {
        let mut p = output::lock(&printer);
        p.event(e);
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
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    p.step(
        "kill",
        &format!("--die-after {tool}: {call} returned; sending SIGKILL to myself (pid {pid}) before its result is saved"),
        json!({"event": "die_after", "tool": tool, "call": call, "pid": pid}),
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
    cli: &Cli,
    shutdown: &Shutdown,
    printer: &Shared,
) -> Failure {
    use agent::Error as E;
    match e {
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
    let state = cli.state.as_ref().map_or_else(PathBuf::new, PathBuf::clone);
    let approve = approve.unwrap_or(match cli.approve {
        Approve::On => "on",
        Approve::Off => "off",
    });
    format!(
        "triage --state {} --run {run} --approve {approve}",
        state.display()
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
