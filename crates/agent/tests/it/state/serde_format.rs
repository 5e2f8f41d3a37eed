//! The checkpoint's JSON: unset fields omitted, everything round-trips.

use serde_json::json;

use agent::state::{Attempt, Checkpoint, Message, Phase, Role, State, ToolCall, ToolResult, Usage};
use durable::testing::MemDir;

use super::{fast, open, populated, run_id};

#[test]
fn an_empty_state_is_just_its_phase() {
    assert_eq!(
        serde_json::to_value(State::default()).unwrap(),
        json!({"phase": "model"})
    );
}

#[test]
fn empty_parts_are_omitted_everywhere() {
    let cases = [
        (
            serde_json::to_value(Message::default()).unwrap(),
            json!({"role": "user"}),
        ),
        (
            serde_json::to_value(ToolCall::default()).unwrap(),
            json!({}),
        ),
        (
            serde_json::to_value(ToolResult::default()).unwrap(),
            json!({}),
        ),
        (serde_json::to_value(Attempt::default()).unwrap(), json!({})),
        (serde_json::to_value(Usage::default()).unwrap(), json!({})),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
    // ... and load back as unset.
    let m: Message = serde_json::from_value(json!({"role": "tool"})).unwrap();
    assert_eq!(
        m,
        Message {
            role: Role::Tool,
            ..Default::default()
        }
    );
}

#[test]
fn a_populated_state_round_trips_through_json() {
    let s = populated(&run_id("r"));
    let text = serde_json::to_string(&s).unwrap();
    let back: State = serde_json::from_str(&text).unwrap();
    assert_eq!(back, s);
    // Dollars come back bit for bit (0.1 + 0.2 is not 0.3).
    assert_eq!(back.usage.dollars.to_bits(), (0.1f64 + 0.2).to_bits());
}

#[test]
fn a_populated_state_round_trips_through_a_checkpoint() {
    let world = MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    let s = populated(&run);
    opened.checkpoint.save(&s).unwrap();
    let saved = Checkpoint::load(&world, &run).unwrap().unwrap();
    assert_eq!((&saved.state, saved.resumes), (&s, 0));
    drop(opened);
    let again = open(&world, &run, fast()).unwrap();
    assert_eq!((&again.state, again.resumes), (&s, 1));
}

/// A state whose dollars are not finite is refused by the save, with the
/// reason, and the checkpoint keeps the last state saved: JSON has no NaN
/// or infinity (serde_json would write `null`, which never loads back).
#[test]
fn a_state_with_dollars_json_cannot_hold_is_not_saved() {
    let world = MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    let good = populated(&run);
    opened.checkpoint.save(&good).unwrap();
    for dollars in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let mut bad = good.clone();
        bad.usage.dollars = dollars;
        match opened.checkpoint.save(&bad) {
            Err(durable::Error::InvalidState { reason, .. }) => {
                assert!(reason.contains("JSON cannot hold"), "{dollars}: {reason}");
            }
            other => panic!("{dollars}: {other:?}"),
        }
        let saved = Checkpoint::load(&world, &run).unwrap().unwrap();
        assert_eq!(saved.state, good, "{dollars}");
    }
}

#[test]
fn invalid_json_in_tool_call_args_saves_and_loads() {
    let world = MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    let broken = r#"{"path": "a.rs", "diff": "unterminated"#;
    opened.state.calls = vec![ToolCall {
        id: "c1".into(),
        tool: "code_patch".into(),
        args: broken.into(),
    }];
    opened.state.phase = Phase::Tools;
    opened.checkpoint.save(&opened.state).unwrap();
    let loaded = Checkpoint::load(&world, &run).unwrap().unwrap();
    assert_eq!(loaded.calls[0].args, broken);
}

#[test]
fn the_file_is_readable_json_with_lowercase_names() {
    let world = MemDir::new();
    let run = run_id("r");
    let mut opened = open(&world, &run, fast()).unwrap();
    opened.state = populated(&run);
    opened.checkpoint.save(&opened.state).unwrap();
    let bytes = durable::Dir::read(&world, "r.json").unwrap().unwrap();
    let file: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let v = &file["state"];
    assert_eq!(v["phase"], "tools");
    assert_eq!(v["messages"][1]["role"], "assistant");
    assert_eq!(v["calls"][1]["args"], r#"{"path": "src/lib.rs", "diff": "#);
    assert_eq!(v["attempts"]["call_1"]["approved"], true);
    assert!(v["attempts"]["call_2"].as_object().unwrap().is_empty());
    // Pretty-printed, one field per line, ending in a newline: a person can
    // open it after a crash.
    assert!(bytes.ends_with(b"}\n"));
    let head = "{\n  \"version\": 2,\n  \"run\": \"r\",\n  \"state\": {\n    \"phase\": \"tools\"";
    assert!(
        bytes.starts_with(head.as_bytes()),
        "{}",
        String::from_utf8_lossy(&bytes)
    );
}

#[test]
fn unknown_fields_are_refused_not_dropped() {
    // A checkpoint with a field this build does not know (same version) is
    // refused, naming the field: a save by this build would drop it.
    let world = MemDir::new();
    let bytes =
        br#"{"version":2,"run":"r","state":{"phase":"paused","waiting":["c1"],"later":{"x":1}}}"#;
    durable::Dir::write(&world, "r.json", bytes).unwrap();
    let e = Checkpoint::load(&world, &run_id("r")).unwrap_err();
    assert!(
        matches!(&e, durable::Error::UnknownField { field, .. } if field == "state.later"),
        "{e:?}"
    );
    assert!(open(&world, &run_id("r"), fast()).is_err());
    assert_eq!(
        durable::Dir::read(&world, "r.json").unwrap().as_deref(),
        Some(&bytes[..]),
        "left as it was"
    );
}

#[test]
fn phase_names() {
    for (p, name) in [
        (Phase::Model, "model"),
        (Phase::Tools, "tools"),
        (Phase::Paused, "paused"),
        (Phase::Done, "done"),
    ] {
        assert_eq!(p.to_string(), name);
        assert_eq!(name.parse::<Phase>().unwrap(), p);
        assert_eq!(serde_json::to_value(p).unwrap(), json!(name));
    }
    assert_eq!(Phase::default(), Phase::Model);
    let e = "Done".parse::<Phase>().unwrap_err();
    assert!(e.to_string().contains("\"Done\""), "{e}");
}
