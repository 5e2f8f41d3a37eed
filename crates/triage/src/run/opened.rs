//! Steps 2 and 3 of a run: the state directory and the run, picked and
//! locked; then the run's world, opened and cleaned.

use std::path::Path;
use std::sync::Mutex;

use agent::state::Phase;
use durable::checkpoint::Saved;
use durable::RunId;

use super::lock::HeldLock;
use super::{open_world, pick_run, remove_leftovers, state_dir, How, Picked, Shared};
use crate::adopt;
use crate::exit::Failure;
use crate::live::Mode;
use crate::task::Task;
use crate::world::{StateDir, World};
use crate::Cli;

/// A run picked, locked and with its world open ([`open_run`]).
pub(super) struct Opened {
    pub(super) sd: StateDir,
    pub(super) run: RunId,
    pub(super) how: How,
    /// The run's lock, held, for the loop's checkpoints.
    pub(super) held: HeldLock,
    pub(super) world: World,
    /// The run's checkpoint, if it has one.
    pub(super) before: Option<Saved<agent::state::State>>,
}

/// Steps 2 and 3: the state directory and the run, locked; then its world.
pub(super) fn open_run(
    cli: &Cli,
    printer: &Shared,
    state: &Path,
    task: Option<&Task>,
    env_mode: &Mode,
) -> Result<Opened, Failure> {
    // 2. The state directory — created only for a new run of a known task,
    // so bad input creates nothing — and, under its lock, the clean-up of
    // crashed starts, the choice of the run and the run's lock: two starts
    // of one task at once make one run (the second waits for the first to
    // create it, then finds it held and reports "locked").
    let sd = state_dir(cli, state, task)?;
    let Picked {
        state_guard,
        run,
        how,
        lock_name,
        guard,
    } = pick_run(cli, printer, &sd, task)?;

    // 3. The world: built for a new run, read for an existing or adopted
    // one; then the temp files killed writers left in it are removed (we
    // hold the run's lock, so no writer is alive).
    let (world, before) = open_world(cli, printer, &sd, (&run, how), task, env_mode)?;
    drop(state_guard);
    // A run with a checkpoint got past its first save: say so in its world
    // (runs started before the mark existed get it here), so a world that
    // later loses its checkpoint is refused, not adopted. A finished run is
    // left as it is: restarting it writes nothing.
    if before.as_ref().is_some_and(|s| s.phase != Phase::Done) {
        adopt::mark_saved(&world.path, &run)?;
    }
    remove_leftovers(printer, &world)?;
    let held = HeldLock {
        dir: sd.dir(),
        name: lock_name,
        guard: Mutex::new(Some(guard)),
    };
    Ok(Opened {
        sd,
        run,
        how,
        held,
        world,
        before,
    })
}
