//! Integration tests of the sweep crate, in one binary so they link once
//! (`tests/env.rs` stays a binary of its own: it sets environment
//! variables no other test may see).

mod answers;
#[cfg(feature = "cli")]
mod async_tasks;
mod capture;
#[cfg(feature = "cli")]
mod cli;
mod disks;
mod dyn_subject;
#[cfg(feature = "faults")]
mod faults;
mod first_sweep;
mod nets;
mod panic_abort;
mod runner;
mod share;
mod states;
mod tails;
mod threads;

/// Run the test `name` (its full path in this binary) alone in a child
/// process of this binary, and check it passed there: for a test whose
/// sweep must not share the process with other tests' sweeps (points on
/// plain threads are counted for the sweeps whose lives run at the time).
/// Returns `true` in the child, where the test's body runs.
pub fn alone(name: &str) -> bool {
    const CHILD: &str = "SWEEP_IT_ALONE";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads", "1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} alone: {stdout}\n{stderr}"
    );
    false
}
