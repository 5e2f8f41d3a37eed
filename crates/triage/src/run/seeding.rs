//! The run's tracker, opened (which changes nothing), and the task's seed
//! issues filed on the service only by the process that holds the run.

use std::sync::Arc;

use durable::RunId;
use serde_json::json;
use tracker::Fence;

use super::{OnClaimed, OnLeased, Shared};
use crate::exit::Failure;
use crate::output;
use crate::remote::RunTracker;
use crate::world::World;
use crate::Cli;

/// The run's tracker — the world's, or the tracker service — saying which.
/// Connecting changes nothing: [`seed`] files the seeds.
pub(crate) fn open_tracker(
    cli: &Cli,
    printer: &Shared,
    world: &World,
    run: &RunId,
) -> Result<RunTracker, Failure> {
    let tracker = RunTracker::open(cli.tracker.as_deref(), world, run)?;
    if let Some(line) = tracker.describe() {
        output::lock(printer).detail(&line);
    }
    Ok(tracker)
}

/// File the task's seeds on the tracker service (once per run), by the
/// process that holds the run, and say what seeding did.
pub(crate) fn seed(
    tracker: &RunTracker,
    printer: &Shared,
    world: &World,
    run: &RunId,
    fence: Option<&Fence>,
) -> Result<(), Failure> {
    if let Some(seeded) = tracker.seed(world, run, fence)? {
        output::lock(printer).step(
            "seeded",
            &seeded.describe(),
            json!({"event": "seeded", "filed": seeded.filed, "found": seeded.found,
                   "keyed": seeded.keyed}),
        );
    }
    Ok(())
}

/// The store's hook, then the seeds under the lease it reports held (two
/// workers that both picked a queued run never both seed it: only the one
/// whose claim won gets here).
pub(crate) fn seed_when_leased(
    hook: OnLeased,
    tracker: &RunTracker,
    printer: &Shared,
    world: &World,
    run: &RunId,
) -> OnClaimed {
    let (tracker, printer, world, run) = (
        tracker.clone(),
        Arc::clone(printer),
        world.clone(),
        run.clone(),
    );
    Box::new(move || {
        let Some(epoch) = hook()? else {
            return Ok(());
        };
        let fence = Fence {
            run: run.to_string(),
            epoch,
        };
        seed(&tracker, &printer, &world, &run, Some(&fence))
    })
}
