//! Whatever bytes sit in a checkpoint file, loading never panics: it gives a
//! state or a typed error, and open leaves a bad file alone.

use std::collections::BTreeMap;

use proptest::prelude::*;

use agent::state::{Attempt, Checkpoint, Message, Phase, Role, State, ToolCall, ToolResult, Usage};
use durable::testing::MemDir;
use durable::{Dir, Error};

use super::{fast, file_bytes, open, populated, run_id, snapshot};

fn load_bytes(
    bytes: &[u8],
) -> (
    MemDir,
    durable::Result<Option<durable::checkpoint::Saved<State>>>,
) {
    let world = MemDir::new();
    world.write("r.json", bytes).unwrap();
    let r = Checkpoint::load(&world, &run_id("r"));
    (world, r)
}

/// A typed error about the file's content (not I/O, not a lock).
fn is_content_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupt { .. }
            | Error::Truncated { .. }
            | Error::UnsupportedVersion { .. }
            | Error::UnknownField { .. }
    )
}

fn text() -> impl Strategy<Value = String> {
    // Any Unicode, quotes and backslashes included; short to stay fast.
    ".{0,12}"
}

fn call() -> impl Strategy<Value = ToolCall> {
    (text(), text(), text()).prop_map(|(id, tool, args)| ToolCall { id, tool, args })
}

fn state() -> impl Strategy<Value = State> {
    let phase = prop_oneof![
        Just(Phase::Model),
        Just(Phase::Tools),
        Just(Phase::Paused),
        Just(Phase::Done)
    ];
    let role = prop_oneof![Just(Role::User), Just(Role::Assistant), Just(Role::Tool)];
    let message = (
        role,
        text(),
        prop::collection::vec(call(), 0..3),
        prop::option::of(text()),
    )
        .prop_map(|(role, text, calls, call_id)| Message {
            role,
            text,
            calls,
            call_id,
        });
    let usage = (any::<u64>(), any::<u64>(), -1e9f64..1e9).prop_map(|(i, o, d)| Usage {
        input_tokens: i,
        output_tokens: o,
        dollars: d,
    });
    (
        (
            phase,
            prop::collection::vec(message, 0..4),
            usage,
            any::<u32>(),
        ),
        (
            prop::option::of(text()),
            prop::collection::vec(text(), 0..3),
            prop::collection::vec(call(), 0..3),
            prop::option::of(text()),
        ),
        (
            prop::collection::btree_map(text(), (text(), any::<bool>()), 0..3),
            prop::collection::btree_map(
                text(),
                (prop::option::of(text()), any::<bool>(), any::<u64>()),
                0..3,
            ),
            prop::collection::btree_map(text(), text(), 0..3),
            prop::option::of(text()),
        ),
    )
        .prop_map(
            |(
                (phase, messages, usage, turns),
                (summary, waiting, calls, mode),
                (results, attempts, files, answer),
            )| State {
                phase,
                messages,
                usage,
                turns,
                summary,
                waiting,
                calls,
                results: results
                    .into_iter()
                    .map(|(k, (output, is_error))| (k, ToolResult { output, is_error }))
                    .collect::<BTreeMap<_, _>>(),
                attempts: attempts
                    .into_iter()
                    .map(|(k, (key, approved, at))| (k, Attempt { key, approved, at }))
                    .collect(),
                files,
                answer,
                mode,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let (_, r) = load_bytes(&bytes);
        match r {
            Ok(Some(_)) => {}
            Ok(None) => prop_assert!(false, "the file exists"),
            Err(e) => prop_assert!(is_content_error(&e), "{e:?}"),
        }
    }

    #[test]
    fn json_like_bytes_never_panic(s in r#"\{("(version|run|resumes|state|phase|turns|usage|messages)":([0-9]{1,3}|"[a-z]{0,6}"|\[\]|\{\}|null|true),?){0,5}\}?"#) {
        let (_, r) = load_bytes(s.as_bytes());
        if let Err(e) = r {
            prop_assert!(is_content_error(&e), "{e:?}");
        }
    }

    #[test]
    fn every_truncation_of_a_checkpoint_is_reported(cut in 0usize..10_000) {
        let full = file_bytes(&populated(&run_id("r")));
        let cut = cut % full.len(); // strictly shorter than the whole
        let (world, r) = load_bytes(&full[..cut]);
        prop_assert!(matches!(r, Err(Error::Truncated { .. })), "cut at {}: {:?}", cut, r);
        // And open refuses it without touching it.
        let before = snapshot(&world);
        let opened = open(&world, &run_id("r"), fast());
        prop_assert!(matches!(opened, Err(Error::Truncated { .. })), "{:?}", opened.map(|o| o.state));
        let after: Vec<_> = snapshot(&world).into_iter().filter(|(n, _)| n != "r.lock").collect();
        prop_assert_eq!(after, before);
    }

    #[test]
    fn one_flipped_byte_never_panics(at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = file_bytes(&populated(&run_id("r")));
        let i = at.index(bytes.len());
        bytes[i] = byte;
        let (_, r) = load_bytes(&bytes);
        if let Err(e) = r {
            prop_assert!(is_content_error(&e), "{e:?}");
        }
    }

    #[test]
    fn any_state_round_trips_through_a_checkpoint(s in state()) {
        let world = MemDir::new();
        let run = run_id("r");
        let mut opened = open(&world, &run, fast()).unwrap();
        opened.checkpoint.save(&s).unwrap();
        prop_assert_eq!(Checkpoint::load(&world, &run).unwrap().map(|l| l.state), Some(s.clone()));
        // A truncated copy of any state is reported as truncated.
        let bytes = world.read("r.json").unwrap().unwrap();
        let (_, r) = load_bytes(&bytes[..bytes.len() / 2]);
        prop_assert!(matches!(r, Err(Error::Truncated { .. })), "{:?}", r);
    }
}
