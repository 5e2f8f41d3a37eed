//! One I/O-error fault scenario of any subject whose world puts its
//! checkpoint directory behind a `durable::testing::FaultDir`: the fault
//! sweep's driver, shared by the designs' keyed subject, the real loop and
//! the disk table (`snapshots/disk.txt`).

use std::sync::Arc;

use durable::testing::{Fault, FaultDir};
use durable::Dir;
use sweep::Subject;

/// How one fault scenario ended.
#[derive(Debug, Default)]
pub struct FaultOutcome {
    /// Lives that stopped with an error, with it.
    pub errors: Vec<String>,
    /// The faults that fired.
    pub fired: usize,
    /// What broke: required counters not zero, an error not naming the
    /// file, no healthy finish. Empty: the scenario passed.
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
    let mut w = s.world();
    let mut out = FaultOutcome::default();
    let Some(fd) = faults_of(&w) else {
        out.broken.push("no fault injector in the world".into());
        return out;
    };
    fd.fail(fault.call, fault.hit);
    let mut armed_again = depth < 2;
    let mut finished = false;
    for _ in 0..4 {
        match s.life(&mut w) {
            Ok(()) => {
                finished = true;
                break;
            }
            Err(e) => out.errors.push(e.to_string()),
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
    for e in &out.errors {
        if !e.contains("power:/") {
            out.broken.push(format!("an error names no file: {e}"));
        }
    }
    let v = s.judge(&w);
    for c in s.counters().into_iter().filter(|c| c.required_zero) {
        if v.get(&c.name) != 0 {
            out.broken.push(format!("{} = {}", c.name, v.get(&c.name)));
        }
    }
    if !out.broken.is_empty() {
        out.broken.extend(v.notes.clone());
    }
    out
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
