//! Shared lives for the loop's subjects: a world is copied whole (the
//! checkpoint directory and the workspace — in memory or power-loss
//! directories with their watch on the saves —, the tracker, the tallies)
//! and hashed whole; a world in memory is also captured while a life runs
//! (each restart starts from the copy taken at its crash hit). A
//! power-loss world is not captured: a copy needs its directories with no
//! lock held, so each of its scenarios runs its crashed life again. A world whose tracker is served over HTTP, whose
//! checkpoint directory has a fault injector, or whose model the caller
//! supplied is not shared (a copy could not carry the socket, the armed
//! faults or the model's own state): those sweep brute force.

use std::sync::Arc;

use durable::Dir;
use sweep::sharing::{Capture, Fingerprint, Share};

use crate::world::{LoopWorld, PowerWorld};
use crate::LoopSubject;

/// One of a copied world's directories.
type Dirs = Arc<dyn Dir>;

impl Share<LoopWorld> for LoopSubject {
    fn copy(&self, w: &LoopWorld) -> Option<LoopWorld> {
        if self.http || self.faults.is_some() || self.model.is_some() {
            return None;
        }
        if w.http.is_some() || w.faults.is_some() {
            return None;
        }
        let tracker = w.tracker.deep_clone()?;
        let tally = Arc::new(w.tally.deep_copy());
        let (checkpoints, files, workspace, power, mem): (Dirs, Dirs, Dirs, _, _) =
            match (&w.power, &w.mem, self.variant.power) {
                (None, Some((cp, ws)), None) => {
                    let (cp, ws) = (cp.deep_clone()?, ws.deep_clone()?);
                    let mem = Some((cp.clone(), ws.clone()));
                    let cp = Arc::new(cp);
                    (cp.clone(), cp, Arc::new(ws), None, mem)
                }
                (Some(p), None, Some(power)) => {
                    let cp = p.checkpoints.deep_clone()?;
                    let ws = p.workspace.deep_clone()?;
                    let watch = p.watch.deep_clone_over(power.writer.wrap(cp.clone()));
                    (
                        Arc::new(watch.clone()),
                        Arc::new(cp.clone()),
                        Arc::new(ws.clone()),
                        Some(PowerWorld {
                            checkpoints: cp,
                            workspace: ws,
                            watch,
                            last_cut: p.last_cut,
                            sampled: p.sampled,
                        }),
                        None,
                    )
                }
                _ => return None,
            };
        Some(LoopWorld {
            checkpoints,
            files,
            workspace,
            tracker,
            tally,
            stopped: w.stopped.clone(),
            power,
            http: None,
            faults: None,
            mem,
        })
    }

    /// Only a world in memory (no power cuts): its directories are copied
    /// as a crash leaves them (locks released), the tracker and the tallies
    /// deep, and why the last life stopped as it was when the life began (a
    /// life sets it only as it returns).
    fn capture(&self, w: &LoopWorld) -> Option<Capture<LoopWorld>> {
        if self.http || self.faults.is_some() || self.model.is_some() {
            return None;
        }
        if w.http.is_some() || w.faults.is_some() || w.power.is_some() {
            return None;
        }
        let (cp, ws) = w.mem.clone()?;
        let tracker = w.tracker.clone();
        let tally = Arc::clone(&w.tally);
        let stopped = w.stopped.clone();
        Some(Capture::new(move || {
            let (cp, ws) = (cp.copy_as_crashed(), ws.copy_as_crashed());
            let mem = Some((cp.clone(), ws.clone()));
            let cp = Arc::new(cp);
            Some(LoopWorld {
                checkpoints: cp.clone(),
                files: cp,
                workspace: Arc::new(ws),
                tracker: tracker.deep_clone()?,
                tally: Arc::new(tally.deep_copy()),
                stopped: stopped.clone(),
                power: None,
                http: None,
                faults: None,
                mem,
            })
        }))
    }

    fn fingerprint(&self, w: &LoopWorld) -> Option<Fingerprint> {
        if self.http || self.faults.is_some() || self.model.is_some() {
            return None;
        }
        let mut fp = Fingerprint::new();
        match (&w.power, &w.mem) {
            (None, Some((cp, ws))) => {
                cp.hash_contents(fp.observer());
                ws.hash_contents(fp.observer());
            }
            (Some(p), None) => {
                p.checkpoints.hash_contents(fp.observer());
                p.workspace.hash_contents(fp.observer());
                p.watch.hash_contents(fp.observer());
                fp = fp.observe(&p.last_cut).observe(&p.sampled);
            }
            _ => return None,
        }
        w.tracker.hash_contents(fp.observer());
        // The tallies: a person's memory (the yes set) and an observer's.
        w.tally.hash_contents(fp.observer());
        Some(fp.observe(&w.stopped))
    }
}
