//! Shared tails of parents: the final life of a scenario whose children
//! are leaves ends where an earlier such life stood with the same
//! behaviour state, as a leaf's does ([`super::tails`]), and its children
//! after that point are derived from the earlier life's children.
//!
//! A parent's final life that ran to its end (and returned: its failure
//! names no hit) keeps, once its children are done, its hits, its end, and
//! for each child the tallies at the child's start and the tail that start
//! leads to. A later parent's final life that reaches one of its positions
//! (same life of its scenario, same point, same behaviour fingerprint)
//! stops there: the rest of its life would pass the earlier life's later
//! points (each as often as before, counted on from its own passes), and a
//! crash at one of them would leave the world the earlier life's child
//! started from, with this life's tallies. So its own result is the
//! earlier end grafted with its tallies, its hits are its own up to the
//! position then the earlier life's, renumbered, and each later child's
//! result is the earlier child's tail grafted with the tallies this life's
//! child would have had at its start ([`Share::shift`]). A position counts
//! only if every child after it left a tail.
//!
//! [`Share::shift`]: crate::sharing::Share::shift

use std::collections::HashMap;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crashpoint::Hit;
use rayon::prelude::*;

use super::memo::Memo;
use super::tails::{read, returned, End, StartTail, Tail, TailKey, Then};
use super::{lock, Captures, Final, Memos, Shared};
use crate::failure::Failure;
use crate::plan::{expand, in_partition};
use crate::progress::Progress;
use crate::replay::FinalRun;
use crate::scenario::Scenario;
use crate::sharing::{Capture, Probe, Tally};
use crate::sink::Run;
use crate::subject::Subject;

/// How many positions of parents' lives a sweep remembers.
const POSITION_CAP: usize = 1 << 18;
/// How many parents' lives a sweep keeps (each an end world, its hits and
/// a tail per child).
const LIFE_CAP: usize = 1 << 10;

/// A parent's final life that ran to its end, and its children's tails.
struct ParentLife<W> {
    hits: Vec<Hit>,
    end: Arc<End<W>>,
    /// By hit: the start of the child crashed there, if it left a tail.
    children: Vec<Option<StartTail<W>>>,
}

/// A position of a kept parent's life: the hits passed up to it (0: its
/// start), and the tallies there.
struct Position<W> {
    life: Arc<ParentLife<W>>,
    passed: usize,
    from: Arc<Tally>,
}

/// The positions of one crash state's parents' lives.
pub(super) struct Parents<W> {
    memo: Memo<TailKey, Arc<Position<W>>>,
    lives: AtomicUsize,
}

impl<W> Parents<W> {
    pub(super) fn new() -> Self {
        Parents {
            memo: Memo::new(POSITION_CAP),
            lives: AtomicUsize::new(0),
        }
    }
}

/// A position a parent's life passed: its key, the tallies there, and the
/// hit (`None`: the life's start).
type Passed = (TailKey, Arc<Tally>, Option<Hit>);

/// A kept position a parent's life reached: the hit (`None`: its start),
/// its tallies there, and the position.
type Reached<W> = (Option<Hit>, Arc<Tally>, Arc<Position<W>>);

/// What the probe saw while a parent's life ran.
struct Seen<W> {
    passed: Vec<Passed>,
    ended_on: Option<Reached<W>>,
}

/// A parent's final life.
struct ParentRun<W> {
    /// Its result, with all its hits (renumbered from the earlier life's
    /// after the position it ended on).
    fin: Final,
    captures: Captures<W>,
    /// Ran to its end and returned: its end and positions, to keep.
    kept: Option<(Arc<End<W>>, Vec<Passed>)>,
    /// Ended on a position: how many of its own hits it passed, its
    /// tallies there, and the position.
    on: Option<(usize, Arc<Tally>, Arc<Position<W>>)>,
}

