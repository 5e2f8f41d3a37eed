//! crashpoint's `enabled` feature is off by default, so a production build
//! of `durable` compiles its points to nothing (`.ci/ladder.py` fails if
//! `cargo tree -e no-dev,features -p durable -p agent` ever shows it on).
//! A test build turns it on (the dev-dependency on crashpoint with
//! `enabled`, and every harness crate's own): this sweep crashes a save at
//! every hit of its clean run, and the crash at `mid-save` lands inside
//! `Checkpoint::save`, leaving the earlier checkpoint in place.

use std::sync::Arc;

use crashpoint::{crash_at, record, Hit, Outcome};
use durable::testing::MemDir;
use durable::Dir;

use crate::{fast, run_id, temp_files, Checkpoint, Phase};

#[test]
fn a_test_build_crashes_inside_durable_at_mid_save() {
    let run = run_id("points-on");
    let life = |dir: Arc<dyn Dir>| {
        let mut opened = Checkpoint::open(dir, &run, fast()).unwrap();
        opened.state.phase = Phase::Tools;
        opened.checkpoint.save(&opened.state).unwrap();
    };
    let clean = record(|| life(Arc::new(MemDir::new())));
    let names: Vec<String> = clean.hits.iter().map(Hit::to_string).collect();
    assert!(
        names.iter().any(|n| n == "mid-save#2"),
        "no `mid-save` hit in a test build: is crashpoint's `enabled` feature off? hits: {names:?}"
    );
    for hit in &clean.hits {
        let world = MemDir::new();
        let crashed = crash_at(hit.clone(), || life(Arc::new(world.clone())));
        assert_eq!(crashed.outcome, Outcome::Crashed(hit.clone()));
        if *hit == Hit::new("mid-save", 2) {
            // Inside the save: its data sits in a temp file, the start save
            // is what a restart reads.
            assert_eq!(temp_files(&world).len(), 1);
            let state = Checkpoint::load(&world, &run).unwrap().unwrap();
            assert_eq!(state.phase, Phase::Model);
        }
    }
}
