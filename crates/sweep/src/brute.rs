//! The brute-force sweep of a scenario's subtree: each scenario replayed
//! from a fresh world, its children started as soon as it finishes.

use rayon::prelude::*;

use crate::failure::Failure;
use crate::plan::{expand, in_partition};
use crate::progress::Progress;
use crate::replay::Replayer;
use crate::scenario::Scenario;
use crate::sink::Run;
use crate::subject::Subject;

/// Run one scenario and, while depth remains, every scenario that adds one
/// crash at a hit its final life reached; hand those of the partition to
/// the run's sink.
pub(crate) fn subtree<S: Subject>(
    replayer: &Replayer<'_, S>,
    sc: Scenario,
    order: Vec<u32>,
    run: &Run<'_>,
) {
    let mut ran = replayer.replay(&sc, order, Some(run.clean));
    let unfired =
        |r: &crate::replay::Ran| r.result.failure.as_ref().is_some_and(Failure::is_unfired);
    if run.config.rerun_failures && unfired(&ran) {
        // A crash that did not fire tested nothing: the hits of a program
        // whose threads race may vary, so it is run once more.
        let again = replayer.replay(&sc, ran.result.order.clone(), Some(run.clean));
        if !unfired(&again) {
            ran = again;
        }
    }
    replayer.settle(&sc, &mut ran.result, run.clean, run.config);
    (run.progress)(Progress::Finished { depth: sc.depth() });
    let enumerates = crate::subject::cuts(replayer.subject).enumerates(&sc.state);
    // Disk 0 of a crash ran first; it tells how many disks the cut could
    // leave, and each other one is a scenario of its own. (Only scenarios
    // of an enumerating state name disks and count cuts.)
    let siblings: Vec<(Scenario, Vec<u32>)> = match (
        sc.disks.last(),
        ran.cut_disks.get(sc.depth().wrapping_sub(1)),
    ) {
        (Some(0), Some(&n)) => (1..n)
            .map(|k| {
                let mut s = sc.clone();
                if let Some(last) = s.disks.last_mut() {
                    *last = k;
                }
                (s, ran.result.order.clone())
            })
            .collect(),
        _ => Vec::new(),
    };
    if run.interleaved {
        crate::nets::canonical_order(&mut ran.last_hits);
    }
    let children = if sc.depth() < run.config.depth as usize {
        expand(&sc, &ran.result.order, &ran.last_hits, enumerates)
    } else {
        Vec::new()
    };
    if in_partition(&sc, run.config.partition) {
        run.sink.push(ran.result);
    }
    if !siblings.is_empty() {
        (run.progress)(Progress::Planned {
            depth: sc.depth(),
            count: siblings.len() as u64,
        });
    }
    if !children.is_empty() {
        (run.progress)(Progress::Planned {
            depth: sc.depth() + 1,
            count: children.len() as u64,
        });
    }
    let next: Vec<(Scenario, Vec<u32>)> = siblings.into_iter().chain(children).collect();
    if !next.is_empty() {
        next.into_par_iter()
            .for_each(|(c, o)| subtree(replayer, c, o, run));
    }
}