/// `hits[from..]` numbered as if `own` had been passed instead of
/// `earlier` (two lives at one position pass the same points after it).
fn renumbered(own: &[Hit], earlier: &[Hit], hits: &[Hit]) -> Option<Vec<Hit>> {
    let (mine, theirs) = (passes(own), passes(earlier));
    hits.iter()
        .map(|h| {
            let then = theirs.get(&*h.point).copied().unwrap_or(0);
            let now = mine.get(&*h.point).copied().unwrap_or(0);
            let n = h.occurrence.checked_sub(then)?.checked_add(now)?;
            Some(Hit::new(h.point.clone(), n))
        })
        .collect()
}

/// How often `hits` passed each point.
fn passes(hits: &[Hit]) -> HashMap<&str, u32> {
    let mut m: HashMap<&str, u32> = HashMap::new();
    for h in hits {
        let c = m.entry(&*h.point).or_default();
        *c = (*c).max(h.occurrence);
    }
    m
}

impl<S: Subject> Shared<'_, '_, S> {
    /// The scenario `sc` (reported if `wanted`), whose children are
    /// leaves, from `world` as its last crash left it.
    pub(super) fn parent_node(
        &self,
        sc: Scenario,
        order: Vec<u32>,
        world: S::World,
        run: &Run<'_>,
        memos: &Memos<S::World>,
        wanted: bool,
    ) {
        let k = sc.depth();
        let ran = self
            .share
            .copy(&world)
            .and_then(|copy| self.parent_life(copy, &sc, &memos.parents));
        let Some(pr) = ran else {
            self.brute(sc, order, run);
            return;
        };
        (run.progress)(Progress::Finished { depth: k });
        let hits = pr.fin.hits.as_deref().unwrap_or_default();
        let children = expand(&sc, &order, hits, false);
        if wanted {
            self.emit(sc, order, &pr.fin, run);
        }
        if children.is_empty() {
            return;
        }
        (run.progress)(Progress::Planned {
            depth: k + 1,
            count: children.len() as u64,
        });
        let own = pr.on.as_ref().map_or(children.len(), |(n, ..)| *n);
        let mut captures = pr.captures;
        let parent = Mutex::new(world);
        let mut jobs = children;
        let derived: Vec<_> = jobs
            .split_off(own.min(jobs.len()))
            .into_iter()
            .enumerate()
            .collect();
        let jobs: Vec<_> = jobs
            .into_iter()
            .map(|(c, o)| {
                let start = Self::child_start(&mut captures, &c, &parent);
                (c, o, start)
            })
            .collect();
        // The children before the position, by index.
        let tails = self.siblings(jobs, k + 1, run, memos);
        if let Some((_, at, pos)) = &pr.on {
            derived.into_par_iter().for_each(|(j, (c, o))| {
                let theirs = pos
                    .life
                    .children
                    .get(pos.passed + j)
                    .and_then(Option::as_ref);
                self.derived_child(c, o, at, pos, theirs, run);
            });
        }
        if let Some((end, passed)) = pr.kept {
            self.keep(&memos.parents, hits_of(&pr.fin), end, passed, tails);
        }
    }

    /// A child of a parent's life that ended on `pos` with tallies `at`:
    /// `theirs` (the earlier life's child at the same point) grafted with
    /// the tallies this child starts with; run as without sharing if that
    /// cannot be done.
    fn derived_child(
        &self,
        c: Scenario,
        o: Vec<u32>,
        at: &Tally,
        pos: &Position<S::World>,
        theirs: Option<&StartTail<S::World>>,
        run: &Run<'_>,
    ) {
        let depth = c.depth();
        if !in_partition(&c, run.config.partition) {
            // Not reported and no children: nothing to derive.
            (run.progress)(Progress::Finished { depth });
            return;
        }
        let fin = theirs.and_then(|(start, tail)| {
            let now =
                panic::catch_unwind(AssertUnwindSafe(|| self.share.shift(at, &pos.from, start)))
                    .ok()
                    .flatten()?;
            self.grafted(&now, tail)
        });
        let Some(fin) = fin else {
            self.brute(c, o, run);
            return;
        };
        self.emit(c, o, &fin, run);
        (run.progress)(Progress::Finished { depth });
    }

