//! What a run prints about itself: the header (which run, where its files
//! are), the clean-up of crash leftovers, a finished run found again, and
//! the end of a finished run (answer, checks, summary).

use std::path::Path;

use durable::RunId;
use serde_json::json;

use super::{How, Shared};
use crate::checks::{self, Evidence, Kind, Verdict};
use crate::exit::Exit;
use crate::exit::Failure;
use crate::files;
use crate::live::Mode;
use crate::output::{self, plural};
use crate::world::{Collected, World};

/// What the end of a finished run prints.
pub(crate) struct Report<'a> {
    /// Where the run's checkpoint lives (a file, or a store's row).
    pub(crate) checkpoint: &'a Path,
    pub(crate) run: &'a RunId,
    pub(crate) world: &'a World,
    pub(crate) already_done: bool,
    /// Live mode: the checks that compare with the recording are skipped.
    pub(crate) live: bool,
}

/// The checks of a finished run on the tracker service, saved in its world
/// when it finished: reporting it again reads them, calling nothing.
pub(crate) const SAVED_CHECKS: &str = "checks.json";

/// What [`SAVED_CHECKS`] holds.
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Verdicts {
    /// Each check's verdict, in the catalog's order.
    pub(crate) verdicts: Vec<Verdict>,
    /// The checks live mode skipped.
    pub(crate) skipped: Vec<String>,
}

impl Verdicts {
    /// The verdicts saved in `world`, if it holds them.
    pub(crate) fn load(world: &World) -> Result<Option<Verdicts>, Failure> {
        let path = world.path.join(SAVED_CHECKS);
        let Some(bytes) = files::read_regular("the run's saved checks", &path)? else {
            return Ok(None);
        };
        serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            Failure::run(
                "corrupt",
                format!("{}: cannot be read: {e}", path.display()),
            )
            .hint("remove it to check the run again against its tracker service")
        })
    }

    /// Save them in `world` (synced, 0600).
    pub(crate) fn save(&self, world: &World) -> Result<(), Failure> {
        let path = world.path.join(SAVED_CHECKS);
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Failure::run("io", format!("{}: {e}", path.display())))?;
        let opts = durable::write::WriteOptions {
            sync: true,
            points: false,
        };
        durable::write::write_atomic(world.dir()?.as_ref(), SAVED_CHECKS, &bytes, opts)
            .map_err(|e| files::io_failure("save the checks", &path, &e))
    }
}

impl Report<'_> {
    /// Evaluate the task's checks against the world and the answer.
    pub(crate) fn evaluate(
        &self,
        result: &agent::RunResult,
        issues: &[tracker::Issue],
    ) -> Verdicts {
        let world = self.world;
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
        Verdicts {
            verdicts: checks::evaluate(&catalog, &evidence),
            skipped: skipped.into_iter().map(|c| c.name).collect(),
        }
    }

    /// Print the answer, the checks' verdicts and a summary, and say how
    /// the command ends.
    pub(crate) fn print_verdicts(
        &self,
        result: &agent::RunResult,
        v: &Verdicts,
        printer: &Shared,
    ) -> Exit {
        let (run, world) = (self.run, self.world);
        let (verdicts, skipped) = (&v.verdicts, &v.skipped);
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
        p.checks(verdicts);
        if !skipped.is_empty() {
            p.detail(&format!(
                "live mode: {} check(s) that compare with the recording skipped ({})",
                skipped.len(),
                skipped.join(", ")
            ));
        }
        let u = &result.usage;
        let failed = if exit == Exit::Done {
            String::new()
        } else {
            format!("; {} FAILED", plural(verdicts.len() - passed, "check"))
        };
        let checkpoint = self.checkpoint;
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

/// The first lines: which run, where its files are. A new run's first
/// line was printed before its world was built ([`new_run_line`]).
pub(crate) fn header(
    printer: &Shared,
    (state, checkpoint): (&Path, &Path),
    (run, how): (&RunId, How),
    world: &World,
    before: Option<&durable::checkpoint::Saved<agent::state::State>>,
    (mode, mode_text): (&Mode, &str),
) {
    let p = output::lock(printer);
    let task = &world.task.name;
    let text = match before {
        None if how == How::New => None,
        None if how == How::Adopted => Some(format!(
            "adopted run {run} of task {task}: it was killed before its first save, so it goes \
             on under its own ID (the same idempotency keys) in its world; {mode_text}"
        )),
        None if how == How::Queued => Some(format!(
            "queued run {run} of task {task}: its first life; {mode_text}"
        )),
        None => Some(format!("new run {run} of task {task}; {mode_text}")),
        Some(s) => Some(format!(
            "found run {run} of task {task} in phase {} after {}; {mode_text}",
            s.phase,
            plural(s.turns as usize, "turn")
        )),
    };
    if let Some(text) = text {
        p.step(
            "run",
            &text,
            json!({"event": "run", "run": run.as_str(), "task": task,
                   "mode": mode.record(), "live": mode.is_live(),
                   "new": false, "adopted": how == How::Adopted,
                   "phase": before.map(|s| s.phase.as_str()),
                   "started": world.meta.started,
                   "state": state, "checkpoint": checkpoint, "world": world.path}),
        );
    }
    p.detail(&format!("checkpoint {}", checkpoint.display()));
    p.detail(&format!(
        "world      {} (tracker.json, workspace/)",
        world.path.display()
    ));
}

/// A new run's first line, printed before its world is built: a kill from
/// then on leaves a world whose run ID the user has seen (`--run ID`
/// continues it).
pub(crate) fn new_run_line(
    printer: &Shared,
    (state, checkpoint, world): (&Path, &Path, &Path),
    run: &RunId,
    task: &str,
    mode: &Mode,
) {
    output::lock(printer).step(
        "run",
        &format!("new run {run} of task {task}; {}", mode.describe()),
        json!({"event": "run", "run": run.as_str(), "task": task,
               "mode": mode.record(), "live": mode.is_live(),
               "new": true, "adopted": false, "phase": null,
               "state": state, "checkpoint": checkpoint, "world": world}),
    );
}

/// A run found already done: say so (it prints its saved answer and calls
/// nothing), and, if the task picked it, how to run the task again.
pub(crate) fn already_done(printer: &Shared, run: &RunId, how: How, world: &World) {
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

/// Say what [`StateDir::collect`](crate::world::StateDir::collect) removed, if anything.
pub(crate) fn report_collected(printer: &Shared, c: &Collected) {
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
