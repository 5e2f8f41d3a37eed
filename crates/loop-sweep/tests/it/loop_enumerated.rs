//! The real loop, keyed, under power loss in every disk the persistence
//! model allows ([`loop_sweep::ENUMERATED`]: each crash's cut leaves, in a
//! scenario of its own, every pair of checkpoint directory and workspace
//! disks): the real writer passes every scenario, and each mutation of it
//! is caught, its first failing scenario rerun by name.
//!
//! Bounded for the test profile: depth 2 for the real writer, depth 1 for
//! the mutants; at most 64 disks per directory per crash (the default
//! `PersistenceModel::bound`).

use loop_sweep::{LoopSubject, Writer, ENUMERATED};
use sweep::{power::CrashDisks, scenario::Scenario, Config, Report};

fn subject(writer: Writer) -> LoopSubject {
    LoopSubject::keyed_power_loss(writer).expect("the subject builds")
}

fn sweep(writer: Writer, depth: u32) -> Report {
    let config = Config {
        depth,
        crash_states: vec![ENUMERATED],
        ..Config::default()
    };
    sweep::run(&subject(writer), &config).expect("sweep runs")
}

#[test]
fn the_real_writer_passes_every_enumerated_disk_to_depth_2() {
    let r = sweep(Writer::Real, 2);
    let failed: Vec<String> = r.failures().map(|s| s.scenario.to_string()).collect();
    assert!(
        failed.is_empty(),
        "{} failed: {:#?}",
        failed.len(),
        &failed[..failed.len().min(5)]
    );
    let c = CrashDisks::of(&r, &ENUMERATED);
    println!("loop real writer: {c:?}");
    assert!(c.max > 1, "some crash has more than one disk: {c:?}");
    assert!(r
        .scenarios
        .iter()
        .all(|s| s.scenario.disks.len() == s.scenario.depth()));
}

#[test]
fn each_mutant_is_caught_and_its_first_failure_reruns_by_name() {
    for writer in [
        Writer::NoFileSync,
        Writer::NoDirSync,
        Writer::InPlace,
        Writer::RemoveFirst,
    ] {
        let r = sweep(writer, 1);
        let first = r
            .failures()
            .next()
            .unwrap_or_else(|| panic!("{writer:?}: no enumerated disk catches it"));
        let name = first.scenario.to_string();
        println!(
            "loop {writer:?}: {} of {} fail, first {name}",
            r.failures().count(),
            r.scenarios.len()
        );
        let again: Scenario = name.parse().expect("the name parses");
        let rerun = sweep::rerun(
            &subject(writer),
            &sweep::Config::default(),
            &again.to_string(),
        )
        .unwrap();
        assert!(
            rerun.failed(),
            "{name} reruns and fails:\n{}",
            rerun.timeline()
        );
        assert_eq!(rerun.failure, first.failure, "{name}");
    }
}
