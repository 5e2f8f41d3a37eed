//! `cargo xtask chaos --iterations N --seed S`: the triage command's chaos
//! test (`crates/triage/tests/it/chaos.rs`) for longer runs. It starts the
//! real `triage` binary on a real directory with synced saves, kills it
//! with SIGKILL at a random moment of its run (aimed through the point
//! protocol, so that at least 80 % of the kills land while it runs; the
//! summary prints the fraction), resumes it until done, and checks
//! from the files that every effect happened exactly once, every check
//! passed and the state directory holds nothing but the run's files.
//! Iteration `i` uses seed `S + i`; a failing iteration prints the command
//! that replays it alone.

use std::process::{Command, ExitCode};

use clap::Args;

#[derive(Args)]
pub struct ChaosArgs {
    /// How many iterations (each one run of a task, killed and resumed).
    #[arg(long, default_value_t = 100)]
    iterations: u64,
    /// The first iteration's seed; a fresh one (printed) if left out.
    #[arg(long)]
    seed: Option<u64>,
}

/// Run the chaos test with `args`, in the dev profile `cargo test` shares.
pub fn run(args: &ChaosArgs) -> Result<ExitCode, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "test",
        "--package",
        "triage",
        "--test",
        "it",
        "--",
        "--exact",
        "chaos::chaos_kill_and_resume_until_done",
        "--nocapture",
    ])
    .env("TRIAGE_CHAOS_ITERATIONS", args.iterations.to_string())
    .current_dir(crate::root());
    if let Some(seed) = args.seed {
        cmd.env("TRIAGE_CHAOS_SEED", seed.to_string());
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo test -p triage --test it chaos: {e}"))?;
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
