//! Public accessors of the store that mutation testing
//! (`cargo xtask mutants durable`) found no test for.

use durable::testing::MemDir;
use durable::Dir;

use crate::{fast, open, run_id, Checkpoint};

#[test]
fn the_file_names_of_a_run_are_the_ones_open_creates() {
    let world = MemDir::new();
    let run = run_id("r-1");
    assert_eq!(Checkpoint::file_name(&run), "r-1.json");
    assert_eq!(Checkpoint::lock_name(&run), "r-1.lock");
    let opened = open(&world, &run, fast()).unwrap();
    let names = world.list().unwrap();
    assert!(names.contains(&Checkpoint::file_name(&run)), "{names:?}");
    assert!(names.contains(&Checkpoint::lock_name(&run)), "{names:?}");
    assert_eq!(
        opened.checkpoint.path(),
        world.path_of(&Checkpoint::file_name(&run))
    );
}

#[test]
fn the_checkpoint_reports_the_restart_count_it_saves() {
    let world = MemDir::new();
    let run = run_id("r");
    let first = open(&world, &run, fast()).unwrap();
    assert_eq!(first.checkpoint.resumes(), 0);
    drop(first);
    for n in 1..=3 {
        let again = open(&world, &run, fast()).unwrap();
        assert_eq!(again.resumes, n);
        assert_eq!(again.checkpoint.resumes(), n);
        let saved = Checkpoint::load(&world, &run).unwrap().unwrap();
        assert_eq!(saved.resumes, again.checkpoint.resumes());
    }
}

#[test]
fn a_run_id_reads_as_its_string() {
    let run = run_id("triage-1-ab");
    let s: &str = run.as_ref();
    assert_eq!(s, "triage-1-ab");
    assert_eq!(s, run.as_str());
}
