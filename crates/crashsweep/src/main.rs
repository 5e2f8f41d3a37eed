//! `crashsweep`: sweep a program in any language from outside.
//!
//! ```text
//! crashsweep [--depth N] [--format json] --world DIR --judge 'CMD' -- PROGRAM ARGS…
//! crashsweep merge [--format json] FILE…
//! ```
//!
//! Each scenario copies `DIR` to a fresh directory, runs `PROGRAM ARGS…` in
//! it with the point protocol's descriptor (see `docs/point-protocol.md`),
//! kills it with `SIGKILL` at the scenario's hit, runs it again (the same
//! command, or `--restart`), and after the final life runs `sh -c CMD` in
//! the directory: the judge prints one JSON object of counters. Every
//! counter must stay zero unless it is named with `--count-only`.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use sweep::cli::{Env, Plan, SweepFlags, EXIT_USAGE};
use sweep::process::{IoPoints, Process};
use sweep::{cli::DynSubject, scenario::Scenario};

const AFTER_HELP: &str = "\
Each life runs with the world copy as its working directory and CRASHSWEEP_FD
and CRASHSWEEP_PROTOCOL in its environment; a program reports each crash point
over that descriptor (clients for Rust, Python, Go and Node: point protocol,
version 1; with --fork-server, version 2 for Python and Rust, and 3 with
--io-points: docs/point-protocol.md). The judge runs with the same working directory after the final
life and prints one JSON object, e.g. {\"duplicates\": 0, \"missing\": 0}; each
key is a counter (a column of the table, and in --format json a key of each
row after `once`, `twice`, …).

With --io-points the program needs no client: every call it makes on its
world (open-create, write, fsync, rename, …) or to a TCP peer (connect,
send) is a point, e.g. `rename state.json.tmp→state.json#2`. --list-points
shows them (docs/sweep-an-unchanged-program.md).

With --crash-states lose,entries (or --power-cuts, or --enumerate) each crash
is a power cut too: the tracer records the program's calls on its world
(data, names, fsyncs), and the restart runs on the world as the cut leaves
it, one table row per state (`lose: rename a.tmp→a#2`). A --service keeps
everything.

Exit codes:
  0  every scenario passed (and the table matches its snapshot)
  1  a scenario failed (a counter above zero, a life that failed or hung),
     or the table differs from its snapshot
  2  the command could not run: bad flags, an unreadable world, a program or
     judge that fails its clean run, a refused fork server (threads at
     ready(), forked lives or judges that differ from exec'd ones, --restart
     or {service} in the program's arguments), --bless refused under CI
  130, 143, 129  stopped by SIGINT, SIGTERM or SIGHUP: the running lives and
     services were killed first (with SIGKILL), so none outlives the sweep

Shards: `--partition K/N --format json` writes one shard's partial report;
`crashsweep merge FILE…` merges them into the sweep's table, running nothing.

Example:
  crashsweep --world clients/examples/world \\
      --judge \"python3 $PWD/clients/examples/judge.py\" \\
      -- python3 $PWD/clients/python/examples/payouts.py";

/// Sweep a program in any language: kill it at every crash point it reports,
/// restart it, and judge the world it leaves.
#[derive(Parser, Debug)]
#[command(name = "crashsweep", version, after_help = AFTER_HELP)]
struct Args {
    /// The template of every scenario's world: a directory copied fresh for
    /// each scenario (default: an empty directory).
    #[arg(long, value_name = "DIR")]
    world: Option<PathBuf>,
    /// Make every scenario's world under DIR (default: the system's
    /// temporary directory). A RAM disk (`--worlds-in /dev/shm`) sweeps a
    /// program that syncs its files several times faster with the same
    /// results: SIGKILL kills the process, not the machine, so a restart
    /// reads the page cache either way.
    #[arg(long, value_name = "DIR")]
    worlds_in: Option<PathBuf>,
    /// The judge: a shell command run in the world copy after the final
    /// life, printing one JSON object of counters.
    #[arg(long, value_name = "CMD", required_unless_present = "list_points")]
    judge: Option<String>,
    /// The restart after a crash, as a shell command (default: the program's
    /// command again).
    #[arg(long, value_name = "CMD")]
    restart: Option<String>,
    /// A service started for every scenario before its first life, as a
    /// shell command run in a directory of the scenario's own; it prints its
    /// URL (http://…) in its first line, and `{service}` in the program's
    /// arguments, --restart and --judge is replaced by it (also in
    /// CRASHSWEEP_SERVICE). E.g. 'tracker serve --dir . --addr 127.0.0.1:0'.
    #[arg(long, value_name = "CMD")]
    service: Option<String>,
    /// Sweep the service's crash points too (it speaks the point protocol):
    /// a crash at one kills the service and the program together, and the
    /// next life starts the service again in its directory.
    #[arg(long, requires = "service")]
    crash_service: bool,
    /// Fork every life from the program itself instead of starting it anew:
    /// the program runs once to its `ready()` call (imports, set-up), then
    /// each life is a child forked there (point protocol version 2; Python
    /// and Rust clients). Checked first: forked and exec'd clean lives must
    /// pass the same hits and leave the same world, and the program must
    /// have one thread at ready(). A --judge that calls ready() is forked
    /// too (checked: the same verdict on discovery's world); one that does
    /// not is started per scenario, with a note saying why.
    #[arg(long)]
    fork_server: bool,
    /// The subject's name in the table (default: the program's file name).
    #[arg(long)]
    name: Option<String>,
    /// A counter that only counts: a column, not a failure when above zero
    /// (repeatable).
    #[arg(long, value_name = "COUNTER")]
    count_only: Vec<String>,
    /// A variable for every life and the judge, as KEY=VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_env)]
    env: Vec<(String, String)>,
    /// Crash the program at its system calls too, with no change to it: every
    /// file operation on the world (open-create, open-truncate, write,
    /// truncate, fsync, rename, unlink, mkdir, rmdir, link, symlink) and every
    /// connect and send to a TCP peer is a point (`write state.json#3`,
    /// `rename a.tmp→a#1`, `send service#2`). Linux on x86_64, with ptrace
    /// allowed.
    #[arg(long)]
    io_points: bool,
    /// Only these I/O operations, comma-separated (e.g. rename,fsync,send;
    /// `open` is both opens).
    #[arg(
        long,
        value_name = "OPS",
        requires = "io_points",
        value_delimiter = ','
    )]
    io_ops: Vec<String>,
    /// Only I/O points on files matching one of these globs (relative to
    /// the world; a glob without `/` matches the file name), e.g. '*.db*'.
    #[arg(
        long,
        value_name = "GLOB",
        requires = "io_points",
        value_delimiter = ','
    )]
    io_paths: Vec<String>,
    /// Replace each match of REGEX in an I/O point's paths by `*`: for file
    /// names with random parts (e.g. 'tmp[a-z0-9_]{8}').
    #[arg(long, value_name = "REGEX", requires = "io_points")]
    io_mask: Option<String>,
    /// Sweep power cuts too: each crash leaves the world as a power cut in
    /// these states leaves it (comma-separated: process, lose, entries,
    /// torn, contents, in-order; one table row each). The program runs
    /// under the tracer, which records its calls on the world with their
    /// data and syncs. A --service keeps everything. Linux on x86_64.
    #[arg(
        long,
        value_name = "STATES",
        value_delimiter = ',',
        conflicts_with_all = ["power_cuts", "enumerate"]
    )]
    crash_states: Vec<String>,
    /// Every power-cut state: lose, entries, torn, contents, in-order (with
    /// process first).
    #[arg(long, conflicts_with = "enumerate")]
    power_cuts: bool,
    /// Every disk the persistence model allows at each crash (bounded at 64
    /// per crash, deterministic), each a scenario: `enumerated: HIT (disk N)`.
    #[arg(long)]
    enumerate: bool,
    /// Run the program once, with no crash and no judge, and list the points
    /// it passes with their counts and the scenarios each depth would run.
    #[arg(long, conflicts_with_all = ["snapshot"])]
    list_points: bool,
    /// The reviewed table: the sweep's table is compared with this file
    /// (--bless rewrites it).
    #[arg(long, value_name = "FILE")]
    snapshot: Option<PathBuf>,
    #[command(flatten)]
    flags: SweepFlags,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

