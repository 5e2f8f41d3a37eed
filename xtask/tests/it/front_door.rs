//! The README's first command as a stranger runs it: `cargo xtask sweep`
//! prints the table and nothing else, and `--list` fits a screen.

use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .env("CI", "true")
        .output()
        .expect("the xtask binary runs")
}

/// The five designs never take some branches of the loop they share (a
/// marker save, a save after each result): those points are named by the
/// designs, so the first sweep warns about nothing and its output is the
/// table (`crates/sweep/tests/it/nets.rs` checks that a program which did
/// not name its point is still warned).
#[test]
fn the_first_sweep_prints_the_table_and_no_warning() {
    let out = xtask(&["sweep"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    assert!(stdout.starts_with("+---"), "{stdout}");
    assert!(stdout.contains("keys and markers"), "{stdout}");
}

/// `--list` fits a screen of 45 lines.
#[test]
fn the_list_fits_a_screen() {
    let out = xtask(&["sweep", "--list"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let lines = stdout.lines().count();
    assert!(lines <= 45, "--list prints {lines} lines:\n{stdout}");
    for subject in ["keys-markers", "loop-keyed", "bank-buggy", "triage-process"] {
        assert!(stdout.contains(subject), "{subject} missing:\n{stdout}");
    }
}

/// `--disk`'s help shows how to rerun one of its scenarios, and the command
/// it shows runs that scenario (a refusal would exit 2).
#[test]
fn the_disk_tables_rerun_example_runs() {
    let help = String::from_utf8_lossy(&xtask(&["sweep", "--help"]).stdout).into_owned();
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let example =
        r#"--variant keys-markers --crash-state lose --scenario "enumerated: mid-save#3 (disk 0)""#;
    assert!(flat.contains(example), "{help}");
    let out = xtask(&[
        "sweep",
        "--variant",
        "keys-markers",
        "--crash-state",
        "lose",
        "--scenario",
        "enumerated: mid-save#3 (disk 0)",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
}
