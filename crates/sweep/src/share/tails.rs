//! Shared tails: a leaf's final life that reaches a hit where an earlier
//! life stood with the same behaviour state ends there, and the world it
//! would have left is the earlier life's end with its own tallies grafted
//! on ([`Share::probe`](crate::sharing::Share::probe),
//! [`Share::graft`](crate::sharing::Share::graft)).
//!
//! A position is the life's number in its scenario and the point (not how
//! often the life passed it: see [`TailKey`]); with the behaviour state's
//! fingerprint it keys the memo. Only a life that ran to its end (finished,
//! or stopped with an error of its own, so its failure names no hit)
//! leaves tails, one per hit it passed with nothing else running: that
//! hit's tallies and the life's end, shared by all of them. A life that
//! ends on a tail leaves none (its end would be one more world to keep).

use std::borrow::Cow;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crashpoint::scope::Handle;
use crashpoint::Hit;

use super::memo::Memo;
use super::{lock, Final, Shared};
use crate::failure::Failure;
use crate::replay::FinalRun;
use crate::scenario::Scenario;
use crate::sharing::Tally;
use crate::subject::Subject;

/// A position and the behaviour state there: which life of its scenario,
/// the point (`None`: the life's start), and the behaviour state's
/// fingerprint. Not how often the life passed the point: a life that
/// resumed from a later save passes each point fewer times before it
/// reaches the state an earlier life reached, and the rest of a final life
/// (no crash target, no hit named in a result a tail keeps) does not read
/// the counts.
pub(super) type TailKey = (usize, Option<Cow<'static, str>>, (u128, u128));

/// The probe's reading keyed as the memo keys positions: `point` of `life`
/// (`None`: the life's start), with the tallies then. Nothing when the
/// probe saw nothing or panicked (no position, the life runs on).
pub(super) fn read(
    probe: &crate::sharing::Probe,
    life: usize,
    point: Option<Cow<'static, str>>,
) -> Option<(TailKey, Tally)> {
    let (fp, tally) = panic::catch_unwind(AssertUnwindSafe(|| probe.take())).ok()??;
    Some(((life, point, fp.key()), tally))
}

/// How a life that ran to its end ended: the world it left (behind a lock,
/// as worlds are `Send` but not `Sync`) and its failure, if it stopped with
/// an error of its own.
pub(super) struct End<W> {
    pub(super) world: Mutex<W>,
    pub(super) failure: Option<Failure>,
}

/// The rest of a life from one position and behaviour state: the tallies
/// there, and how the life ended — or, for a life that itself ended on a
/// tail, its tallies where it did and that tail.
pub(super) struct Tail<W> {
    pub(super) from: Arc<Tally>,
    pub(super) then: Then<W>,
}

/// Where a tail goes from its position.
pub(super) enum Then<W> {
    /// To the end of the life.
    End(Arc<End<W>>),
    /// To another tail's position, reached with tallies `to`.
    Via { to: Arc<Tally>, next: Arc<Tail<W>> },
}

/// How many tails a chain of [`Then::Via`] may pass before its end.
const MAX_VIA: usize = 8;

impl<W> Tail<W> {
    /// How many tails this one passes before its end.
    fn vias(&self) -> usize {
        let mut n = 0;
        let mut t = self;
        while let Then::Via { next, .. } = &t.then {
            n += 1;
            t = next.as_ref();
        }
        n
    }
}

/// How many positions a sweep remembers tails for.
const TAIL_CAP: usize = 1 << 18;
/// How many ends of lives a sweep keeps (each a world).
const END_CAP: usize = 1 << 12;

/// The tails of one crash state's sweep.
pub(super) struct Tails<W> {
    memo: Memo<TailKey, Arc<Tail<W>>>,
    ends: AtomicUsize,
}

impl<W> Tails<W> {
    pub(super) fn new() -> Self {
        Tails {
            memo: Memo::new(TAIL_CAP),
            ends: AtomicUsize::new(0),
        }
    }
}

/// What the probe saw while a life ran: the positions it passed (and the
/// tallies there), and the tail it ended on.
struct Seen<W> {
    passed: Vec<(TailKey, Arc<Tally>)>,
    ended_on: Option<(Hit, Arc<Tally>, Arc<Tail<W>>)>,
}

/// Where a leaf's life went from its start: the tallies there and the tail
/// that gives its end (a parent's later lives derive a child's result from
/// it, see [`super::parents`]).
pub(super) type StartTail<W> = (Arc<Tally>, Arc<Tail<W>>);

impl<S: Subject> Shared<'_, '_, S> {
    /// The final life of the leaf `sc` on `world`, ended at the first hit
    /// with a tail, and the judge after it (on the grafted world if it
    /// ended on a tail), with the tail its start leads to if it has one;
    /// `None` as [`Shared::final_life`] (run it as without sharing), or if
    /// a graft failed.
    pub(super) fn leaf_life(
        &self,
        mut world: S::World,
        sc: &Scenario,
        tails: &Arc<Tails<S::World>>,
    ) -> Option<(Final, Option<StartTail<S::World>>)> {
        let Some(probe) = self.share.probe(&world) else {
            return self
                .final_life(world, sc, true, false)
                .map(|(f, _)| (f, None));
        };
        // The life's start is a position too (before the boot, with nothing
        // in the program's memory): a whole life shared.
        let mut passed = Vec::new();
        if let Some((key, at)) = read(&probe, sc.depth() + 1, None) {
            match tails.memo.get(&key) {
                Some(tail) => {
                    let fin = self.grafted(&at, &tail)?;
                    return Some((fin, Some((Arc::new(at), tail))));
                }
                None => passed.push((key, Arc::new(at))),
            }
        }
        let (fin, seen) = self.watched_leaf_life(&mut world, sc, tails, probe, passed);
        if let Some(ended_on) = seen.ended_on {
            // Stopped at the tail's hit by the watch, not by the time limit.
            return self.ended_on_tail(fin, ended_on, seen.passed, tails);
        }
        self.leaf_finished(world, fin, seen.passed, tails)
    }

    /// Runs the final life of the leaf `sc` on `world`, stopping at the
    /// first hit with a tail; its run and what the probe saw (`passed`:
    /// the positions seen before it ran).
    fn watched_leaf_life(
        &self,
        world: &mut S::World,
        sc: &Scenario,
        tails: &Arc<Tails<S::World>>,
        probe: crate::sharing::Probe,
        passed: Vec<(TailKey, Arc<Tally>)>,
    ) -> (FinalRun, Seen<S::World>) {
        let life = sc.depth() + 1;
        let seen = Arc::new(Mutex::new(Seen {
            passed,
            ended_on: None,
        }));
        let fin = {
            let (seen, tails) = (Arc::clone(&seen), Arc::clone(tails));
            self.stoppable_life(world, sc, move |hit, threads| {
                // With another thread running, what decides the rest of
                // the life is not all in the world: no tail here.
                if threads != 1 {
                    return false;
                }
                let Some((key, tally)) = read(&probe, life, Some(hit.point.clone())) else {
                    return false;
                };
                let found = tails.memo.get(&key);
                let mut s = lock(&seen);
                if s.ended_on.is_some() {
                    return false;
                }
                match found {
                    None => {
                        s.passed.push((key, Arc::new(tally)));
                        false
                    }
                    Some(tail) => {
                        s.ended_on = Some((hit.clone(), Arc::new(tally), tail));
                        true
                    }
                }
            })
        };
        let seen = std::mem::replace(
            &mut *lock(&seen),
            Seen {
                passed: Vec::new(),
                ended_on: None,
            },
        );
        (fin, seen)
    }

    /// A leaf's life stopped at `hit`, where `tail` begins (with tallies
    /// `at`): the tail's end grafted with them, and the tail its start now
    /// leads to (remembered, unless the chain is long); `None` if the
    /// watch did not stop it there or the graft failed.
    fn ended_on_tail(
        &self,
        fin: FinalRun,
        (hit, at, tail): (Hit, Arc<Tally>, Arc<Tail<S::World>>),
        passed: Vec<(TailKey, Arc<Tally>)>,
        tails: &Arc<Tails<S::World>>,
    ) -> Option<(Final, Option<StartTail<S::World>>)> {
        let ours = matches!(&fin.failure, Some(Failure::Hung { last_hit, .. }) if *last_hit == hit);
        if !ours {
            return None;
        }
        // This life's start leads to that tail: a later life from the
        // same start (and behaviour state) goes there too.
        let start = passed.into_iter().find(|(k, _)| k.1.is_none());
        let fin = self.grafted(&at, &tail)?;
        let Some((key, from)) = start else {
            return Some((fin, None));
        };
        let short = tail.vias() < MAX_VIA;
        let then = Then::Via { to: at, next: tail };
        let via = Arc::new(Tail {
            from: Arc::clone(&from),
            then,
        });
        if short {
            tails.memo.insert(key, Arc::clone(&via));
        }
        Some((fin, Some((from, via))))
    }

    /// A leaf's life that ran to its end (`fin`), judged on `world`; if it
    /// returned, its end is kept as the tail of every position it
    /// `passed`, and the one at its start is returned with it. `None` if it
    /// hung or left threads running (replayed instead).
    fn leaf_finished(
        &self,
        world: S::World,
        fin: FinalRun,
        passed: Vec<(TailKey, Arc<Tally>)>,
        tails: &Arc<Tails<S::World>>,
    ) -> Option<(Final, Option<StartTail<S::World>>)> {
        // Like a time limit, threads that outlive their life are a matter
        // of timing, not of the world: replayed, not remembered.
        if fin.hung || matches!(fin.failure, Some(Failure::Outlived { .. })) {
            return None;
        }
        let ended = fin.failure;
        let mut failure = ended.clone();
        let verdict = self.replayer.judge_only(&world, &mut failure);
        let mut start = None;
        if returned(&ended)
            && !passed.is_empty()
            && tails.ends.fetch_add(1, Ordering::Relaxed) < END_CAP
        {
            let end = Arc::new(End {
                world: Mutex::new(world),
                failure: ended,
            });
            for (key, from) in passed {
                let is_start = key.1.is_none();
                let tail = Arc::new(Tail {
                    from: Arc::clone(&from),
                    then: Then::End(Arc::clone(&end)),
                });
                if is_start {
                    start = Some((from, Arc::clone(&tail)));
                }
                tails.memo.insert(key, tail);
            }
        }
        let fin = Final {
            failure,
            hits: None,
            verdict,
        };
        Some((fin, start))
    }

    /// The final life of `sc` (after a crash) on `world`, with `watch`
    /// called at each hit with the count of threads running: it returns
    /// whether to stop the life there (as if its time were up at that hit:
    /// the life fails [`Failure::Hung`] naming it).
    pub(super) fn stoppable_life(
        &self,
        world: &mut S::World,
        sc: &Scenario,
        watch: impl Fn(&Hit, usize) -> bool + Send + Sync + 'static,
    ) -> FinalRun {
        // The watch stops the life through its own handle: set once the
        // handle exists, taken (the cycle broken) once the life is over.
        let stopper: Arc<Mutex<Option<Handle>>> = Arc::default();
        let handle = {
            let stopper = Arc::clone(&stopper);
            Handle::new(None).watch_hits(move |hit, threads| {
                if watch(hit, threads) {
                    let stop = lock(&stopper).clone();
                    if let Some(h) = stop {
                        h.stop();
                    }
                }
            })
        };
        *lock(&stopper) = Some(handle.clone());
        let fin = self.replayer.final_life_in(
            world,
            sc,
            true,
            self.replayer.deadline(),
            &mut Vec::new(),
            handle,
        );
        lock(&stopper).take();
        fin
    }

    /// The result of a life that stood with tallies `at` where `tail`
    /// begins: the tail's end with `at` grafted on, judged; `None` if the
    /// graft failed.
    pub(super) fn grafted(&self, at: &Tally, tail: &Tail<S::World>) -> Option<Final> {
        let guard =
            |f: &dyn Fn() -> Option<Tally>| panic::catch_unwind(AssertUnwindSafe(f)).ok().flatten();
        // Along the chain: the tallies this life would have at each tail's
        // position, then its end.
        let mut shifted: Option<Tally> = None;
        let mut t = tail;
        let end = loop {
            match &t.then {
                Then::End(end) => break end,
                Then::Via { to, next } => {
                    let now = shifted.as_ref().unwrap_or(at);
                    shifted = Some(guard(&|| self.share.shift(now, &t.from, to))?);
                    t = next.as_ref();
                }
            }
        };
        let now = shifted.as_ref().unwrap_or(at);
        let grafted = {
            let w = lock(&end.world);
            panic::catch_unwind(AssertUnwindSafe(|| self.share.graft(now, &t.from, &w)))
                .ok()
                .flatten()
        }?;
        let mut failure = end.failure.clone();
        let verdict = self.replayer.judge_only(&grafted, &mut failure);
        Some(Final {
            failure,
            hits: None,
            verdict,
        })
    }
}

/// Whether a life that ended so ran to its end: finished, or stopped with
/// an error of its own (its failure names no hit), so its end can be
/// shared.
pub(super) fn returned(ended: &Option<Failure>) -> bool {
    matches!(ended, None | Some(Failure::Stopped { before: None, .. }))
}