/// `crashsweep merge`: the subcommand every sweep command line of the
/// workspace has (`sweep::cli`'s `merge`), with the same arguments.
#[derive(Parser, Debug)]
#[command(name = "crashsweep merge")]
struct MergeArgs {
    /// Partial reports written by `--partition K/N --format json`.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    format: sweep::cli::Format,
}

fn parse_env(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("{s:?} is not KEY=VALUE")),
    }
}

fn main() -> ExitCode {
    let raw: Vec<OsString> = std::env::args_os().collect();
    if raw.get(1).is_some_and(|a| a == "merge") {
        return match MergeArgs::try_parse_from(&raw[1..]) {
            Ok(m) => ExitCode::from(merge(&m)),
            Err(e) => {
                let _ = e.print();
                ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 })
            }
        };
    }
    let args = match Args::try_parse_from(&raw) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { 0 });
        }
    };
    // Stopped by kill or ^C, the sweep kills its lives and services first.
    if let Err(e) = sweep::process::stop_children_on_signals() {
        eprintln!(
            "crashsweep: cannot watch for SIGTERM ({e}); stopping it may leave services running"
        );
    }
    ExitCode::from(run(&args, &raw))
}

/// The process subject the flags describe, not yet discovered; `Err`: a
/// usage error's words.
fn process_of(args: &Args) -> Result<Process, String> {
    // --list-points runs no judge.
    let judge = args.judge.clone().unwrap_or_default();
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| default_name(&args.program));
    let mut process = Process::new(&name, &args.program).judge_command(&judge);
    if let Some(w) = &args.world {
        process = process.world_from(w);
    }
    if let Some(d) = &args.worlds_in {
        if !d.is_dir() {
            return Err(format!(
                "--worlds-in {}: not a directory (it must exist; nothing was run)",
                d.display()
            ));
        }
        process = process.worlds_in(d);
    }
    if let Some(svc) = &args.service {
        process = process.service(["sh", "-c", &format!("exec {svc}")]);
        if args.crash_service {
            process = process.crash_service();
        }
    }
    if let Some(r) = &args.restart {
        process = process.restart(["sh", "-c", r.as_str()]);
    }
    for (k, v) in &args.env {
        process = process.env(k, v);
    }
    if args.fork_server {
        process = process.fork_server();
    }
    for c in &args.count_only {
        process = process.count_only(c);
    }
    if args.io_points {
        let io = io_points(args).map_err(|e| e.to_string())?;
        process = process.io_points(io);
    }
    let states: Vec<String> = if args.power_cuts {
        ["process", "lose", "entries", "torn", "contents", "in-order"]
            .map(String::from)
            .to_vec()
    } else if args.enumerate {
        vec!["enumerated".into()]
    } else {
        args.crash_states.clone()
    };
    if !states.is_empty() {
        process = process
            .crash_states(&states)
            .map_err(|e| format!("--crash-states: {e}"))?;
    }
    Ok(process)
}

