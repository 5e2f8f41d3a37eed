//! The keyed design (keys and markers) in a power-loss world, every crash a
//! power cut in every disk the persistence model allows
//! ([`designs::ENUMERATED`]): the real writer passes every scenario, and
//! each mutation of it is caught, its first failing scenario rerun by name.
//!
//! Bounded for the test profile: one crash per scenario (depth 1) for the
//! mutants, depth 2 for the real writer; at most 64 disks per crash (the
//! default `PersistenceModel::bound`).

use designs::{Design, Modes, Power, Script, Storage, Writer, ENUMERATED};
use durable::testing::DiskState;
use sweep::{power::CrashDisks, scenario::Scenario, Config, Report};

fn subject(writer: Writer) -> designs::DesignSubject {
    let script = Script::load(designs::default_script_path()).expect("the triage job loads");
    Design::KeysMarkers
        .subject(&script, Storage::Memory)
        .with_modes(Modes {
            power: Some(Power {
                writer,
                state: DiskState::LoseUnsynced,
            }),
            ..Modes::default()
        })
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
    assert!(failed.is_empty(), "{} failed: {failed:#?}", failed.len());
    let c = CrashDisks::of(&r, &ENUMERATED);
    println!("real writer: {c:?}");
    assert!(c.max > 1, "some crash has more than one disk: {c:?}");
    assert_eq!(c.scenarios, r.scenarios.len());
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
            "{writer:?}: {} of {} fail, first {name}",
            r.failures().count(),
            r.scenarios.len()
        );
        assert!(name.starts_with("enumerated: "), "{name}");
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

#[test]
fn remove_first_passes_every_named_state_at_depth_1() {
    let states: Vec<sweep::power::CrashState> = DiskState::ALL
        .into_iter()
        .map(sweep::power::CrashState::from)
        .collect();
    let config = Config {
        depth: 1,
        crash_states: states,
        ..Config::default()
    };
    let r = sweep::run(&subject(Writer::RemoveFirst), &config).expect("sweep runs");
    let failed: Vec<String> = r.failures().map(|s| s.scenario.to_string()).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// A cut with more disks than the persistence model's bound chooses from a
/// sample of them, and the scenario says so; within the bound none does.
#[test]
fn a_cut_from_a_sample_of_its_disks_is_noted() {
    let notes = |bound: usize| -> usize {
        let s = subject(Writer::Real).with_persistence(durable::testing::PersistenceModel {
            bound,
            ..durable::testing::PersistenceModel::default()
        });
        let config = Config {
            depth: 1,
            crash_states: vec![ENUMERATED],
            ..Config::default()
        };
        let r = sweep::run(&s, &config).expect("sweep runs");
        r.scenarios
            .iter()
            .flat_map(|s| &s.verdict.notes)
            .filter(|n| n.ends_with(" power cut(s) chose from a sample of their disks"))
            .count()
    };
    assert_eq!(
        notes(durable::testing::PersistenceModel::default().bound),
        0
    );
    assert!(notes(2) > 0);
}
