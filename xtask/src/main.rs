//! Developer commands: `cargo xtask sweep …` and `cargo xtask bench`.

mod bench;
mod bench_tracer;
mod chaos;
mod compose;
mod defs;
mod disk;
mod mutants;
mod process;
mod registry;
mod suggest;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use compose::{Dim, Registry, Request, Spec};
use sweep::cli::{Env, Format, SweepFlags};
use sweep::{cli::DynSubject, scenario::Scenario};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "crashsweep developer commands", after_help = EXIT_CODES)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

const EXIT_CODES: &str = "\
Exit codes of `cargo xtask sweep` (those of sweep::cli):
  0  every scenario passed (and the table matches its snapshot)
  1  a scenario failed a required invariant, or the table differs from its snapshot
  2  the command could not run: bad flags, an unreadable or refused file,
     a sweep that could not start, --bless refused under CI";

// Parsed once per run: the size of the sweep's arguments does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Cmd {
    /// Crash the designs (or the real loop) at every point and print the table.
    Sweep(SweepArgs),
    /// Time the crash points, the checkpoint writer and the full sweep.
    Bench(bench::BenchArgs),
    /// Kill the real triage binary at random moments and resume it until
    /// done; check every effect happened once (the triage chaos test).
    Chaos(chaos::ChaosArgs),
    /// Mutation testing: `cargo mutants` on each library crate's own tests,
    /// with the score per crate (slow; not in CI).
    Mutants(mutants::MutantsArgs),
    /// One configuration of the benchmark, timed by its parent (internal).
    #[command(hide = true)]
    BenchOne(bench::OneArgs),
    /// Pass N crash points and exit: the smallest process life, for the
    /// process benchmark (internal).
    #[command(hide = true)]
    PointChild {
        /// How many points.
        n: u32,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum StorageArg {
    Memory,
    Disk,
}

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true, after_help = EXIT_CODES)]
struct SweepArgs {
    #[command(subcommand)]
    action: Option<SweepAction>,
    /// A subject to sweep (repeatable, or NAME,NAME); see --list. Default:
    /// the definition in sweeps/five-designs.sweep.json.
    #[arg(long = "variant", value_name = "NAME", value_delimiter = ',')]
    variants: Vec<String>,
    /// With --variant, the loop in a harder situation: fail-after-accept, approval-gate.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    situation: Vec<String>,
    /// With --variant, every crash a power cut keeping this much of the
    /// unsynced writes: process, lose, entries, torn, contents, in-order.
    #[arg(long, value_name = "STATE", value_delimiter = ',')]
    crash_state: Vec<String>,
    /// With --crash-state, a checkpoint writer with a fault (no-file-fsync, no-dir-fsync, …).
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    mutation: Vec<String>,
    /// With --variant, a person who answers question K of each scenario wrong.
    #[arg(long, value_name = "K", value_delimiter = ',')]
    person_wrong: Vec<String>,
    /// With --variant, how the model answers when asked again: scripted, new-ids, new-calls.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    model: Vec<String>,
    /// With --model, send idempotency keys although the design does not.
    #[arg(long)]
    plus_keys: bool,
    /// With --variant, a tracker that crashes: crashes, crashes-keys-in-index.
    #[arg(long, value_name = "NAME", value_delimiter = ',')]
    tracker: Vec<String>,
    /// Run a sweep definition file (see sweeps/*.sweep.json).
    #[arg(long, value_name = "FILE", conflicts_with = "variants")]
    file: Option<PathBuf>,
    /// List the subjects, the dimensions and the sweep definitions.
    #[arg(long)]
    list: bool,
    /// Run the disk table (enumerated crash states and I/O errors of the
    /// keyed design and the real loop) and compare it with
    /// snapshots/disk.txt (--bless rewrites it). Rerun one of its scenarios
    /// with --variant, --crash-state and --scenario, e.g. `--variant
    /// keys-markers --crash-state lose --scenario "enumerated: mid-save#3 (disk 0)"`.
    #[arg(long, conflicts_with_all = ["variants", "file"])]
    disk: bool,
    /// Skip the double pass (same as --depth 1).
    #[arg(long, conflicts_with = "depth")]
    single: bool,
    /// Run the variants on another job file: a scripted job like
    /// sweeps/triage.json for the designs, a transcript like
    /// sweeps/loop-triage.json for the loop.
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Run the designs on a synthetic job of N calls (two per turn, cycling
    /// issue_file, issue_file, search, issue_comment; every argument unique).
    #[arg(long, value_name = "N", conflicts_with = "script")]
    calls: Option<usize>,
    /// Where worlds keep checkpoints (the plain designs only).
    #[arg(long, value_enum)]
    storage: Option<StorageArg>,
    /// Depth, threads, output, one scenario, a shard, --bless: the flags of
    /// every sweep::cli command.
    #[command(flatten)]
    flags: SweepFlags,
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
        Cmd::PointChild { n } => {
            // Under a fork server, each life is forked here.
            crashpoint::ready();
            for _ in 0..n {
                crashpoint::point!("child point");
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Chaos(args) => chaos::run(&args),
        Cmd::Mutants(args) => mutants::run(&root(), &args),
        Cmd::BenchOne(args) => bench::one(&args).map(|()| ExitCode::SUCCESS),
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

impl SweepArgs {
    /// The variants named on the command line: the subjects of `--variant`
    /// and the values of every dimension flag.
    fn request(&self) -> Request {
        let mut r = Request {
            subjects: self.variants.clone(),
            ..Request::default()
        };
        for (dim, values) in [
            (Dim::Situation, &self.situation),
            (Dim::CrashState, &self.crash_state),
            (Dim::Mutation, &self.mutation),
            (Dim::PersonWrong, &self.person_wrong),
            (Dim::Model, &self.model),
            (Dim::Tracker, &self.tracker),
        ] {
            if !values.is_empty() {
                r.dims.insert(dim, values.clone());
            }
        }
        if self.plus_keys {
            r.dims.insert(Dim::PlusKeys, vec![compose::ON.to_owned()]);
        }
        r
    }
}

/// The reviewed table belongs to the definition as written: a run that
/// changes its depth, job or variants, or covers one shard, is not it, and
/// is neither compared with the snapshot nor allowed to bless it.
fn runs_as_defined(args: &SweepArgs) -> bool {
    args.variants.is_empty()
        && !args.request().has_dims()
        && args.flags.depth.is_none()
        && !args.single
        && args.script.is_none()
        && args.calls.is_none()
        && args.flags.partition.is_none()
}

/// The canonical spec of each variant, and its subject, in run order.
type Plan = (Vec<Spec>, Vec<Box<dyn DynSubject>>);

/// The variants a run sweeps, each resolved in the registry, and the
/// subjects built for them; refuses flags that do not apply.
fn plan(
    registry: &Registry,
    args: &SweepArgs,
    def: Option<&defs::Definition>,
) -> Result<Plan, String> {
    let request = args.request();
    if request.has_dims() && request.subjects.is_empty() {
        let flags: Vec<String> = request.dims.keys().map(|d| d.flag()).collect();
        return Err(format!(
            "{} composes with --variant: name the subject too (e.g. `--variant keys-markers --crash-state lose`; see --list)",
            flags.join(", ")
        ));
    }
    let specs = match def {
        Some(d) if request.subjects.is_empty() => d.variants.clone(),
        _ => request.specs(),
    };
    let mut entries = Vec::new();
    for spec in &specs {
        entries.push(registry.resolve(spec)?.entry);
    }
    let script = match args.calls {
        Some(n) => Some(synthetic_job(n)?),
        None => args
            .script
            .clone()
            .or_else(|| def.and_then(|d| d.job.clone())),
    };
    let storage = args.storage.or(def.and_then(|d| d.storage));
    registry.check_run_flags(&entries, storage.is_some(), script.as_deref())?;
    let storage = storage.unwrap_or(StorageArg::Memory);
    let subjects = entries
        .iter()
        .map(|e| e.build(script.as_deref(), storage))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((entries.into_iter().map(|e| e.spec).collect(), subjects))
}

/// A synthetic job of `n` calls written to a file in the temp directory,
/// for `--calls N`.
pub(crate) fn synthetic_job(n: usize) -> Result<PathBuf, String> {
    if n == 0 {
        return Err("--calls 0: a job needs at least one call".into());
    }
    let path = std::env::temp_dir().join(format!(
        "crashsweep-synthetic-{n}-{}.json",
        std::process::id()
    ));
    std::fs::write(&path, designs::Script::synthetic(n).to_json())
        .map_err(|e| format!("{}: cannot write the synthetic job: {e}", path.display()))?;
    Ok(path)
}

/// Rerun one scenario of each subject and print its timeline; a crash
/// point that no life passed gets a "did you mean".
fn rerun(subjects: &[Box<dyn DynSubject>], sc: &Scenario, format: Format) -> ExitCode {
    let mut failed = false;
    let mut docs = Vec::new();
    let config = sweep::Config::default();
    for s in subjects {
        let r = match s.rerun(&config, &sc.to_string()) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("error: --scenario: in {}: {e}", s.name());
                return ExitCode::from(sweep::cli::EXIT_USAGE);
            }
        };
        if format == Format::Json {
            docs.push(sweep::cli::scenario_json(&s.name(), &r));
        } else {
            println!("variant: {}", s.name());
            print!("{}", r.timeline());
        }
        if r.failure.is_some() {
            failed = true;
            let clean = s.rerun(&config, &Scenario::default().to_string());
            let clean_lives = clean.map(|c| c.lives).unwrap_or_default();
            let passed = clean_lives.iter().chain(&r.lives).flat_map(|l| &l.hits);
            for hint in point_hints(sc, passed.map(String::as_str)) {
                eprintln!("--scenario: in {}: {hint}", s.name());
            }
        }
    }
    if format == Format::Json {
        let doc = serde_json::json!({ "scenarios": docs });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// For each crash point of `sc` that no life passed (`passed` are the hits
/// of the lives, written `point#occurrence`): the closest point that was
/// passed, or the list of them.
fn point_hints<'a>(sc: &Scenario, passed: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut known: Vec<&str> = Vec::new();
    for h in passed {
        let point = h.rsplit_once('#').map_or(h, |(p, _)| p);
        if !known.contains(&point) {
            known.push(point);
        }
    }
    sc.hits
        .iter()
        .filter(|hit| !known.contains(&hit.point.as_ref()))
        .map(|hit| {
            let hint = suggest::closest(&hit.point, known.iter().copied()).map_or_else(
                || format!("the points passed are {}", known.join(", ")),
                |c| format!("did you mean {c:?}?"),
            );
            format!("no life passes a crash point named {:?}; {hint}", hit.point)
        })
        .collect()
}

/// `cargo xtask sweep --disk`: the disk table, checked against (or, with
/// `bless`, written to) snapshots/disk.txt.
fn disk_cmd(bless: bool) -> Result<ExitCode, String> {
    let table = disk::render()?;
    print!("{table}");
    let path = root().join("snapshots/disk.txt");
    if bless {
        if sweep::report::snapshot::under_ci(std::env::var("CI").ok().as_deref()) {
            return Err("--bless is refused under CI".into());
        }
        std::fs::write(&path, &table).map_err(|e| format!("{}: {e}", path.display()))?;
        return Ok(ExitCode::SUCCESS);
    }
    let accept = "If the new table is right, accept it with `cargo xtask sweep --disk --bless` \
                  and say in review why the numbers moved.";
    match sweep::report::snapshot::compare(&path, &table, accept) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => {
            eprintln!("{e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

/// The sweep definition `args` run: `--file`'s, the default one when no
/// `--variant` or dimension flag is given, else none.
fn definition(args: &SweepArgs) -> Result<Option<defs::Definition>, String> {
    if args.file.is_some() && args.request().has_dims() {
        return Err("the dimension flags compose with --variant, not with --file".into());
    }
    Ok(
        match (
            &args.file,
            args.variants.is_empty() && !args.request().has_dims(),
        ) {
            (Some(f), _) => Some(defs::Definition::load(f)?),
            (None, true) => Some(defs::Definition::load(&defs::default_path())?),
            (None, false) => None,
        },
    )
}

fn sweep_cmd(args: &SweepArgs) -> Result<ExitCode, String> {
    if args.disk {
        return disk_cmd(args.flags.bless);
    }
    let registry = Registry::load();
    if args.list {
        print!("{}", registry.listing());
        print!("{}", defs::listing()?);
        return Ok(ExitCode::SUCCESS);
    }
    let def = definition(args)?;
    let (specs, subjects) = plan(&registry, args, def.as_ref())?;
    let def_depth = def.as_ref().map_or(2, |d| d.depth);

    if let Some(name) = &args.flags.scenario {
        let sc: Scenario = name.parse().map_err(|e| format!("--scenario: {e}"))?;
        return Ok(rerun(&subjects, &sc, args.flags.format));
    }

    let as_defined = runs_as_defined(args);
    let snapshot = def.as_ref().and_then(|d| d.snapshot.clone());
    if args.flags.bless && (snapshot.is_none() || !as_defined) {
        return Err(
            "--bless rewrites the reviewed snapshot of a sweep definition run as written: \
             drop --variant, --depth, --single, --script and --partition (the five designs), \
             or use --file sweeps/NAME.sweep.json"
                .into(),
        );
    }
    let mut flags = args.flags.clone();
    if args.single {
        flags.depth = Some(1);
    }
    let command = |i: usize, sc: &Scenario| {
        let variant = specs
            .get(i)
            .map_or_else(|| "--variant ?".to_owned(), Spec::command);
        let script = args
            .script
            .as_ref()
            .map(|p| format!(" --script {}", p.display()))
            .or_else(|| args.calls.map(|n| format!(" --calls {n}")))
            .unwrap_or_default();
        format!("cargo xtask sweep {variant}{script} --scenario \"{sc}\"")
    };
    let plan = sweep::cli::Plan {
        subjects: subjects.iter().map(|s| &**s).collect(),
        snapshot: snapshot.filter(|_| as_defined),
        required: def.map(|d| d.required).unwrap_or_default(),
        // xtask's --crash-state makes one variant per state (each variant
        // sweeps its own state).
        crash_states: Vec::new(),
        default_depth: def_depth,
        rerun: &command,
    };
    let code = sweep::cli::execute(
        &plan,
        &flags,
        &Env::from_process(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    Ok(ExitCode::from(code))
}

fn merge(files: &[PathBuf], format: Format) -> Result<ExitCode, String> {
    let merged = sweep::cli::merge_files(files).map_err(|e| e.to_string())?;
    print!("{}", sweep::cli::render(&merged, format, false));
    let registry = Registry::load();
    let command = |i: usize, sc: &Scenario| {
        let variant = merged
            .get(i)
            .and_then(|r| registry.spec_of_title(&r.subject))
            .map_or_else(|| "--variant ?".to_owned(), |s| s.command());
        format!("cargo xtask sweep {variant} --scenario \"{sc}\"")
    };
    let (lines, failed) = sweep::cli::failure_lines(&merged, &command);
    for l in lines {
        eprintln!("{l}");
    }
    Ok(if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
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
            _ => unreachable!(),
        }
    }

    /// Every subject of every sweep definition in sweeps/, and the five
    /// designs on a longer synthetic job: sharing lives gives the same
    /// report, byte for byte, as replaying every scenario from a fresh world.
    #[test]
    #[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
    fn shared_and_brute_force_sweeps_give_the_same_bytes() {
        let registry = Registry::load();
        let mut defs: Vec<PathBuf> = std::fs::read_dir(root().join("sweeps"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(".sweep.json"))
            // Not the triage process sweep: replayed brute force it takes
            // two minutes of both cores. `.ci/run` sweeps it with restarts
            // from captured worlds against snapshots/triage-process.txt,
            // which replays made, so the same bytes are checked there.
            .filter(|p| !p.to_string_lossy().ends_with("triage-process.sweep.json"))
            .collect();
        defs.sort();
        assert!(defs.len() >= 4, "{defs:?}");
        let mut runs: Vec<(String, Vec<String>, u32)> = defs
            .iter()
            .map(|p| {
                let p = p.to_string_lossy().into_owned();
                let depth = defs::Definition::load(Path::new(&p)).unwrap().depth;
                (p.clone(), vec!["--file".to_owned(), p], depth)
            })
            .collect();
        runs.push((
            "the five designs, 8 calls".into(),
            vec![
                "--variant".into(),
                "save-once-per-turn,save-after-reply,keys,markers,keys-markers".into(),
                "--calls".into(),
                "8".into(),
            ],
            2,
        ));
        let mut shared_subjects = 0;
        for (what, argv, depth) in runs {
            let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
            let args = sweep_args(&argv);
            let def = args
                .file
                .as_ref()
                .map(|f| defs::Definition::load(f).unwrap());
            let (_, subjects) = plan(&registry, &args, def.as_ref()).unwrap();
            for s in &subjects {
                let config = sweep::Config {
                    depth,
                    threads: Some(2),
                    ..sweep::Config::default()
                };
                let shared = s.run(&config).unwrap();
                if !shared.stats.shared {
                    // Not opted in: the runner took the brute-force path.
                    continue;
                }
                shared_subjects += 1;
                let brute = s
                    .run(&sweep::Config {
                        share: false,
                        ..config.clone()
                    })
                    .unwrap();
                assert_eq!(
                    sweep::cli::render(&[shared], Format::Json, true),
                    sweep::cli::render(&[brute], Format::Json, true),
                    "{what}: {}",
                    s.name()
                );
            }
        }
        // The five designs (twice), the bank's two variants, and the loop's
        // six plain variants and twelve power-loss ones share.
        assert_eq!(shared_subjects, 30);
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
            &["--variant", "keys", "--crash-state", "lose"],
            &["--script", "x.json"],
            &["--partition", "1/2"],
        ] {
            assert!(!runs_as_defined(&sweep_args(argv)), "{argv:?}");
        }
    }

    #[test]
    fn partitions_parse_and_bad_ones_are_refused() {
        assert_eq!(sweep::cli::parse_partition("2/3"), Ok((2, 3)));
        assert_eq!(sweep::cli::parse_partition(" 1 / 1 "), Ok((1, 1)));
        for bad in ["0/3", "4/3", "3", "a/b", "1/0", ""] {
            let e = sweep::cli::parse_partition(bad).unwrap_err();
            assert!(e.contains("K/N"), "{bad}: {e}");
        }
    }

    #[test]
    fn json_rows_carry_the_documented_keys_in_table_order() {
        let subject = Registry::load()
            .resolve(&Spec::new("keys-markers"))
            .unwrap()
            .entry
            .build(None, StorageArg::Memory)
            .unwrap();
        let config = sweep::Config {
            depth: 1,
            ..sweep::Config::default()
        };
        let report = subject.run(&config).unwrap();
        let json = sweep::cli::render(&[report], Format::Json, false);
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
        let registry = Registry::load();
        for v in &d.variants {
            assert!(registry.resolve(v).is_ok(), "{v}");
        }
        assert!(d.snapshot.is_some_and(|s| s.exists()));
        assert!(registry.resolve(&Spec::new("nope")).is_err());
    }

    fn plan_of(argv: &[&str]) -> Result<Vec<String>, String> {
        let args = sweep_args(argv);
        let def = match &args.file {
            Some(f) => Some(defs::Definition::load(&root().join(f)).unwrap()),
            None if args.variants.is_empty() && !args.request().has_dims() => {
                Some(defs::Definition::load(&defs::default_path()).unwrap())
            }
            None => None,
        };
        plan(&Registry::load(), &args, def.as_ref())
            .map(|(specs, _)| specs.iter().map(Spec::to_string).collect())
    }

    #[test]
    fn flags_compose_into_variants() {
        assert_eq!(
            plan_of(&[
                "--variant",
                "loop-keyed",
                "--crash-state",
                "lose",
                "--mutation",
                "no-dir-fsync"
            ]),
            Ok(vec![
                "loop-keyed --crash-state lose --mutation no-dir-fsync".to_owned()
            ])
        );
        assert_eq!(
            plan_of(&[
                "--variant",
                "markers,keys",
                "--model",
                "new-ids",
                "--model",
                "new-calls"
            ]),
            Ok(vec![
                "markers --model new-ids".to_owned(),
                "markers --model new-calls".to_owned(),
                "keys --model new-ids".to_owned(),
                "keys --model new-calls".to_owned(),
            ])
        );
        assert_eq!(
            plan_of(&[
                "--variant",
                "save-once-per-turn",
                "--model",
                "scripted",
                "--plus-keys"
            ]),
            Ok(vec![
                "save-once-per-turn --model scripted --plus-keys".to_owned()
            ])
        );
        // A one-word name of the old slug grammar is no variant.
        let refused = plan_of(&["--variant", "power-no-dir-fsync-lose-markers"]).unwrap_err();
        assert!(
            refused.starts_with("unknown variant \"power-no-dir-fsync-lose-markers\""),
            "{refused}"
        );
    }

    #[test]
    fn flags_that_do_not_apply_to_the_run_are_refused() {
        for (argv, needle) in [
            (
                &["--variant", "loop-keyed", "--storage", "disk"][..],
                "--storage does not apply to `loop-keyed`",
            ),
            (
                &["--variant", "bank", "--storage", "memory"],
                "--storage does not apply to `bank`",
            ),
            (
                &["--file", "sweeps/loop.sweep.json", "--storage", "disk"],
                "--storage does not apply to `loop-keyed`",
            ),
            (
                &[
                    "--variant",
                    "keys",
                    "--crash-state",
                    "lose",
                    "--storage",
                    "disk",
                ],
                "only the plain designs",
            ),
            (
                &["--variant", "bank", "--script", "sweeps/triage.json"],
                "--script sweeps/triage.json does not apply to `bank`",
            ),
            (
                &["--crash-state", "lose"],
                "--crash-state composes with --variant",
            ),
            (
                &["--variant", "bank", "--crash-state", "lose"],
                "--crash-state does not apply to bank: the bank example",
            ),
        ] {
            let e = plan_of(argv).unwrap_err();
            assert!(e.contains(needle), "{argv:?}: {e}");
        }
        // The storage of the designs, given or defined, stays a choice.
        assert_eq!(plan_of(&["--storage", "disk"]).map(|v| v.len()), Ok(5));
        assert!(plan_of(&["--variant", "keys", "--storage", "disk"]).is_ok());
    }

    /// The shipped definitions name, in order, the variants of the tables
    /// their snapshots review (by the row titles the crates give them).
    #[test]
    fn the_definitions_expand_to_their_reviewed_variants() {
        let registry = Registry::load();
        let designs: Vec<String> = designs::Design::ALL
            .iter()
            .map(|d| d.title().to_owned())
            .collect();
        let looped: Vec<String> = loop_sweep::VARIANTS.iter().map(|v| v.title()).collect();
        let power: Vec<String> = loop_sweep::power_variants()
            .into_iter()
            .filter(|v| {
                v.power
                    .is_some_and(|p| p.writer == loop_sweep::Writer::Real)
            })
            .map(|v| v.title())
            .collect();
        let bank: Vec<String> = registry::bank_variants()
            .into_iter()
            .map(|(_, b)| sweep::Subject::name(&bank::Payday(b)))
            .collect();
        for (file, want) in [
            ("sweeps/five-designs.sweep.json", designs),
            ("sweeps/bank.sweep.json", bank),
            ("sweeps/loop.sweep.json", looped),
            ("sweeps/loop-power.sweep.json", power),
        ] {
            let d = defs::Definition::load(&root().join(file)).unwrap();
            let titles: Vec<String> = d
                .variants
                .iter()
                .map(|s| registry.resolve(s).unwrap().entry.title())
                .collect();
            assert_eq!(titles, want, "{file}");
        }
    }

    #[test]
    fn a_misspelt_crash_point_gets_the_closest_passed_one() {
        let sc: Scenario = "tracker acepted#1 → mid-save#1".parse().unwrap();
        let passed = [
            "mid-save#1",
            "tracker accepted#1",
            "tracker accepted#2",
            "after rename#1",
        ];
        assert_eq!(
            point_hints(&sc, passed.into_iter()),
            ["no life passes a crash point named \"tracker acepted\"; did you mean \"tracker accepted\"?"]
        );
        let sc: Scenario = "zzz#1".parse().unwrap();
        assert_eq!(
            point_hints(&sc, ["a#1", "b#1", "a#2"].into_iter()),
            ["no life passes a crash point named \"zzz\"; the points passed are a, b"]
        );
        let sc: Scenario = "mid-save#9".parse().unwrap();
        assert!(point_hints(&sc, passed.into_iter()).is_empty());
    }

    #[test]
    fn bad_definitions_name_their_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
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
            (
                "e.sweep.json",
                r#"{"description": "x", "variants": ["keys", {"variant": "keys", "crash-sate": "lose"}]}"#,
                "variant 2 of \"variants\": unknown key \"crash-sate\"; did you mean \"crash-state\"?",
            ),
        ] {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            let e = defs::Definition::load(&p).err().unwrap();
            assert!(e.contains(name) && e.contains(needle), "{e}");
        }
    }
}