    /// Keep a parent's life that ran to its end (hits `hits`, end `end`)
    /// at each position it passed after which every child left a tail.
    fn keep(
        &self,
        parents: &Parents<S::World>,
        hits: Vec<Hit>,
        end: Arc<End<S::World>>,
        passed: Vec<Passed>,
        mut children: Vec<Option<StartTail<S::World>>>,
    ) {
        // By hit (a life that ran to its end ran every child).
        children.resize_with(hits.len(), || None);
        // Positions from which every later child has a tail.
        let first = children
            .iter()
            .rposition(Option::is_none)
            .map_or(0, |i| i + 1);
        if first > hits.len() || parents.lives.fetch_add(1, Ordering::Relaxed) >= LIFE_CAP {
            return;
        }
        let index: HashMap<&Hit, usize> = hits.iter().enumerate().map(|(i, h)| (h, i)).collect();
        let positions: Vec<_> = passed
            .into_iter()
            .filter_map(|(key, from, hit)| {
                let n = match &hit {
                    None => 0,
                    Some(h) => index.get(h)? + 1,
                };
                (n >= first).then_some((key, from, n))
            })
            .collect();
        if positions.is_empty() {
            return;
        }
        let life = Arc::new(ParentLife {
            hits,
            end,
            children,
        });
        for (key, from, passed) in positions {
            let pos = Position {
                life: Arc::clone(&life),
                passed,
                from,
            };
            parents.memo.insert(key, Arc::new(pos));
        }
    }

    /// The final life of `sc` on `world`, copying the world at each hit and
    /// ended at the first position of a kept parent's life; `None` as
    /// [`Shared::final_life`].
    fn parent_life(
        &self,
        mut world: S::World,
        sc: &Scenario,
        parents: &Arc<Parents<S::World>>,
    ) -> Option<ParentRun<S::World>> {
        let (Some(copy), Some(probe)) = (self.share.capture(&world), self.share.probe(&world))
        else {
            let (fin, captures) = self.final_life(world, sc, true, true)?;
            return Some(ParentRun {
                fin,
                captures,
                kept: None,
                on: None,
            });
        };
        let mut seen = Seen {
            passed: Vec::new(),
            ended_on: None,
        };
        if let Some((key, at)) = read(&probe, sc.depth() + 1, None) {
            let at = Arc::new(at);
            match parents.memo.get(&key) {
                // The whole life is an earlier one's.
                Some(pos) => seen.ended_on = Some((None, at, pos)),
                None => seen.passed.push((key, at, None)),
            }
        }
        let (fin, captures, seen) =
            self.watched_parent_life(&mut world, sc, parents, copy, probe, seen);
        if let Some(reached) = seen.ended_on {
            // Stopped at the position's hit by the watch, not by the time
            // limit (or not run at all).
            return self.ended_on_position(fin, reached, captures);
        }
        self.parent_finished(world, fin?, captures, seen.passed)
    }

