//! `cargo xtask mutants [CRATE…]`: mutation testing of the library crates,
//! each on its own tests (`cargo mutants -p CRATE`), with the score per
//! crate.
//!
//! It installs `cargo-mutants` (`cargo install cargo-mutants --locked`) if
//! `cargo mutants --version` fails, runs it once per crate (one at a time,
//! `--jobs 1` by default: it is slow, minutes per file on two cores), and
//! reads each run's `mutants.out/outcomes.json` to print caught, missed,
//! unviable and timeouts, and the score caught ÷ (caught + missed).
//! Exclusions and timeouts live in `.cargo/mutants.toml`, which
//! `cargo mutants` reads itself. Not part of CI: see the README's
//! "Mutation testing".

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Args;

/// The library crates, in the order `cargo xtask mutants` runs them when
/// none is named.
pub const LIBRARY_CRATES: &[&str] = &[
    "durable",
    "tracker",
    "crashpoint",
    "sweep",
    "agent",
    "triage-tools",
    "loop-sweep",
    "designs",
    "test-provider",
];

#[derive(Args)]
pub struct MutantsArgs {
    /// The crates to test (default: every library crate).
    #[arg(value_name = "CRATE")]
    crates: Vec<String>,
    /// Only mutants in files matching this glob (repeatable), as
    /// `cargo mutants --file`.
    #[arg(long = "file", short = 'f', value_name = "GLOB")]
    files: Vec<String>,
    /// Builds and tests in parallel (each needs its own build directory).
    #[arg(long, short = 'j', default_value_t = 1)]
    jobs: u32,
    /// Where each crate's results go: DIR/CRATE/mutants.out.
    #[arg(long, value_name = "DIR")]
    output: Option<PathBuf>,
    /// Only list the mutants of each crate and count them; test nothing.
    #[arg(long)]
    list: bool,
    /// Print the table of results already in --output, running nothing.
    #[arg(long, conflicts_with = "list")]
    report: bool,
}

/// The outcome counts of one `cargo mutants` run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub caught: u64,
    pub missed: u64,
    pub unviable: u64,
    pub timeout: u64,
}

impl Counts {
    /// caught ÷ (caught + missed), in percent; `None` when nothing was
    /// tested.
    pub fn score(&self) -> Option<f64> {
        let tested = self.caught + self.missed;
        (tested > 0).then(|| 100.0 * self.caught as f64 / tested as f64)
    }
}

/// Count the outcomes in the text of a `mutants.out/outcomes.json`; the
/// baseline (not a mutant) is not counted.
pub fn parse_outcomes(json: &str) -> Result<Counts, String> {
    let doc: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("outcomes.json is not JSON: {e}"))?;
    let outcomes = doc
        .get("outcomes")
        .and_then(|o| o.as_array())
        .ok_or("outcomes.json has no \"outcomes\" list")?;
    let mut c = Counts::default();
    for o in outcomes {
        if o.get("scenario").and_then(|s| s.as_str()) == Some("Baseline") {
            continue;
        }
        match o.get("summary").and_then(|s| s.as_str()) {
            Some("CaughtMutant") => c.caught += 1,
            Some("MissedMutant") => c.missed += 1,
            Some("Unviable") => c.unviable += 1,
            Some("Timeout") => c.timeout += 1,
            // "Success" of a mutant cannot happen; "Failure" is a baseline's.
            _ => {}
        }
    }
    Ok(c)
}

/// The Markdown table of the note issue 18 asks for.
pub fn table(rows: &[(String, Counts)]) -> String {
    let mut s = String::from(
        "| crate | caught | missed | unviable | timeouts | score |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for (name, c) in rows {
        let score = c
            .score()
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.1} %"));
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} | {} | {score} |",
            c.caught, c.missed, c.unviable, c.timeout
        );
    }
    s
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// Install cargo-mutants unless `cargo mutants --version` already works.
fn ensure_installed() -> Result<(), String> {
    let ok = cargo()
        .args(["mutants", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Ok(());
    }
    eprintln!("cargo-mutants is missing: cargo install cargo-mutants --locked");
    let status = cargo()
        .args(["install", "cargo-mutants", "--locked"])
        .status()
        .map_err(|e| format!("cannot run cargo install: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "cargo install cargo-mutants --locked failed: {status}"
        ))
    }
}

