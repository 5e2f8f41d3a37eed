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
//! `cargo mutants` reads itself. Not part of CI: see
//! docs/mutation-testing.md.
//!
//! `--fast-first` runs a crate with a quick subset of its tests first
//! ([`FAST_TESTS`]: the crates whose every test run is a whole sweep), then
//! only that run's survivors (missed and timeouts) with all of the crate's
//! tests, and merges the two by mutant name. A mutant a subset catches, the
//! whole suite catches too, so the merged counts are those of one run with
//! every test, in a fraction of the time.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use clap::Args;
use sweep::report::Table;

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
    // The examples for strangers are libraries too: their tests are what a
    // copy of them starts from.
    "bank",
    "outbox",
];

/// For `--fast-first`: the `cargo test` arguments of each slow crate's
/// quick subset (its unit tests and its cheapest integration tests, a few
/// seconds instead of a minute per mutant). Each crate's integration tests
/// are one binary (`tests/it`), so the slow modules are skipped by name
/// (`--skip` matches a substring of the test's path, unit tests' included).
pub const FAST_TESTS: &[(&str, &[&str])] = &[
    (
        "designs",
        &["--lib", "--test", "it", "--", "--skip", "beyond::"],
    ),
    (
        "loop-sweep",
        &[
            "--lib",
            "--test",
            "it",
            "--",
            "--skip",
            "loop_sweep::",
            "--skip",
            "loop_power::",
            "--skip",
            "loop_http::",
            "--skip",
            "zombie::",
        ],
    ),
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
    /// For the crates of `FAST_TESTS` (designs, loop-sweep): test every
    /// mutant with a quick subset of the crate's tests first
    /// (DIR/CRATE/fast), then the survivors with all of them
    /// (DIR/CRATE/rest), and count the two merged. With --report, read
    /// results written this way.
    #[arg(long)]
    fast_first: bool,
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
    Ok(count(parse_named(json)?.iter().map(|(_, o)| o.as_str())))
}

/// Each mutant's name and summary (`CaughtMutant`, `MissedMutant`,
/// `Unviable`, `Timeout`) in the text of a `mutants.out/outcomes.json`,
/// in its order; the baseline is left out.
pub fn parse_named(json: &str) -> Result<Vec<(String, String)>, String> {
    let doc: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("outcomes.json is not JSON: {e}"))?;
    let outcomes = doc
        .get("outcomes")
        .and_then(|o| o.as_array())
        .ok_or("outcomes.json has no \"outcomes\" list")?;
    let mut named = Vec::new();
    for o in outcomes {
        if o.get("scenario").and_then(|s| s.as_str()) == Some("Baseline") {
            continue;
        }
        let name = o
            .pointer("/scenario/Mutant/name")
            .and_then(|n| n.as_str())
            .ok_or("an outcome in outcomes.json names no mutant")?;
        let summary = o.get("summary").and_then(|s| s.as_str()).unwrap_or("");
        named.push((name.to_owned(), summary.to_owned()));
    }
    Ok(named)
}

fn count<'a>(summaries: impl IntoIterator<Item = &'a str>) -> Counts {
    let mut c = Counts::default();
    for s in summaries {
        match s {
            "CaughtMutant" => c.caught += 1,
            "MissedMutant" => c.missed += 1,
            "Unviable" => c.unviable += 1,
            "Timeout" => c.timeout += 1,
            // "Success" of a mutant cannot happen; "Failure" is a baseline's.
            _ => {}
        }
    }
    c
}

/// The mutants a quick run left for the whole suite: missed and timed out.
pub fn survivors(named: &[(String, String)]) -> Vec<&str> {
    named
        .iter()
        .filter(|(_, o)| o == "MissedMutant" || o == "Timeout")
        .map(|(n, _)| n.as_str())
        .collect()
}

/// The quick run's outcomes with each mutant the second run tested
/// replaced by its outcome there, and their counts.
pub fn merge(fast: &[(String, String)], rest: &[(String, String)]) -> Counts {
    count(fast.iter().map(|(name, o)| {
        rest.iter()
            .find(|(n, _)| n == name)
            .map_or(o.as_str(), |(_, o2)| o2.as_str())
    }))
}

