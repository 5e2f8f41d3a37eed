//! The scenario tree: a scenario's children (one more crash at each hit
//! its final life reached), the tree's estimated size, and the partition of
//! its scenarios into shards by a stable hash of their names.

use crashpoint::Hit;

use crate::scenario::Scenario;

/// About how many scenarios a sweep of `depth` runs from a clean run of
/// `hits` hits, in `states` crash states: at most `hits^k` at depth `k` when
/// no restart passes more hits than the clean run (a restart usually passes
/// fewer, so this errs on the side of refusing).
pub(crate) fn estimate_scenarios(hits: usize, depth: u32, states: usize) -> f64 {
    let n = hits as f64;
    let mut total = 0.0;
    let mut term = 1.0;
    for _ in 0..depth {
        term *= n;
        total += term;
    }
    total * states as f64
}

/// `parent` with one more crash at each of `hits`; in an enumerating
/// state, its cut keeping disk 0 (the others follow once it has run).
pub(crate) fn expand(
    parent: &Scenario,
    order: &[u32],
    hits: &[Hit],
    enumerates: bool,
) -> Vec<(Scenario, Vec<u32>)> {
    hits.iter()
        .enumerate()
        .map(|(i, h)| {
            let mut sc = parent.hits.clone();
            sc.push(h.clone());
            let mut o = order.to_vec();
            o.push(i as u32);
            let mut disks = parent.disks.clone();
            if enumerates {
                disks.push(0);
            }
            (Scenario::with_disks(parent.state.clone(), sc, disks), o)
        })
        .collect()
}

/// FNV-1a over the scenario's name: stable across runs, machines and versions.
pub(crate) fn shard_of(sc: &Scenario, n: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in sc.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % u64::from(n)) as u32 + 1
}

pub(crate) fn in_partition(sc: &Scenario, partition: Option<(u32, u32)>) -> bool {
    partition.map_or(true, |(k, n)| shard_of(sc, n) == k)
}
