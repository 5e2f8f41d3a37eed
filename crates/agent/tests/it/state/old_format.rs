//! Checkpoints of the first format (the agent's state written flat, format
//! version 1, before durable's envelope) are refused, never misread.

use agent::state::Checkpoint;
use durable::testing::MemDir;
use durable::{Dir, Error};

use super::{fast, open, run_id, snapshot};

/// A checkpoint exactly as the previous release wrote it.
const VERSION_1: &str = r#"{
  "version": 1,
  "run": "r",
  "phase": "tools",
  "messages": [
    {
      "role": "user",
      "text": "triage the crashes"
    }
  ],
  "turns": 3,
  "calls": [
    {
      "id": "call_1",
      "tool": "issue_file",
      "args": "{\"title\":\"crash in parser\"}"
    }
  ],
  "attempts": {
    "call_1": {
      "key": "0f3a9c1e5b7d2f4a6c8e0b1d3f5a7c9e",
      "approved": true
    }
  },
  "resumes": 2
}
"#;

#[test]
fn a_version_1_checkpoint_is_refused_with_a_clear_error() {
    let world = MemDir::new();
    world.write("r.json", VERSION_1.as_bytes()).unwrap();
    let before = snapshot(&world);

    let e = open(&world, &run_id("r"), fast()).unwrap_err();
    assert!(
        matches!(e, Error::UnsupportedVersion { version: 1, .. }),
        "{e:?}"
    );
    assert_eq!(
        e.to_string(),
        "checkpoint mem:/r.json has format version 1, this build reads version 2"
    );
    let after: Vec<_> = snapshot(&world)
        .into_iter()
        .filter(|(n, _)| n != "r.lock")
        .collect();
    assert_eq!(after, before, "left as it was, not replaced by a fresh run");

    let loaded = Checkpoint::load(&world, &run_id("r")).unwrap_err();
    assert!(matches!(
        loaded,
        Error::UnsupportedVersion { version: 1, .. }
    ));
}

#[test]
fn a_version_1_checkpoint_relabelled_as_version_2_is_still_not_misread() {
    // Even with its version edited by hand, the flat layout has no "state":
    // it is refused as corrupt rather than read as an empty state.
    let world = MemDir::new();
    let relabelled = VERSION_1.replace("\"version\": 1", "\"version\": 2");
    world.write("r.json", relabelled.as_bytes()).unwrap();
    let e = open(&world, &run_id("r"), fast()).unwrap_err();
    assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
    assert!(e.to_string().contains("mem:/r.json"), "{e}");
}
