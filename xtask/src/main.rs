//! Developer commands: `cargo xtask sweep …` and `cargo xtask bench`.

mod bench;
mod defs;
mod variants;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use sweep::{Config, Progress, Report, Scenario};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "crashsweep developer commands")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Crash the designs (or the real loop) at every point and print the table.
    Sweep(SweepArgs),
    /// Time the crash points, the checkpoint writer and the full sweep.
    Bench(bench::BenchArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Format {
    Table,
    Json,
    Markdown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StorageArg {
    Memory,
    Disk,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
struct SweepArgs {
    #[command(subcommand)]
    action: Option<SweepAction>,
    /// A variant to sweep (repeatable); see --list. Default: the definition
    /// in sweeps/five-designs.sweep.json.
    #[arg(long = "variant", value_name = "NAME")]
    variants: Vec<String>,
    /// Run a sweep definition file (see sweeps/*.sweep.json).
    #[arg(long, value_name = "FILE", conflicts_with = "variants")]
    file: Option<PathBuf>,
    /// List the variants and the sweep definitions.
    #[arg(long)]
    list: bool,
    /// Skip the double pass (same as --depth 1).
    #[arg(long, conflicts_with = "depth")]
    single: bool,
    /// How many lives in a row crash (0 = clean only, 1 = single, 2 = double, …).
    #[arg(long)]
    depth: Option<u32>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Run the variants on another job file: a scripted job like
    /// sweeps/triage.json for the designs, a transcript like
    /// sweeps/loop-triage.json for the loop.
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Where worlds keep checkpoints.
    #[arg(long, value_enum)]
    storage: Option<StorageArg>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Rerun one scenario by name (e.g. "tracker accepted#2 → mid-save#1") and print its timeline.
    #[arg(long, value_name = "NAME")]
    scenario: Option<String>,
    /// Run only shard K of N (e.g. 2/3); with --format json, writes a partial report for `merge`.
    #[arg(long, value_name = "K/N")]
    partition: Option<String>,
    /// Rewrite the definition's reviewed snapshot with this run's table (never under CI).
    #[arg(long)]
    bless: bool,
}

#[derive(Subcommand)]
enum SweepAction {
    /// Merge the partial JSON reports of a partitioned sweep into its table.
    Merge {
        /// Partial reports written by `--partition K/N --format json`.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
}

fn main() -> ExitCode {
    // Die quietly when the reader of a pipe goes away (`… | head`), as
    // command-line tools do, instead of panicking on a failed print.
    // SAFETY: called once at start-up, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Sweep(args) => match args.action {
            Some(SweepAction::Merge { ref files, format }) => merge(files, format),
            None => sweep_cmd(&args),
        },
        Cmd::Bench(args) => bench::run(&args).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// The workspace root (xtask's parent directory).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn parse_partition(s: &str) -> Result<(u32, u32), String> {
    let bad = || format!("--partition {s:?}: expected K/N with 1 ≤ K ≤ N, e.g. 2/3");
    let (k, n) = s.split_once('/').ok_or_else(bad)?;
    let (k, n): (u32, u32) = (
        k.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if k == 0 || k > n {
        return Err(bad());
    }
    Ok((k, n))
}

/// The reviewed table belongs to the definition as written: a run that
/// changes its depth, job or variants, or covers one shard, is not it, and
/// is neither compared with the snapshot nor allowed to bless it.
fn runs_as_defined(args: &SweepArgs) -> bool {
    args.variants.is_empty()
        && args.depth.is_none()
        && !args.single
        && args.script.is_none()
        && args.partition.is_none()
}

fn sweep_cmd(args: &SweepArgs) -> Result<ExitCode, String> {
    if args.list {
        print!("{}", variants::listing());
        print!("{}", defs::listing()?);
        return Ok(ExitCode::SUCCESS);
    }
    let def = match (&args.file, args.variants.is_empty()) {
        (Some(f), _) => Some(defs::Definition::load(f)?),
        (None, true) => Some(defs::Definition::load(&defs::default_path())?),
        (None, false) => None,
    };
    let names: Vec<String> = match &def {
        Some(d) if args.variants.is_empty() => d.variants.clone(),
        _ => args.variants.clone(),
    };
    let script = args
        .script
        .clone()
        .or_else(|| def.as_ref().and_then(|d| d.job.clone()));
    let storage = match args.storage.or(def.as_ref().and_then(|d| d.storage)) {
        Some(StorageArg::Disk) => designs::Storage::Disk,
        _ => designs::Storage::Memory,
    };
    let subjects = names
        .iter()
        .map(|n| variants::subject(n, script.as_deref(), storage))
        .collect::<Result<Vec<_>, _>>()?;

    if let Some(name) = &args.scenario {
        let sc: Scenario = name.parse().map_err(|e| format!("--scenario: {e}"))?;
        let mut failed = false;
        for s in &subjects {
            let r = s.scenario(&sc);
            println!("variant: {}", s.name());
            print!("{}", r.timeline());
            failed |= r.failure.is_some();
        }
        return Ok(if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }

    let depth = if args.single {
        1
    } else {
        args.depth.or(def.as_ref().map(|d| d.depth)).unwrap_or(2)
    };
    let partition = args.partition.as_deref().map(parse_partition).transpose()?;
    let as_defined = runs_as_defined(args);
    if args.bless && (def.as_ref().and_then(|d| d.snapshot.as_ref()).is_none() || !as_defined) {
        return Err(
            "--bless rewrites the reviewed snapshot of a sweep definition run as written: \
             drop --variant, --depth, --single, --script and --partition (the five designs), \
             or use --file sweeps/NAME.sweep.json"
                .into(),
        );
    }
    let config = Config {
        depth,
        threads: args.threads,
        partition,
        trace: false,
    };
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{msg:>28} [{bar:40}] {pos}/{len} scenarios {elapsed}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut reports = Vec::new();
    for s in &subjects {
        bar.set_message(s.name());
        let progress = |p: Progress| match p {
            Progress::Planned(n) => bar.inc_length(n),
            Progress::Finished => bar.inc(1),
        };
        let mut report = s.sweep(&config, &progress).map_err(|e| e.to_string())?;
        for counter in def.iter().flat_map(|d| &d.required) {
            report.require(counter).map_err(|e| {
                format!("the sweep definition requires a counter its variant lacks: {e}")
            })?;
        }
        reports.push(report);
    }
    bar.finish_and_clear();

    let command = |r: &Report, sc: &Scenario| {
        let slug = variants::slug_of(&r.subject).unwrap_or_else(|| "?".into());
        let script = args
            .script
            .as_ref()
            .map(|p| format!(" --script {}", p.display()))
            .unwrap_or_default();
        format!("cargo xtask sweep --variant {slug}{script} --scenario \"{sc}\"")
    };
    print!("{}", render(&reports, args.format, partition.is_some()));
    if let (Some(d), true) = (&def, as_defined) {
        if let Some(snap) = &d.snapshot {
            let table = sweep::table(&reports.iter().map(Report::row).collect::<Vec<_>>());
            if args.bless {
                if sweep::snapshot::blessing() || std::env::var_os("CI").is_none() {
                    std::fs::write(snap, &table)
                        .map_err(|e| format!("cannot write {}: {e}", snap.display()))?;
                    eprintln!("wrote {}", snap.display());
                } else {
                    return Err(
                        "--bless is refused under CI: snapshots are reviewed, not rewritten".into(),
                    );
                }
            } else if let Err(diff) = sweep::snapshot::check(snap, &table) {
                eprintln!("{diff}");
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    report_failures(&reports, &command)
}

fn report_failures(
    reports: &[Report],
    command: &dyn Fn(&Report, &Scenario) -> String,
) -> Result<ExitCode, String> {
    const SHOWN: usize = 10;
    let mut total = 0;
    for r in reports {
        let failures: Vec<_> = r.failures().collect();
        total += failures.len();
        for f in failures.iter().take(SHOWN) {
            eprintln!(
                "FAILED {} / {}: {}\n    rerun: {}",
                r.subject,
                f.scenario,
                f.failure.as_deref().unwrap_or(""),
                command(r, &f.scenario)
            );
        }
        if failures.len() > SHOWN {
            eprintln!(
                "    … and {} more failing scenarios of {}",
                failures.len() - SHOWN,
                r.subject
            );
        }
    }
    if total > 0 {
        eprintln!("{total} scenarios failed a required invariant");
        Ok(ExitCode::FAILURE)
    } else {
        Ok(ExitCode::SUCCESS)
    }
}

fn render(reports: &[Report], format: Format, full: bool) -> String {
    let rows: Vec<_> = reports.iter().map(Report::row).collect();
    match format {
        Format::Table => sweep::table(&rows),
        Format::Markdown => sweep::markdown(&rows),
        Format::Json => {
            let mut v = serde_json::json!({ "rows": rows });
            if full {
                v["reports"] = serde_json::to_value(reports).unwrap_or(serde_json::Value::Null);
            }
            let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

fn merge(files: &[PathBuf], format: Format) -> Result<ExitCode, String> {
    let mut by_subject: Vec<(String, Vec<Report>)> = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", f.display()))?;
        let reports: Vec<Report> = serde_json::from_value(v["reports"].clone()).map_err(|e| {
            format!(
                "{}: no partial reports in it ({e}); write them with --partition K/N --format json",
                f.display()
            )
        })?;
        for r in reports {
            match by_subject.iter_mut().find(|(s, _)| *s == r.subject) {
                Some((_, v)) => v.push(r),
                None => by_subject.push((r.subject.clone(), vec![r])),
            }
        }
    }
    let merged = by_subject
        .into_iter()
        .map(|(_, parts)| Report::merge(parts).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    print!("{}", render(&merged, format, false));
    report_failures(&merged, &|r, sc| {
        format!(
            "cargo xtask sweep --variant {} --scenario \"{sc}\"",
            variants::slug_of(&r.subject).unwrap_or_else(|| "?".into())
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sweep_args(argv: &[&str]) -> SweepArgs {
        let mut full = vec!["cargo xtask", "sweep"];
        full.extend_from_slice(argv);
        match Cli::try_parse_from(full).unwrap().cmd {
            Cmd::Sweep(a) => a,
            Cmd::Bench(_) => unreachable!(),
        }
    }

    #[test]
    fn only_a_run_as_defined_meets_its_snapshot() {
        assert!(runs_as_defined(&sweep_args(&[])));
        assert!(runs_as_defined(&sweep_args(&[
            "--file",
            "sweeps/loop.sweep.json",
            "--threads",
            "1"
        ])));
        assert!(runs_as_defined(&sweep_args(&[
            "--storage",
            "disk",
            "--format",
            "json"
        ])));
        for argv in [
            &["--single"][..],
            &["--depth", "3"],
            &["--variant", "keys"],
            &["--script", "x.json"],
            &["--partition", "1/2"],
        ] {
            assert!(!runs_as_defined(&sweep_args(argv)), "{argv:?}");
        }
    }

    #[test]
    fn partitions_parse_and_bad_ones_are_refused() {
        assert_eq!(parse_partition("2/3"), Ok((2, 3)));
        assert_eq!(parse_partition(" 1 / 1 "), Ok((1, 1)));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", ""] {
            let e = parse_partition(bad).unwrap_err();
            assert!(e.contains("K/N"), "{bad}: {e}");
        }
    }

    #[test]
    fn json_rows_carry_the_documented_keys_in_table_order() {
        let script = designs::Script::load(designs::default_script_path()).unwrap();
        let subject = designs::Design::KeysMarkers.subject(&script, designs::Storage::Memory);
        let config = Config {
            depth: 1,
            ..Config::default()
        };
        let report = sweep::run(&subject, &config).unwrap();
        let json = render(&[report], Format::Json, false);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let row = v["rows"][0].as_object().unwrap();
        let keys: Vec<&str> = row.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "variant",
                "once",
                "with_dups",
                "dups",
                "missing",
                "asks",
                "calls_plus"
            ]
        );
        assert_eq!(row["once"], 43);
        assert!(v.get("reports").is_none());
    }

    #[test]
    fn the_default_definition_names_known_variants_and_its_snapshot() {
        let d = defs::Definition::load(&defs::default_path()).unwrap();
        for v in &d.variants {
            assert!(
                variants::subject(v, None, designs::Storage::Memory).is_ok(),
                "{v}"
            );
        }
        assert!(d.snapshot.is_some_and(|s| s.exists()));
        assert!(variants::subject("nope", None, designs::Storage::Memory).is_err());
    }

    #[test]
    fn bad_definitions_name_their_file() {
        let dir = std::env::temp_dir().join(format!("xtask-defs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text, needle) in [
            ("a.sweep.json", "{", "not a sweep definition"),
            (
                "b.sweep.json",
                r#"{"description": "x", "variants": []}"#,
                "empty",
            ),
            (
                "c.sweep.json",
                r#"{"description": "x", "variants": ["keys"], "storage": "tape"}"#,
                "tape",
            ),
            (
                "d.sweep.json",
                r#"{"description": "x", "variants": ["keys"], "extra": 1}"#,
                "unknown field",
            ),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            let e = defs::Definition::load(&p).err().unwrap();
            assert!(e.contains(name) && e.contains(needle), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
