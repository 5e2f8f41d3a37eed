//! I/O errors, the disk's other attack: one fault scenario of any subject
//! whose world puts its checkpoint directory behind a
//! [`durable::testing::FaultDir`] ([`fault_run`]), and every call of a
//! clean run failed in turn, at depth 1 and 2, with and without a power cut
//! before the healthy life ([`check_every_site`]). The one driver of the
//! workspace's fault sweeps: the designs' keyed subject, the real loop and
//! the disk table (`snapshots/disk.txt`, `cargo xtask sweep --disk`).
//!
//! Behind the `faults` feature, which brings `durable` (with its `testing`
//! feature) into `sweep`'s dependencies.
//!
//! A scenario injects one [`Fault`] (the `hit`-th call of one kind fails
//! once: `ENOSPC` on a create or write, `EIO` on the rest); at depth 2 the
//! restart's next call of the same kind fails again; then the disk heals
//! and the program runs to the end, at most four lives in all. It holds
//! when the fault fired, the healthy life finished, every life that
//! stopped stopped with an error naming its file (a `power:/…` path of a
//! [`durable::testing::PowerDir`]), and every required counter of the
//! judge is zero.
//!
//! ```
//! use std::sync::Arc;
//!
//! use durable::testing::{DiskState, FaultDir, PowerDir};
//! use durable::write::{write_atomic, WriteOptions};
//! use durable::Dir;
//! use sweep::power::faults::{check_every_site, fault_run};
//! use sweep::{Counter, LifeError, Subject, Verdict};
//!
//! /// Counts to 3, saving the count after each step.
//! struct Count;
//!
//! /// The disk, and the same disk behind the fault injector.
//! type World = (PowerDir, FaultDir<Arc<dyn Dir>>);
//!
//! fn count(disk: &dyn Dir) -> std::io::Result<u8> {
//!     Ok(disk.read("count")?.map_or(0, |b| b[0]))
//! }
//!
//! impl Subject for Count {
//!     type World = World;
//!     fn name(&self) -> String { "count".into() }
//!     fn counters(&self) -> Vec<Counter> { vec![Counter::new("lost").required()] }
//!     fn world(&self) -> Result<World, LifeError> {
//!         let power = PowerDir::new(DiskState::LoseUnsynced);
//!         let inner: Arc<dyn Dir> = Arc::new(power.clone());
//!         Ok((power, FaultDir::new(inner)))
//!     }
//!     fn life(&self, (_, disk): &mut World) -> Result<(), LifeError> {
//!         // Every error names its file.
//!         let named = |e: std::io::Error| format!("{}: {e}", disk.path_of("count").display());
//!         let mut n = count(disk).map_err(named)?;
//!         while n < 3 {
//!             n += 1;
//!             write_atomic(disk, "count", &[n], WriteOptions::default()).map_err(named)?;
//!         }
//!         Ok(())
//!     }
//!     fn judge(&self, (_, disk): &World) -> Verdict {
//!         let n = count(disk).unwrap_or(0);
//!         Verdict::new().count("lost", u64::from(3 - n.min(3)))
//!     }
//! }
//!
//! // The calls a clean run makes, each to fail in turn.
//! let mut w = Count.world().unwrap();
//! Count.life(&mut w).unwrap();
//! let sites = w.1.sites();
//! assert!(sites.len() > 10, "{sites:?}");
//!
//! let stopped = check_every_site(&sites, |fault, depth, cut| {
//!     fault_run(&Count, |w| Some(w.1.clone()), |w| w.0.power_cut(), fault, depth, cut)
//! })
//! .unwrap();
//! assert!(stopped > 0, "a failed save stops a life");
//! ```

use std::sync::Arc;

use durable::testing::{Fault, FaultDir};
use durable::Dir;

use crate::Subject;

/// How one fault scenario ended.
#[derive(Debug, Default)]
pub struct FaultOutcome {
    /// Lives that stopped with an error, with it.
    pub errors: Vec<String>,
    /// The faults that fired.
    pub fired: usize,
    /// What broke, in words: no world or no fault injector in it, a life
    /// that crashed or panicked, no healthy finish, an error not naming
    /// the file, a required counter not zero; then the judge's notes.
    /// Empty: the scenario passed.
    pub broken: Vec<String>,
}

/// One fault scenario of `s` (built to arm faults): `fault` fails; at depth 2 the next call of
/// its kind after the first error fails too; then the disk heals (and, if
/// `cut`, the power is cut) before the next life; at most 4 lives.
pub fn fault_run<S: Subject>(
    s: &S,
    faults_of: impl Fn(&S::World) -> Option<FaultDir<Arc<dyn Dir>>>,
    power_cut: impl Fn(&S::World),
    fault: Fault,
    depth: u32,
    cut: bool,
) -> FaultOutcome {
    let mut out = FaultOutcome::default();
    let mut w = match s.world() {
        Ok(w) => w,
        Err(e) => {
            out.broken.push(format!("no world: {e}"));
            return out;
        }
    };
    let Some(fd) = faults_of(&w) else {
        out.broken.push("no fault injector in the world".into());
        return out;
    };
    fd.fail(fault.call, fault.hit);
    let mut armed_again = depth < 2;
    let mut finished = false;
    for _ in 0..4 {
        // In a recording scope of its own, as a sweep runs a life: its
        // points are no passes outside any scope, which a sweep running
        // meanwhile in the process would count.
        match crashpoint::record(|| s.life(&mut w)).outcome {
            crashpoint::Outcome::Finished(Ok(())) => {
                finished = true;
                break;
            }
            crashpoint::Outcome::Finished(Err(e)) => out.errors.push(e.to_string()),
            crashpoint::Outcome::Crashed(hit) => {
                out.broken.push(format!("a life crashed at {hit}"));
                break;
            }
            crashpoint::Outcome::Panicked(m) => {
                out.broken.push(format!("a life panicked: {m}"));
                break;
            }
        }
        if !armed_again {
            fd.fail(fault.call, fd.hits(fault.call) + 1);
            armed_again = true;
        } else {
            fd.heal();
            if cut {
                power_cut(&w);
            }
        }
    }
    out.fired = fd.fired().len();
    if !finished {
        out.broken.push("the healthy life did not finish".into());
    }
    check_end(s, &w, &mut out);
    out
}

