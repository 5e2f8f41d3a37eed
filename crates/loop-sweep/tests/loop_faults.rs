//! I/O errors as a sweep dimension, on the real loop, keyed, with the real
//! writer in a power-loss world: every call its checkpoint
//! directory receives in a clean run fails once in turn (`ENOSPC` on a
//! create or write, `EIO` on the rest: `durable::testing::FaultDir`); at
//! depth 2 the restart's next call of the same kind fails again; then the
//! disk heals and the program runs to the end, once with the power cut
//! before the healthy life and once without. Judged: nothing lost, nothing
//! twice (the loop's required counters all zero), every failure a typed
//! error naming the file, and the healthy life finishes (no state the next
//! life misreads).

use std::sync::Arc;

use designs::faults::{check_every_site, fault_run, FaultOutcome};
use durable::testing::{CrashState, Fault};
use loop_sweep::{LoopSubject, LoopVariant, Power, Situation, Writer};
use sweep::Subject;

fn subject(faults: Vec<Fault>) -> LoopSubject {
    let t = Arc::new(loop_sweep::transcript(None).expect("the loop's sweep job loads"));
    let v = LoopVariant {
        keyed: true,
        situation: Situation::Plain,
        power: Some(Power {
            state: CrashState::LoseUnsynced,
            writer: Writer::Real,
        }),
    };
    LoopSubject::new(v, t)
        .expect("the subject builds")
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
    let mut w = s.world();
    s.life(&mut w).expect("the clean run finishes");
    w.faults().expect("armed").sites()
}

#[test]
fn every_failed_call_is_a_typed_error_naming_the_file_and_nothing_is_lost_or_doubled() {
    let sites = sites();
    assert!(sites.len() > 20, "{sites:?}");
    let stopped = check_every_site(&sites, run).unwrap_or_else(|e| panic!("{e}"));
    assert!(stopped > 0, "some fault stops a life");
}
