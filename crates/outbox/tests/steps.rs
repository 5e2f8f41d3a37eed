//! The guide's ladder, run: each step of `docs/sweep-your-program.md` is an
//! example of this crate (the first is sweep's `first_sweep.rs`), quoted
//! whole by the guide, and each is swept here without its fix (a failure,
//! or for the async step the refusal) and with it (all pass).
//!
//! One test runs every sweep, in turn: a point passed outside any scope is
//! counted for the sweep whose lives alone run at the time, so the async
//! step's refusal needs no other sweep running beside it in this binary:
//! it stays a binary of its own, outside `tests/it`.

use sweep::Report;

#[allow(dead_code)]
mod step_2 {
    include!("../examples/step_2_checkpoint.rs");
    pub fn sweep(keyed: bool) -> super::Report {
        sweep::run(&Payday { keyed }, &Config::default()).unwrap()
    }
}

#[allow(dead_code)]
mod step_3 {
    include!("../examples/step_3_power.rs");
    pub fn sweep(synced: bool) -> super::Report {
        sweep::run(&Payday { synced }, &Config::default()).unwrap()
    }
}

#[allow(dead_code)]
#[path = "../examples/step_4_cli.rs"]
mod step_4;

#[allow(dead_code)]
mod step_5 {
    include!("../examples/step_5_async.rs");
    pub fn sweep(scoped: bool) -> Result<super::Report, sweep::Error> {
        sweep::run(&Payday { scoped }, &Config::default())
    }
}

#[allow(dead_code)]
mod step_6 {
    include!("../examples/step_6_http.rs");
    pub fn sweep(keyed: bool) -> super::Report {
        sweep::run(&Payday { keyed }, &Config::default()).unwrap()
    }
}

fn failures(r: &Report) -> usize {
    r.failures().count()
}

fn guide() -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(root.join("../../docs/sweep-your-program.md")).unwrap()
}

/// The guide prints `report`'s table as the sweep prints it.
fn printed(report: &Report) {
    let table = sweep::table(&report.rows());
    let block = format!("```text\n{}\n```", table.trim_end());
    assert!(
        guide().contains(&block),
        "docs/sweep-your-program.md does not print this table:\n{table}"
    );
}

#[test]
fn every_step_fails_without_its_fix_and_passes_with_it() {
    // In memory, then a Checkpoint: the crash between paying and saving.
    let red = step_2::sweep(false);
    assert!(failures(&red) > 0);
    printed(&red);
    assert_eq!(failures(&step_2::sweep(true)), 0);

    // Power cuts: unsynced saves are lost under `lose`, never in a process crash.
    let red = step_3::sweep(false);
    assert!(red.failures().count() > 0);
    printed(&red);
    assert!(
        red.failures()
            .all(|f| f.scenario.to_string().contains(": ")),
        "a process crash failed the unsynced payday: only power cuts should"
    );
    assert_eq!(failures(&step_3::sweep(true)), 0);

    // The command line over the same subjects: exit 1 without the fix, 0 with it.
    let cli = |args: &[&str]| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let argv = std::iter::once("step_4_cli").chain(args.iter().copied());
        let code = step_4::app().run(argv, &sweep::cli::Env::default(), &mut out, &mut err);
        out.extend(err); // the table, then the failures
        (code, String::from_utf8(out).unwrap())
    };
    let (code, out) = cli(&["payday", "--crash-state", "lose"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAILED payday / lose: told#1: told twice = 1"),
        "{out}"
    );
    let (code, out) = cli(&["payday-synced", "--crash-state", "lose"]);
    assert_eq!(code, 0, "{out}");

    // Async: a plain tokio::spawn is refused; crashpoint::task::scoped sweeps.
    match step_5::sweep(false) {
        Err(sweep::Error::Unscoped { points, .. }) => {
            assert!(points.iter().any(|(p, _)| p == "paid"), "{points:?}")
        }
        other => panic!("the unscoped task was not refused: {other:?}"),
    }
    let green = step_5::sweep(true).unwrap();
    assert_eq!(failures(&green), 0);
    assert!(green.stray.is_empty(), "{:?}", green.stray);

    // Over HTTP: a crash on the server's thread after the bank paid.
    let red = step_6::sweep(false);
    assert!(
        red.failures()
            .any(|f| f.scenario.to_string().starts_with("bank paid#")),
        "no crash on the server's thread failed the unkeyed payday"
    );
    printed(&red);
    assert_eq!(failures(&step_6::sweep(true)), 0);
}

#[test]
fn the_guide_quotes_every_step_whole() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = guide();
    let steps = [
        "../sweep/examples/first_sweep.rs",
        "examples/step_2_checkpoint.rs",
        "examples/step_3_power.rs",
        "examples/step_4_cli.rs",
        "examples/step_5_async.rs",
        "examples/step_6_http.rs",
    ];
    let mut at = 0;
    for step in steps {
        let source = std::fs::read_to_string(root.join(step)).unwrap();
        let block = format!("```rust\n{source}```\n");
        let found = guide[at..].find(&block);
        assert!(
            found.is_some(),
            "the guide does not quote {step} whole, after the step before"
        );
        at += found.unwrap_or(0) + block.len();
    }
}