/// Run `cargo xtask mutants` with `args` from the workspace `root`.
pub fn run(root: &Path, args: &MutantsArgs) -> Result<ExitCode, String> {
    let crates: Vec<String> = if args.crates.is_empty() {
        LIBRARY_CRATES.iter().map(|s| (*s).to_owned()).collect()
    } else {
        args.crates.clone()
    };
    let out_root = args
        .output
        .clone()
        .unwrap_or_else(|| root.join("target").join("mutants"));
    if !args.report {
        ensure_installed()?;
    }
    let mut rows = Vec::new();
    for name in &crates {
        let out = out_root.join(name);
        if !args.report {
            let mut cmd = cargo();
            cmd.current_dir(root)
                // --all-features: a crate's tests behind its own features
                // (sweep's `cli`, agent's `mcp-tools`) count as its tests.
                .args([
                    "mutants",
                    "--package",
                    name,
                    "--no-shuffle",
                    "--all-features",
                ])
                .arg(format!("--jobs={}", args.jobs));
            for f in &args.files {
                cmd.args(["--file", f]);
            }
            if args.list {
                cmd.arg("--list");
                let listed = cmd
                    .output()
                    .map_err(|e| format!("cannot run cargo mutants: {e}"))?;
                if !listed.status.success() {
                    return Err(format!(
                        "cargo mutants --list -p {name} failed: {}",
                        String::from_utf8_lossy(&listed.stderr).trim()
                    ));
                }
                let n = String::from_utf8_lossy(&listed.stdout).lines().count();
                println!("{name}: {n} mutants");
                continue;
            }
            cmd.arg("--output").arg(&out);
            eprintln!("cargo mutants -p {name} → {}", out.display());
            // Exit codes 2 (missed) and 3 (timeouts) still wrote outcomes;
            // anything else without an outcomes file is an error below.
            let status = cmd
                .status()
                .map_err(|e| format!("cannot run cargo mutants: {e}"))?;
            eprintln!("cargo mutants -p {name}: {status}");
        }
        let file = out.join("mutants.out").join("outcomes.json");
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let counts = parse_outcomes(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        rows.push((name.clone(), counts));
    }
    if args.list {
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", table(&rows));
    let missed = rows.iter().any(|(_, c)| c.missed > 0 || c.timeout > 0);
    for (name, c) in &rows {
        if c.missed > 0 {
            println!(
                "{name}: missed mutants in {}",
                out_root.join(name).join("mutants.out/missed.txt").display()
            );
        }
    }
    Ok(if missed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTCOMES: &str = r#"{"outcomes": [
        {"scenario": "Baseline", "summary": "Success"},
        {"scenario": {"Mutant": {"name": "a"}}, "summary": "CaughtMutant"},
        {"scenario": {"Mutant": {"name": "b"}}, "summary": "CaughtMutant"},
        {"scenario": {"Mutant": {"name": "c"}}, "summary": "CaughtMutant"},
        {"scenario": {"Mutant": {"name": "d"}}, "summary": "MissedMutant"},
        {"scenario": {"Mutant": {"name": "e"}}, "summary": "Unviable"},
        {"scenario": {"Mutant": {"name": "f"}}, "summary": "Timeout"}
    ], "total_mutants": 6}"#;

    #[test]
    fn outcomes_are_counted_without_the_baseline() {
        let c = parse_outcomes(OUTCOMES).unwrap();
        assert_eq!(
            c,
            Counts {
                caught: 3,
                missed: 1,
                unviable: 1,
                timeout: 1
            }
        );
        assert_eq!(c.score(), Some(75.0));
        assert_eq!(Counts::default().score(), None);
        assert!(parse_outcomes("{}").is_err());
        assert!(parse_outcomes("nope").is_err());
    }

    #[test]
    fn the_table_has_a_row_per_crate() {
        let c = parse_outcomes(OUTCOMES).unwrap();
        let t = table(&[("durable".into(), c), ("none".into(), Counts::default())]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert_eq!(lines[2], "| durable | 3 | 1 | 1 | 1 | 75.0 % |");
        assert_eq!(lines[3], "| none | 0 | 0 | 0 | 0 | - |");
    }
}