    /// Runs the final life of the parent `sc` on `world` (unless `seen`
    /// already ended on a position: its start), copying the world at each
    /// hit and stopping at the first kept position: its run (`None` if not
    /// run), the copies, and what the probe saw.
    fn watched_parent_life(
        &self,
        world: &mut S::World,
        sc: &Scenario,
        parents: &Arc<Parents<S::World>>,
        copy: Capture<S::World>,
        probe: Probe,
        seen: Seen<S::World>,
    ) -> (Option<FinalRun>, Captures<S::World>, Seen<S::World>) {
        let life = sc.depth() + 1;
        let store: Arc<Mutex<Captures<S::World>>> = Arc::default();
        let seen = Arc::new(Mutex::new(seen));
        let at_start = lock(&seen).ended_on.is_some();
        let fin = if at_start {
            None
        } else {
            let (into, watched, parents) =
                (Arc::clone(&store), Arc::clone(&seen), Arc::clone(parents));
            Some(self.stoppable_life(world, sc, move |hit, threads| {
                // With another thread running, the world at this hit is
                // not the one a crash here leaves: no copy, no position.
                if threads != 1 {
                    return false;
                }
                if let Ok(Some(w)) = panic::catch_unwind(AssertUnwindSafe(|| copy.take_at(hit))) {
                    lock(&into).insert(hit.clone(), w);
                }
                let Some((key, tally)) = read(&probe, life, Some(hit.point.clone())) else {
                    return false;
                };
                let found = parents.memo.get(&key);
                let mut s = lock(&watched);
                if s.ended_on.is_some() {
                    return false;
                }
                match found {
                    None => {
                        s.passed.push((key, Arc::new(tally), Some(hit.clone())));
                        false
                    }
                    Some(pos) => {
                        s.ended_on = Some((Some(hit.clone()), Arc::new(tally), pos));
                        true
                    }
                }
            }))
        };
        let captures = std::mem::take(&mut *lock(&store));
        let seen = std::mem::replace(
            &mut *lock(&seen),
            Seen {
                passed: Vec::new(),
                ended_on: None,
            },
        );
        (fin, captures, seen)
    }

    /// A parent's life that ended on the kept position `pos` (at `hit`,
    /// `None`: its start, with tallies `at`): the earlier life's end
    /// grafted with its tallies, its own hits then the earlier life's,
    /// renumbered; `None` if it was not stopped there by the watch or a
    /// graft failed.
    fn ended_on_position(
        &self,
        mut fin: Option<FinalRun>,
        (hit, at, pos): Reached<S::World>,
        captures: Captures<S::World>,
    ) -> Option<ParentRun<S::World>> {
        let own: Vec<Hit> = match (&hit, fin.take()) {
            (None, _) => Vec::new(),
            (Some(hit), Some(fin)) => {
                let ours = matches!(&fin.failure,
                    Some(Failure::Hung { last_hit, .. }) if last_hit == hit);
                if !ours || fin.hits.last() != Some(hit) {
                    return None;
                }
                fin.hits
            }
            (Some(_), None) => return None,
        };
        let earlier = &pos.life.hits;
        let rest = renumbered(&own, earlier.get(..pos.passed)?, earlier.get(pos.passed..)?)?;
        let end = Tail {
            from: Arc::clone(&pos.from),
            then: Then::End(Arc::clone(&pos.life.end)),
        };
        let mut result = self.grafted(&at, &end)?;
        let passed = own.len();
        let mut hits = own;
        hits.extend(rest);
        result.hits = Some(hits);
        Some(ParentRun {
            fin: result,
            captures,
            kept: None,
            on: Some((passed, at, pos)),
        })
    }

    /// A parent's life that ran on its own (`fin`), judged on `world`,
    /// with its end and the positions it `passed` kept if it returned;
    /// `None` if it hung or left threads running (replayed instead).
    fn parent_finished(
        &self,
        world: S::World,
        fin: FinalRun,
        captures: Captures<S::World>,
        passed: Vec<Passed>,
    ) -> Option<ParentRun<S::World>> {
        // Like a time limit, threads that outlive their life are a matter
        // of timing, not of the world: replayed, not remembered.
        if fin.hung || matches!(fin.failure, Some(Failure::Outlived { .. })) {
            return None;
        }
        let ended = fin.failure;
        let mut failure = ended.clone();
        let verdict = self.replayer.judge_only(&world, &mut failure);
        let kept = returned(&ended).then(|| {
            let end = Arc::new(End {
                world: Mutex::new(world),
                failure: ended,
            });
            (end, passed)
        });
        Some(ParentRun {
            fin: Final {
                failure,
                hits: Some(fin.hits),
                verdict,
            },
            captures,
            kept,
            on: None,
        })
    }
}

/// A final life's hits (a parent's are always kept).
fn hits_of(fin: &Final) -> Vec<Hit> {
    fin.hits.clone().unwrap_or_default()
}