/// `name` as a regular expression matching exactly itself, for
/// `cargo mutants --re`.
pub fn exact_re(name: &str) -> String {
    format!("^{}$", regex_lite::escape(name))
}

/// The Markdown table of the mutation results, for a review note.
pub fn table(rows: &[(String, Counts)]) -> String {
    let mut t = Table::new(["crate", "caught", "missed", "unviable", "timeouts", "score"]);
    for (name, c) in rows {
        let score = c
            .score()
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.1} %"));
        t.row([
            name.clone(),
            c.caught.to_string(),
            c.missed.to_string(),
            c.unviable.to_string(),
            c.timeout.to_string(),
            score,
        ]);
    }
    t.markdown()
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
    let mut missed_files = Vec::new();
    for name in &crates {
        let out = out_root.join(name);
        if args.list {
            let n = list(root, name, args)?;
            println!("{name}: {n} mutants");
            continue;
        }
        let fast = FAST_TESTS
            .iter()
            .find(|(c, _)| c == name)
            .filter(|_| args.fast_first);
        let counts = match fast {
            Some((_, tests)) => {
                missed_files.push(out.join("rest").join("mutants.out/missed.txt"));
                fast_first(root, name, args, &out, tests)?
            }
            None => {
                if !args.report {
                    mutate(root, name, args, &out, &[], &[])?;
                }
                missed_files.push(out.join("mutants.out/missed.txt"));
                parse_outcomes(&read_outcomes(&out)?)?
            }
        };
        rows.push((name.clone(), counts));
    }
    if args.list {
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", table(&rows));
    let missed = rows.iter().any(|(_, c)| c.missed > 0 || c.timeout > 0);
    for ((name, c), file) in rows.iter().zip(&missed_files) {
        if c.missed > 0 {
            println!("{name}: missed mutants in {}", file.display());
        }
    }
    Ok(if missed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Mutates crate `name` (into `out`) with its quick `tests` first, then
/// the survivors again with all tests (into `out`/fast and `out`/rest):
/// the counts of both runs together.
fn fast_first(
    root: &Path,
    name: &str,
    args: &MutantsArgs,
    out: &Path,
    tests: &[&str],
) -> Result<Counts, String> {
    let (fast_dir, rest_dir) = (out.join("fast"), out.join("rest"));
    if !args.report {
        mutate(root, name, args, &fast_dir, &[], tests)?;
    }
    let fast_named = parse_named(&read_outcomes(&fast_dir)?)?;
    let left = survivors(&fast_named);
    if !args.report {
        // Results of an earlier second run describe other survivors.
        if rest_dir.exists() {
            std::fs::remove_dir_all(&rest_dir)
                .map_err(|e| format!("cannot remove {}: {e}", rest_dir.display()))?;
        }
        if !left.is_empty() {
            eprintln!(
                "{name}: {} survivors of the quick tests, again with all tests",
                left.len()
            );
            let res: Vec<String> = left
                .iter()
                .flat_map(|n| ["--re".to_owned(), exact_re(n)])
                .collect();
            mutate(root, name, args, &rest_dir, &res, &[])?;
        }
    }
    let rest_named = if left.is_empty() {
        Vec::new()
    } else {
        parse_named(&read_outcomes(&rest_dir)?)?
    };
    Ok(merge(&fast_named, &rest_named))
}

/// The `cargo mutants` command for crate `name`, with the options of `args`.
fn mutants_command(root: &Path, name: &str, args: &MutantsArgs) -> Command {
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
    cmd
}

/// How many mutants `cargo mutants --list` finds in crate `name`.
fn list(root: &Path, name: &str, args: &MutantsArgs) -> Result<usize, String> {
    let listed = mutants_command(root, name, args)
        .arg("--list")
        .output()
        .map_err(|e| format!("cannot run cargo mutants: {e}"))?;
    if !listed.status.success() {
        return Err(format!(
            "cargo mutants --list -p {name} failed: {}",
            String::from_utf8_lossy(&listed.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&listed.stdout).lines().count())
}

/// Test the mutants of crate `name` (only those `extra` selects, e.g.
/// `--re`), with `cargo test` arguments `tests` (empty: all of the crate's
/// tests), results in `out/mutants.out`.
fn mutate(
    root: &Path,
    name: &str,
    args: &MutantsArgs,
    out: &Path,
    extra: &[String],
    tests: &[&str],
) -> Result<(), String> {
    // cargo-mutants creates the output directory but not its parents.
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut cmd = mutants_command(root, name, args);
    cmd.args(extra).arg("--output").arg(out);
    if !tests.is_empty() {
        cmd.arg("--").args(tests);
    }
    eprintln!("cargo mutants -p {name} → {}", out.display());
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo mutants: {e}"))?;
    eprintln!("cargo mutants -p {name}: {status}");
    if ran(status.code()) {
        Ok(())
    } else {
        Err(format!(
            "cargo mutants -p {name} did not test its mutants ({status}); see its output above"
        ))
    }
}

/// Whether cargo-mutants' exit code says it tested the mutants: 0 (all
/// caught), 2 (some missed), 3 (some timed out). Others (1: bad
/// arguments, 4: the tests fail without a mutant, …) wrote no outcomes
/// worth counting.
pub fn ran(code: Option<i32>) -> bool {
    matches!(code, Some(0 | 2 | 3))
}

/// The text of `dir/mutants.out/outcomes.json`.
fn read_outcomes(dir: &Path) -> Result<String, String> {
    let file = dir.join("mutants.out").join("outcomes.json");
    std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))
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
    fn a_quick_run_and_its_survivors_rerun_merge_by_name() {
        let fast = parse_named(OUTCOMES).unwrap();
        assert_eq!(fast.len(), 6);
        assert_eq!(fast[0], ("a".to_owned(), "CaughtMutant".to_owned()));
        assert_eq!(survivors(&fast), vec!["d", "f"]);
        // The whole suite catches d; f times out again; a mutant only the
        // second run lists (its line moved) does not count.
        let rest = vec![
            ("d".to_owned(), "CaughtMutant".to_owned()),
            ("f".to_owned(), "Timeout".to_owned()),
            ("g".to_owned(), "MissedMutant".to_owned()),
        ];
        assert_eq!(
            merge(&fast, &rest),
            Counts {
                caught: 4,
                missed: 0,
                unviable: 1,
                timeout: 1
            }
        );
        assert_eq!(merge(&fast, &[]), parse_outcomes(OUTCOMES).unwrap());
        assert!(
            parse_named(r#"{"outcomes": [{"scenario": {}, "summary": "CaughtMutant"}]}"#).is_err()
        );
    }

    #[test]
    fn only_a_run_that_tested_its_mutants_counts() {
        for code in [0, 2, 3] {
            assert!(ran(Some(code)), "{code}");
        }
        for code in [1, 4, 70] {
            assert!(!ran(Some(code)), "{code}");
        }
        assert!(!ran(None), "killed by a signal");
    }

    /// A survivor's name, escaped, is a pattern of exactly that text.
    #[test]
    fn a_name_becomes_a_pattern_of_itself() {
        let name = "crates/designs/src/judge.rs:110:62: replace && with || in judge (x.y)[0] -> Option<&'static str>";
        let re = exact_re(name);
        assert!(re.starts_with("^") && re.ends_with("$"), "{re}");
        let compiled = regex_lite::Regex::new(&re).unwrap();
        assert!(compiled.is_match(name), "{re}");
        // Every meta character is escaped: no other text matches.
        for other in [
            name.replace('.', "x"),
            name.replace('(', "x"),
            format!("{name} "),
        ] {
            assert!(!compiled.is_match(&other), "{re} matches {other}");
        }
    }

    #[test]
    fn the_table_has_a_row_per_crate() {
        let c = parse_outcomes(OUTCOMES).unwrap();
        let t = table(&[("durable".into(), c), ("none".into(), Counts::default())]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4, "{t}");
        assert_eq!(
            lines[0],
            "| crate   | caught | missed | unviable | timeouts |  score |"
        );
        assert_eq!(
            lines[2],
            "| durable |      3 |      1 |        1 |        1 | 75.0 % |"
        );
        assert_eq!(
            lines[3],
            "| none    |      0 |      0 |        0 |        0 |      - |"
        );
    }
}