/// The end of a fault scenario on `w`, checked into `out`: every error
/// names its file, and the judge finds every required counter zero (its
/// notes go with a break, to explain it).
fn check_end<S: Subject>(s: &S, w: &S::World, out: &mut FaultOutcome) {
    for e in &out.errors {
        if !e.contains("power:/") {
            out.broken.push(format!("an error names no file: {e}"));
        }
    }
    let v = s.judge(w);
    for c in s.counters().into_iter().filter(|c| c.required_zero) {
        if v.get(&c.name) != 0 {
            out.broken.push(format!("{} = {}", c.name, v.get(&c.name)));
        }
    }
    if !out.broken.is_empty() {
        out.broken.extend(v.notes.clone());
    }
}

/// Every fault of `sites` at depth 1 and 2, with and without a power cut
/// before the healthy life, through `run` (a [`fault_run`] of one
/// subject): each fault fires, nothing breaks, the healthy life finishes
/// within two failed lives, and every error names its file (`power:/…`).
/// Returns how many scenarios stopped a life, or the first scenario that
/// did not hold, by name.
pub fn check_every_site(
    sites: &[Fault],
    run: impl Fn(Fault, u32, bool) -> FaultOutcome,
) -> Result<usize, String> {
    let mut stopped = 0;
    for depth in [1, 2] {
        for cut in [false, true] {
            for &f in sites {
                let o = run(f, depth, cut);
                let name = format!(
                    "{f} (depth {depth}{})",
                    if cut { ", power cut" } else { "" }
                );
                if o.fired == 0 {
                    return Err(format!("{name}: the fault did not fire"));
                }
                if !o.broken.is_empty() {
                    return Err(format!("{name}: {:#?}", o.broken));
                }
                if o.errors.len() > 2 {
                    return Err(format!(
                        "{name}: the healthy life did not finish: {:#?}",
                        o.errors
                    ));
                }
                if let Some(e) = o.errors.iter().find(|e| !e.contains("power:/")) {
                    return Err(format!("{name}: the error names no file: {e}"));
                }
                stopped += usize::from(!o.errors.is_empty());
            }
        }
    }
    Ok(stopped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use durable::testing::Call;

    const A: Fault = Fault {
        call: Call::Write,
        hit: 1,
    };
    const B: Fault = Fault {
        call: Call::Rename,
        hit: 2,
    };

    fn outcome(errors: &[&str], fired: usize, broken: &[&str]) -> FaultOutcome {
        FaultOutcome {
            errors: errors.iter().map(|e| e.to_string()).collect(),
            fired,
            broken: broken.iter().map(|e| e.to_string()).collect(),
        }
    }

    /// Every site is run at depth 1 and 2, with and without a cut; a
    /// scenario that stopped a life counts once.
    #[test]
    fn every_site_runs_four_ways_and_stopped_lives_are_counted() {
        let seen = std::cell::RefCell::new(Vec::new());
        let stopped = check_every_site(&[A, B], |f, depth, cut| {
            seen.borrow_mut().push((f, depth, cut));
            if f == A {
                outcome(&["power:/run/state: no space"], 1, &[])
            } else {
                outcome(&[], 1, &[])
            }
        });
        assert_eq!(
            stopped,
            Ok(4),
            "A stops a life in each of its four scenarios"
        );
        let seen = seen.into_inner();
        assert_eq!(seen.len(), 8, "{seen:?}");
        for f in [A, B] {
            for depth in [1, 2] {
                for cut in [false, true] {
                    assert!(seen.contains(&(f, depth, cut)), "{f} {depth} {cut}");
                }
            }
        }
    }

    /// Each way a scenario can fail is an error naming the scenario.
    #[test]
    fn a_scenario_that_does_not_hold_is_named() {
        let first = |o: fn() -> FaultOutcome| check_every_site(&[A], |_, _, _| o());
        let e = first(|| outcome(&[], 0, &[])).unwrap_err();
        assert_eq!(e, "write#1 (depth 1): the fault did not fire");
        let e = first(|| outcome(&[], 1, &["dups = 1"])).unwrap_err();
        assert!(
            e.starts_with("write#1 (depth 1): [") && e.contains("dups = 1"),
            "{e}"
        );
        let e = first(|| outcome(&["power:/a", "power:/b", "power:/c"], 1, &[])).unwrap_err();
        assert!(
            e.starts_with("write#1 (depth 1): the healthy life did not finish"),
            "{e}"
        );
        assert!(first(|| outcome(&["power:/a", "power:/b"], 1, &[])).is_ok());
        let e = first(|| outcome(&["power:/a", "disk full"], 1, &[])).unwrap_err();
        assert_eq!(e, "write#1 (depth 1): the error names no file: disk full");
        // The cut is named, at depth 2.
        let e = check_every_site(&[A], |_, depth, cut| {
            outcome(&[], usize::from(!(depth == 2 && cut)), &[])
        })
        .unwrap_err();
        assert_eq!(e, "write#1 (depth 2, power cut): the fault did not fire");
    }
}