fn run(args: &Args, raw: &[OsString]) -> u8 {
    let process = match process_of(args) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    if args.list_points {
        return match process.list_points() {
            Ok(listing) => {
                print!("{listing}");
                0
            }
            Err(e) => {
                eprintln!("error: {e}");
                EXIT_USAGE
            }
        };
    }
    let process = match process.discover() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    if let Some(why) = process.judge_not_forked() {
        eprintln!("note: the judge is started for each scenario, not forked: {why}");
    }
    let subjects: Vec<&dyn DynSubject> = vec![&process];
    let rerun = |_: usize, sc: &Scenario| rerun_command(raw, sc);
    let plan = Plan {
        subjects,
        snapshot: args.snapshot.clone(),
        required: Vec::new(),
        crash_states: Vec::new(),
        default_depth: 2,
        rerun: &rerun,
    };
    let env = Env {
        ci: std::env::var("CI").ok(),
        progress: std::io::stderr().is_terminal(),
    };
    sweep::cli::execute(
        &plan,
        &args.flags,
        &env,
        &mut std::io::stdout(),
        &mut std::io::stderr(),
    )
}

/// The I/O points `--io-ops`, `--io-paths` and `--io-mask` select.
fn io_points(args: &Args) -> Result<IoPoints, sweep::process::SelectError> {
    let mut io = IoPoints::all();
    if !args.io_ops.is_empty() {
        io = io.ops(&args.io_ops)?;
    }
    if !args.io_paths.is_empty() {
        io = io.paths(&args.io_paths)?;
    }
    if let Some(m) = &args.io_mask {
        io = io.mask(m)?;
    }
    Ok(io)
}

