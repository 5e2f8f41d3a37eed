//! The relay's sweep through `sweep::cli`: the bug is caught and named under
//! every crash state, the fixed relay passes, and the table is reviewed.

use durable::testing::DiskState;
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
    assert_eq!(table, std::fs::read_to_string(outbox::SNAPSHOT).unwrap());
    assert!(!err.contains("FAILED send first"), "{err}");
    for state in DiskState::ALL {
        // Scenario names carry their state (none for a process crash).
        let prefix = match state {
            DiskState::Process => String::new(),
            s => format!("{}: ", s.slug()),
        };
        let failed = err
            .lines()
            .filter_map(|l| l.strip_prefix("FAILED record first / "));
        let mut names = failed.filter(|rest| match state {
            DiskState::Process => DiskState::POWER_CUTS
                .iter()
                .all(|s| !rest.starts_with(&format!("{}: ", s.slug()))),
            _ => rest.starts_with(&prefix),
        });
        assert!(names.next().is_some(), "no failure in {state:?}:\n{err}");
        let hint = format!("rerun: cargo run -p outbox -- record-first --scenario \"{prefix}");
        assert!(err.contains(&hint), "{hint} missing from:\n{err}");
    }
}

#[test]
fn a_failure_reruns_by_its_name_alone_with_its_timeline() {
    let lose = sweep::power::CrashState::named("lose");
    let config = sweep::Config {
        crash_states: vec![lose.clone()],
        ..Default::default()
    };
    let report = sweep::run(&Relay::RecordFirst, &config).unwrap();
    let first = report.failures().next().unwrap().scenario.to_string();
    assert!(first.starts_with("lose: "), "{first}");
    // The name alone: no subject, no --crash-state.
    let (code, timeline, _) = cli(&["--scenario", &first]);
    assert_eq!(code, sweep::cli::EXIT_FAILED);
    assert!(
        timeline.contains("subject: record first")
            && timeline.contains("never delivered")
            && timeline.contains("← crash"),
        "{timeline}"
    );
    // One crash state through --crash-state: its rows only.
    let (code, table, err) = cli(&["--crash-state", "lose", "--depth", "1"]);
    assert_eq!(code, sweep::cli::EXIT_FAILED, "{err}");
    assert!(table.contains("record first (lose)"), "{table}");
    assert!(
        !table.contains("(process)") && !table.contains("(torn)"),
        "{table}"
    );
}

#[test]
fn the_guide_shows_the_example_code() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("../../docs/sweep-your-program.md")).unwrap();
    // The relay's code, and the steps before it (`tests/steps.rs` checks
    // that the guide quotes each step whole).
    let code = [
        "src/lib.rs",
        "src/main.rs",
        "../sweep/examples/first_sweep.rs",
        "examples/step_2_checkpoint.rs",
        "examples/step_3_power.rs",
        "examples/step_4_cli.rs",
        "examples/step_5_async.rs",
        "examples/step_6_http.rs",
    ]
    .map(|f| std::fs::read_to_string(root.join(f)).unwrap())
    .join("\n");
    let blocks: Vec<&str> = guide
        .split("```rust\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .collect();
    assert!(blocks.len() >= 5);
    let lines: usize = ["src/lib.rs", "src/main.rs"]
        .map(|f| {
            std::fs::read_to_string(root.join(f))
                .unwrap()
                .lines()
                .count()
        })
        .iter()
        .sum();
    let says = format!("the relay is the {lines} lines of");
    assert!(
        guide.replace('\n', " ").contains(&says),
        "the guide should say {says:?} (src/lib.rs and src/main.rs have {lines} lines)"
    );
    for block in blocks {
        assert!(
            code.contains(block),
            "the guide shows code the example does not have:\n{block}"
        );
    }
}
