//! The relay's sweep through `sweep::cli`: the bug is caught and named under
//! every crash state, the fixed relay passes, and the table is reviewed.

use durable::testing::CrashState;
use outbox::Relay;
use sweep::cli::Env;

fn cli(args: &[&str]) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let argv = std::iter::once("outbox").chain(args.iter().copied());
    let code = outbox::app().run(argv, &Env::default(), &mut out, &mut err);
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap();
    (code, text(out), text(err))
}

#[test]
fn the_sweep_catches_record_first_under_every_crash_state_and_matches_its_snapshot() {
    let (code, table, err) = cli(&[]);
    assert_eq!(code, sweep::cli::EXIT_FAILED, "{err}");
    assert!(!err.contains("snapshot"), "the table moved:\n{err}");
    assert_eq!(table, std::fs::read_to_string(outbox::snapshot()).unwrap());
    for state in CrashState::ALL {
        let buggy = format!("FAILED record first ({}) / ", state.slug());
        assert!(err.contains(&buggy), "{buggy} missing from:\n{err}");
        assert!(
            !err.contains(&format!("FAILED send first ({})", state.slug())),
            "{err}"
        );
    }
}

#[test]
fn a_failure_reruns_by_name_with_its_timeline() {
    let report = sweep::run(
        &Relay::RecordFirst(CrashState::LoseUnsynced),
        &Default::default(),
    );
    let first = report
        .unwrap()
        .failures()
        .next()
        .unwrap()
        .scenario
        .to_string();
    let (code, timeline, _) = cli(&["record-first-lose", "--scenario", &first]);
    assert_eq!(code, sweep::cli::EXIT_FAILED);
    assert!(
        timeline.contains("never delivered") && timeline.contains("← crash"),
        "{timeline}"
    );
}

#[test]
fn the_guide_shows_the_example_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("../../docs/sweep-your-program.md")).unwrap();
    let code = ["src/lib.rs", "src/main.rs"]
        .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
        .join("\n");
    let blocks: Vec<&str> = guide
        .split("```rust\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(blocks.len() >= 5);
    for block in blocks {
        assert!(
            code.contains(block),
            "the guide shows code the example does not have:\n{block}"
        );
    }
}
