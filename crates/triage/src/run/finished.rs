//! A finished run: its result as the checkpoint holds it, its checks kept
//! on the tracker service, and the same command reporting it again without
//! calling anything.

use durable::checkpoint::Saved;
use durable::RunId;

use super::report::{self, Report};
use super::{Drive, Shared};
use crate::exit::{Exit, Failure};
use crate::remote::RunTracker;
use agent::state::Phase;

/// The result a finished run's checkpoint holds, as the loop would return
/// it (calling nothing): `None` unless the run is done.
pub(crate) fn finished_result(
    run: &RunId,
    saved: Option<&Saved<agent::state::State>>,
) -> Option<agent::RunResult> {
    let saved = saved.filter(|s| s.phase == Phase::Done)?;
    Some(agent::RunResult {
        run: run.to_string(),
        answer: saved.answer.clone().unwrap_or_default(),
        messages: saved.messages.clone(),
        usage: saved.usage.clone(),
        turns: saved.turns,
        summary: saved.summary.clone(),
        resumes: saved.resumes,
        files: saved.files.clone(),
    })
}

/// A finished run on the tracker service, reported from the checks it
/// saved when it finished: no connection, no call (`None`: it saved none,
/// so the checks are evaluated against the service as the run ends).
pub(crate) fn report_saved(d: &Drive<'_>) -> Result<Option<Exit>, Failure> {
    let Some(result) = d.done.as_ref().filter(|_| d.cli.tracker.is_some()) else {
        return Ok(None);
    };
    let Some(verdicts) = report::Verdicts::load(d.world)? else {
        return Ok(None);
    };
    let report = Report {
        checkpoint: &d.checkpoint_path,
        run: d.run,
        world: d.world,
        already_done: true,
        live: d.mode.is_live(),
    };
    let exit = report.print_verdicts(result, &verdicts, d.printer);
    crashpoint::point!("exiting");
    Ok(Some(exit))
}

/// The loop's end: the checks, evaluated (and kept, on the service, so
/// reporting the run again calls nothing), the answer and the summary.
pub(crate) fn report_finished(
    report: &Report<'_>,
    tracker: &RunTracker,
    result: &agent::RunResult,
    printer: &Shared,
) -> Result<Exit, Failure> {
    let verdicts = report.evaluate(result, &tracker.issues()?);
    if matches!(tracker, RunTracker::Http(_)) && !report.already_done {
        verdicts.save(report.world)?;
    }
    let exit = report.print_verdicts(result, &verdicts, printer);
    // The run is done and reported, and the command has not exited yet: a
    // kill here must not make the same command redo the job.
    crashpoint::point!("exiting");
    Ok(exit)
}
