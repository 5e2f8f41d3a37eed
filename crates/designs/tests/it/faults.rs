//! I/O errors as a sweep dimension, on the keyed design (keys and markers)
//! with the real writer in a power-loss world: every call its checkpoint
//! directory receives in a clean run fails once in turn (`ENOSPC` on a
//! create or write, `EIO` on the rest: `durable::testing::FaultDir`); at
//! depth 2 the restart's next call of the same kind fails again; then the
//! disk heals and the program runs to the end, once with the power cut
//! before the healthy life and once without. Judged: nothing lost, nothing
//! twice (the design's required counters all zero), every failure a typed
//! error naming the file, and the healthy life finishes (no state the next
//! life misreads).

use designs::{Design, DesignSubject, Modes, Power, Script, Storage, Writer};
use durable::testing::{DiskState, Fault};
use sweep::power::faults::{check_every_site, fault_run, FaultOutcome};
use sweep::Subject;

fn subject(faults: Vec<Fault>) -> DesignSubject {
    let script = Script::load(designs::default_script_path()).expect("the triage job loads");
    Design::KeysMarkers
        .subject(&script, Storage::Memory)
        .with_modes(Modes {
            power: Some(Power {
                writer: Writer::Real,
                state: DiskState::LoseUnsynced,
            }),
            ..Modes::default()
        })
        .with_faults(faults)
}

/// `fault` fails; at depth 2 the next call of its kind after the first
/// error fails too; then the disk heals (and, if `cut`, the power is cut
/// before the healthy life): the fault sweep's one driver.
fn run(fault: Fault, depth: u32, cut: bool) -> FaultOutcome {
    let s = subject(Vec::new());
    fault_run(
        &s,
        |w| w.faults().cloned(),
        |w| w.power_cut(),
        fault,
        depth,
        cut,
    )
}

fn sites() -> Vec<Fault> {
    let s = subject(Vec::new());
    let mut w = s.world().unwrap();
    lived(|| s.life(&mut w)).expect("the clean run finishes");
    w.faults().expect("armed").sites()
}

#[test]
fn every_failed_call_is_a_typed_error_naming_the_file_and_nothing_is_lost_or_doubled() {
    let sites = sites();
    assert!(sites.len() > 20, "{sites:?}");
    let stopped = check_every_site(&sites, run).unwrap_or_else(|e| panic!("{e}"));
    assert!(stopped > 0, "some fault stops a life");
}

/// At depth 1 a fault fails once; at depth 2 the restart's next call of its
/// kind fails again, so a fault that stops a life stops two.
#[test]
fn a_second_fault_stops_a_second_life() {
    let sites = sites();
    let mut doubled = 0;
    for &f in &sites {
        let (once, twice) = (run(f, 1, false), run(f, 2, false));
        assert!(once.errors.len() <= 1, "{f}: {:?}", once.errors);
        assert!(
            twice.errors.len() >= once.errors.len(),
            "{f}: {:?}",
            twice.errors
        );
        if once.errors.len() == 1 && twice.errors.len() == 2 {
            doubled += 1;
        }
    }
    assert!(doubled > 0, "no fault stopped two lives at depth 2");
}

/// A scenario that breaks says why in the judge's words too: a design that
/// saves once per turn repeats a turn's calls after a failed save, and the
/// outcome names the duplicated record besides the count.
#[test]
fn a_broken_scenario_carries_the_judges_notes() {
    let weak = || {
        Design::SaveOncePerTurn
            .subject(
                &designs::Script::load(designs::default_script_path()).expect("the job loads"),
                Storage::Memory,
            )
            .with_modes(Modes {
                power: Some(Power {
                    writer: Writer::Real,
                    state: DiskState::LoseUnsynced,
                }),
                ..Modes::default()
            })
            .with_faults(Vec::new())
    };
    let s = weak();
    let mut w = s.world().unwrap();
    lived(|| s.life(&mut w)).expect("the clean run finishes");
    let sites = w.faults().expect("armed").sites();
    let broken: Vec<Vec<String>> = sites
        .iter()
        .map(|&f| {
            fault_run(
                &weak(),
                |w| w.faults().cloned(),
                |w| w.power_cut(),
                f,
                1,
                false,
            )
            .broken
        })
        .filter(|b| !b.is_empty())
        .collect();
    assert!(!broken.is_empty(), "no fault breaks the weak design");
    for b in &broken {
        assert!(
            b.iter()
                .any(|n| n.contains("made 2 times") || n.contains("never made it")),
            "{b:#?}"
        );
    }
}

/// Run `f`, a life outside any sweep, in a recording scope of its own as a
/// sweep would: its points are recorded, not passes outside any scope,
/// which another test's sweep running meanwhile would count (and refuse).
fn lived<R>(f: impl FnOnce() -> R) -> R {
    match crashpoint::record(f).outcome {
        crashpoint::Outcome::Finished(r) => r,
        crashpoint::Outcome::Crashed(hit) => panic!("the life crashed at {hit}"),
        crashpoint::Outcome::Panicked(m) => panic!("the life panicked: {m}"),
    }
}
