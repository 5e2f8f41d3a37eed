//! `sweep::power::faults`: one I/O-error scenario (`fault_run`) on a small
//! subject that counts to 3 in a `PowerDir` behind a `FaultDir`, and each
//! way a scenario can break named in its outcome.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use durable::testing::{Call, DiskState, Fault, FaultDir, PowerDir};
use durable::write::{write_atomic, WriteOptions};
use durable::Dir;
use sweep::power::faults::{check_every_site, fault_run, FaultOutcome};
use sweep::{Counter, LifeError, Subject, Verdict};

/// Counts to 3 in the file `count`, saving after each step; `flaw` breaks
/// it one way.
struct Count {
    flaw: Flaw,
}

#[derive(Clone, Copy, PartialEq)]
enum Flaw {
    None,
    /// Its errors do not name the file.
    Unnamed,
    /// Its world has no fault injector.
    NoInjector,
    /// A life that meets an error panics instead of returning it.
    Panics,
    /// The judge counts one loss once any life stopped.
    Loses,
}

type World = (PowerDir, FaultDir<Arc<dyn Dir>>, Arc<AtomicUsize>);

fn count(disk: &dyn Dir) -> std::io::Result<u8> {
    Ok(disk.read("count")?.map_or(0, |b| b[0]))
}

impl Subject for Count {
    type World = World;
    fn name(&self) -> String {
        "count".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("lost").required()]
    }
    fn world(&self) -> Result<World, LifeError> {
        let power = PowerDir::new(DiskState::LoseUnsynced);
        let inner: Arc<dyn Dir> = Arc::new(power.clone());
        Ok((power, FaultDir::new(inner), Arc::default()))
    }
    fn life(&self, (_, disk, stops): &mut World) -> Result<(), LifeError> {
        let flaw = self.flaw;
        let named = |e: std::io::Error| -> LifeError {
            stops.fetch_add(1, Ordering::SeqCst);
            match flaw {
                Flaw::Unnamed => format!("{e}").into(),
                Flaw::Panics => panic!("no error handling: {e}"),
                _ => format!("{}: {e}", disk.path_of("count").display()).into(),
            }
        };
        let mut n = count(disk).map_err(named)?;
        while n < 3 {
            n += 1;
            write_atomic(disk, "count", &[n], WriteOptions::default()).map_err(named)?;
        }
        Ok(())
    }
    fn judge(&self, (_, disk, stops): &World) -> Verdict {
        let lost = u64::from(3 - count(disk).unwrap_or(0).min(3));
        let flawed = self.flaw == Flaw::Loses && stops.load(Ordering::SeqCst) > 0;
        Verdict::new().count("lost", lost + u64::from(flawed))
    }
}

const FIRST_WRITE: Fault = Fault {
    call: Call::Write,
    hit: 1,
};

fn run(flaw: Flaw, fault: Fault, depth: u32, cut: bool, cuts: &AtomicUsize) -> FaultOutcome {
    fault_run(
        &Count { flaw },
        |w| (flaw != Flaw::NoInjector).then(|| w.1.clone()),
        |w| {
            cuts.fetch_add(1, Ordering::SeqCst);
            w.0.power_cut();
        },
        fault,
        depth,
        cut,
    )
}

/// The first write fails once at depth 1, and again in the restart at
/// depth 2; the power is cut before the healthy life only when asked.
#[test]
fn a_fault_stops_a_life_once_at_depth_1_and_twice_at_depth_2() {
    let cuts = AtomicUsize::new(0);
    let o = run(Flaw::None, FIRST_WRITE, 1, false, &cuts);
    assert!(o.broken.is_empty(), "{o:?}");
    assert_eq!((o.errors.len(), o.fired), (1, 1), "{o:?}");
    assert!(o.errors[0].starts_with("power:/count: "), "{o:?}");
    assert_eq!(cuts.load(Ordering::SeqCst), 0);

    let o = run(Flaw::None, FIRST_WRITE, 2, true, &cuts);
    assert!(o.broken.is_empty(), "{o:?}");
    assert_eq!((o.errors.len(), o.fired), (2, 2), "{o:?}");
    assert_eq!(
        cuts.load(Ordering::SeqCst),
        1,
        "one cut, before the healthy life"
    );
}

/// Every call of the clean run, failed in turn four ways, holds.
#[test]
fn every_call_of_a_careful_subject_holds() {
    let mut w = Count { flaw: Flaw::None }.world().unwrap();
    Count { flaw: Flaw::None }.life(&mut w).unwrap();
    let sites = w.1.sites();
    assert!(sites.len() > 10, "{sites:?}");
    let cuts = AtomicUsize::new(0);
    let stopped = check_every_site(&sites, |f, depth, cut| {
        run(Flaw::None, f, depth, cut, &cuts)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(stopped > 0, "a failed save stops a life");
}

/// Each way a scenario breaks is in its outcome, in words.
#[test]
fn each_way_a_scenario_breaks_is_named() {
    let cuts = AtomicUsize::new(0);
    let broken = |flaw| run(flaw, FIRST_WRITE, 1, false, &cuts).broken;

    let b = broken(Flaw::Unnamed);
    assert!(
        b.iter().any(|m| m.starts_with("an error names no file: ")),
        "{b:?}"
    );

    let b = broken(Flaw::NoInjector);
    assert_eq!(b, ["no fault injector in the world"]);

    let b = broken(Flaw::Panics);
    assert!(
        b.iter().any(|m| m.starts_with("a life panicked: ")),
        "{b:?}"
    );
    assert!(
        b.contains(&"the healthy life did not finish".to_owned()),
        "{b:?}"
    );

    let b = broken(Flaw::Loses);
    assert!(b.contains(&"lost = 1".to_owned()), "{b:?}");

    // And `check_every_site` names the scenario that did not hold.
    let e = check_every_site(&[FIRST_WRITE], |f, depth, cut| {
        run(Flaw::Loses, f, depth, cut, &cuts)
    })
    .unwrap_err();
    assert!(
        e.starts_with("write#1 (depth 1): ") && e.contains("lost = 1"),
        "{e}"
    );
}
