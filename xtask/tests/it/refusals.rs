//! The xtask binary refuses, at once and with a reason, sweeps that could
//! not finish: a depth whose estimated scenario count is past the limit,
//! and safety-net flags that make no sense. Run as a user runs it
//! (`cargo xtask sweep …` is this binary).

use std::process::Command;

fn xtask(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .env("CI", "true")
        .output()
        .expect("the xtask binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn depth_99_is_refused_with_the_estimate_before_any_scenario_runs() {
    // Past the depth limit: refused as too deep, before anything runs.
    let (code, err) = xtask(&["sweep", "--depth", "99"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("deeper than 16 are refused"), "{err}");
    // Within it, but far too many scenarios: refused with the estimate.
    let (code, err) = xtask(&["sweep", "--depth", "16"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("scenarios"), "{err}");
    assert!(err.contains("1000000"), "names the limit: {err}");
    assert!(err.contains("e20 scenarios"), "gives the estimate: {err}");
}

#[test]
fn raising_the_limit_is_how_a_big_sweep_is_allowed() {
    let (code, err) = xtask(&["sweep", "--depth", "3", "--max-scenarios", "10"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("more than the limit of 10"), "{err}");
}

#[test]
fn a_negative_scenario_timeout_is_refused_in_words() {
    for bad in ["--scenario-timeout=-1", "--scenario-timeout=soon"] {
        let (code, err) = xtask(&["sweep", bad]);
        assert_eq!(code, Some(2), "{bad}: {err}");
        assert!(err.contains("number of seconds"), "{bad}: {err}");
    }
}