/// `merge FILE…`: the shards' table, and their failures.
fn merge(args: &MergeArgs) -> u8 {
    let merged = match sweep::cli::merge_files(&args.files) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            return EXIT_USAGE;
        }
    };
    print!("{}", sweep::cli::render(&merged, args.format, false));
    let rerun =
        |_: usize, sc: &Scenario| format!("crashsweep … --scenario {}", quote(&sc.to_string()));
    let (lines, failed) = sweep::cli::failure_lines(&merged, &rerun);
    for l in lines {
        eprintln!("{l}");
    }
    u8::from(failed > 0)
}

/// This command line with `--scenario NAME` (and without flags that do not
/// apply to one scenario), quoted for a POSIX shell.
fn rerun_command(raw: &[OsString], sc: &Scenario) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut skip_value = false;
    let mut after_dashes = false;
    for (i, a) in raw.iter().enumerate() {
        let s = a.to_string_lossy().into_owned();
        if i == 0 {
            out.push("crashsweep".into());
            continue;
        }
        if after_dashes {
            out.push(quote(&s));
            continue;
        }
        if skip_value {
            skip_value = false;
            continue;
        }
        if s == "--" {
            out.push(format!("--scenario {}", quote(&sc.to_string())));
            out.push(s);
            after_dashes = true;
            continue;
        }
        let flag = s.split('=').next().unwrap_or_default();
        if matches!(
            flag,
            "--depth" | "--partition" | "--scenario" | "--threads" | "--snapshot"
        ) {
            skip_value = !s.contains('=');
            continue;
        }
        if s == "--bless" {
            continue;
        }
        out.push(quote(&s));
    }
    out.join(" ")
}

fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@+%".contains(c))
    {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The subject's name in the table when `--name` is not given: the
/// program's file name, or its script's. `python3 payouts.py --fixed` is
/// named after the script, not the interpreter: the script is the first
/// argument that is no option and has an extension.
fn default_name(program: &[OsString]) -> String {
    let script = program
        .iter()
        .skip(1)
        .map(PathBuf::from)
        .find(|a| !a.as_os_str().to_string_lossy().starts_with('-') && a.extension().is_some());
    let main = script.unwrap_or_else(|| program.first().map(PathBuf::from).unwrap_or_default());
    main.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name_of(argv: &[&str]) -> String {
        let argv: Vec<OsString> = argv.iter().map(Into::into).collect();
        default_name(&argv)
    }

    #[test]
    fn a_script_names_the_subject_whatever_options_follow_it() {
        assert_eq!(name_of(&["python3", "/x/payouts.py"]), "payouts.py");
        assert_eq!(
            name_of(&["python3", "/x/payouts.py", "--fixed"]),
            "payouts.py"
        );
        assert_eq!(
            name_of(&["python3", "-u", "/x/payouts.py", "--fixed"]),
            "payouts.py"
        );
        assert_eq!(name_of(&["node", "payouts.js", "--fixed"]), "payouts.js");
        assert_eq!(name_of(&["/x/payouts", "--fixed"]), "payouts");
        assert_eq!(name_of(&["/x/payouts"]), "payouts");
    }

    #[test]
    fn the_rerun_command_names_the_scenario_and_drops_sweep_only_flags() {
        let raw: Vec<OsString> = [
            "/x/crashsweep",
            "--depth",
            "2",
            "--threads=4",
            "--judge",
            "python3 j.py",
            "--",
            "python3",
            "a b.py",
        ]
        .iter()
        .map(Into::into)
        .collect();
        let sc: Scenario = "paid#2 → mid-save#1".parse().unwrap();
        assert_eq!(
            rerun_command(&raw, &sc),
            "crashsweep --judge 'python3 j.py' --scenario 'paid#2 → mid-save#1' -- python3 'a b.py'"
        );
    }

    #[test]
    fn env_is_key_equals_value() {
        assert_eq!(parse_env("A=b=c"), Ok(("A".into(), "b=c".into())));
        assert!(parse_env("=x").is_err());
        assert!(parse_env("novalue").is_err());
    }
}
