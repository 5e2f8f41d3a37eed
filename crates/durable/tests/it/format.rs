//! The file format: durable's envelope around the user's state.

use serde_json::json;

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
