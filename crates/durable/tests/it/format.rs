//! The file format: durable's envelope around the user's state.

use serde_json::json;

use durable::Options;

use crate::{fast, open, populated, run_id, Checkpoint};

#[test]
fn the_envelope_holds_the_version_run_restarts_and_state() {
    let world = durable::testing::MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    opened.state = populated(&run);
    opened.checkpoint.save(&opened.state).unwrap();
    let bytes = durable::Dir::read(&world, "r.json").unwrap().unwrap();
    assert!(bytes.ends_with(b"}\n"), "pretty JSON with a final newline");
    let file: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        file,
        json!({
            "version": 2,
            "run": "r",
            "state": serde_json::to_value(&opened.state).unwrap(),
            "epoch": 1,
        }),
        "no restart yet, so no count; the first holder's epoch"
    );
    drop(opened);
    let again = open(&world, &run, fast()).unwrap();
    assert_eq!(again.state, populated(&run));
    let bytes = durable::Dir::read(&world, "r.json").unwrap().unwrap();
    let file: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(file["resumes"], 1);
    assert_eq!(
        file["epoch"], 2,
        "each open of an unfinished run is a new holder"
    );
    assert_eq!(again.checkpoint.epoch(), 2);
    assert_eq!(durable::checkpoint::FORMAT_VERSION, 2);
    let saved = Checkpoint::load(&world, &run).unwrap().unwrap();
    assert_eq!(
        (saved.resumes, saved.turns),
        (1, 3),
        "Saved derefs to the state"
    );
}

#[test]
fn a_compact_checkpoint_is_one_line_and_either_layout_loads() {
    let world = durable::testing::MemDir::new();
    let run = run_id("r");
    let compact = Options {
        compact: true,
        ..fast()
    };
    let mut opened = open(&world, &run, compact).unwrap();
    opened.state = populated(&run);
    opened.checkpoint.save(&opened.state).unwrap();
    let bytes = durable::Dir::read(&world, "r.json").unwrap().unwrap();
    assert!(bytes.ends_with(b"}\n"), "one line, ending in a newline");
    assert_eq!(
        bytes.iter().filter(|&&b| b == b'\n').count(),
        1,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    let head = br#"{"version":2,"run":"r","#;
    assert!(
        bytes.starts_with(head),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    drop(opened);
    // An indented checkpoint opens a compact one, and saves it indented; a
    // compact one opens that in turn: the layout is the writer's choice.
    let mut again = open(&world, &run, fast()).unwrap();
    assert_eq!(again.state, populated(&run));
    again.checkpoint.save(&again.state).unwrap();
    let bytes = durable::Dir::read(&world, "r.json").unwrap().unwrap();
    assert!(bytes.starts_with(b"{\n  \"version\": 2,"));
    drop(again);
    let third = open(&world, &run, compact).unwrap();
    assert_eq!((third.state, third.resumes), (populated(&run), 2));
}
