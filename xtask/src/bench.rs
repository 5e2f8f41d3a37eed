//! `cargo xtask bench`: medians of repeated timings, and ratios measured in
//! the same run. Never a timed test: numbers are reported, not asserted.

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use clap::Args;
use sweep::Config;

use crate::StorageArg as Storage;

#[derive(Args)]
pub struct BenchArgs {
    /// Fewer samples (for a quick look).
    #[arg(long)]
    quick: bool,
    /// Skip the checkpoint writer's benchmark (`cargo bench -p durable`).
    #[arg(long)]
    no_durable: bool,
    /// Only the cost of the safety nets: the five-design sweep with the
    /// nets on (the default `Config`) and off, in one run.
    #[arg(long)]
    nets: bool,
    /// Only the enumerated crash-state sweeps and the disk table
    /// (snapshots/disk.txt).
    #[arg(long)]
    disk: bool,
    /// Time the build this command runs in, even a dev build, instead of
    /// building and running a release build (slower numbers; the ratios of
    /// one run still compare).
    #[arg(long)]
    this_build: bool,
    /// Only the process sweeps: the cost of one process life (spawn, the
    /// point protocol's handshake at one point, exit) next to an in-process
    /// life, the scenarios per second of the triage process sweep, and the
    /// tracer's cost (a stop, 10,000 writes traced and untraced, I/O
    /// points against named points).
    #[arg(long)]
    process: bool,
    /// Only the tracer's part of --process: the cost of one stop, 10,000
    /// writes traced and untraced, and the payouts example's scenarios per
    /// second with I/O points against named points.
    #[arg(long)]
    tracer: bool,
    /// Only the fork server's part of --process: a small Rust binary's life
    /// against the spawn floor, the Python payouts example at depth 2
    /// exec'd and forked, and the LangGraph agent's sweeps (with
    /// `CRASHSWEEP_LANGGRAPH_PYTHON`).
    #[arg(long)]
    fork: bool,
    /// Only the power cuts' part of --process: the disk record's cost on
    /// 10,000 writes, and crash states rebuilt and judged per second.
    #[arg(long)]
    power: bool,
    /// Only the growth benchmark: the five designs and the long jobs, each
    /// configuration in a child process (wall, CPU, peak memory).
    #[arg(long)]
    growth: bool,
    /// The long jobs' sizes (calls), for the growth benchmark.
    #[arg(long, value_delimiter = ',', default_value = "8,16,32,64")]
    calls: Vec<usize>,
    /// Run brute force (no sharing) on long jobs up to this many calls only
    /// (brute force on 64 calls takes minutes per run).
    #[arg(long, default_value_t = 32)]
    brute_up_to: usize,
    /// Samples per configuration of the growth benchmark (median).
    #[arg(long, default_value_t = 3)]
    samples: usize,
    /// Samples for the long jobs above --brute-up-to (default: --samples).
    #[arg(long)]
    long_samples: Option<usize>,
    /// The growth benchmark's thread counts.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    threads: Vec<usize>,
}

/// One configuration, run in a child process so its peak memory and CPU
/// time are its own.
#[derive(Args)]
pub struct OneArgs {
    /// Synthetic job size; none = the five designs on the book's job.
    #[arg(long)]
    calls: Option<usize>,
    #[arg(long)]
    threads: usize,
    #[arg(long)]
    no_share: bool,
}

/// Run one configuration and print `scenarios lives wall-seconds`.
pub fn one(args: &OneArgs) -> Result<(), String> {
    let subjects: Vec<Box<dyn sweep::cli::DynSubject>> = match args.calls {
        None => crate::registry::five_designs(Storage::Memory)?,
        Some(n) => {
            let job = designs::Script::synthetic(n);
            vec![Box::new(
                designs::Design::KeysMarkers.subject(&job, designs::Storage::Memory),
            )]
        }
    };
    let config = Config {
        threads: Some(args.threads),
        share: !args.no_share,
        // No trace: keep tallies and failures only (bounded memory).
        tally: true,
        ..Config::default()
    };
    let t = Instant::now();
    let (mut scenarios, mut lives) = (0, 0);
    for s in &subjects {
        let r = s.run(&config).map_err(|e| e.to_string())?;
        let stats = r.stats;
        black_box(&r);
        scenarios += stats.scenarios;
        lives += stats.lives;
    }
    println!("{scenarios} {lives} {:.6}", t.elapsed().as_secs_f64());
    Ok(())
}

struct Measured {
    scenarios: u64,
    lives: u64,
    wall: f64,
    cpu: f64,
    max_rss_kb: i64,
}

/// Run `bench-one` in a child and take its own wall time, and its CPU time
/// and peak memory from `wait4`.
fn child(calls: Option<usize>, threads: usize, share: bool) -> Result<Measured, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find xtask itself: {e}"))?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench-one", "--threads", &threads.to_string()]);
    if let Some(n) = calls {
        cmd.args(["--calls", &n.to_string()]);
    }
    if !share {
        cmd.arg("--no-share");
    }
    cmd.stdout(std::process::Stdio::piped());
    let mut ch = cmd
        .spawn()
        .map_err(|e| format!("cannot start bench-one: {e}"))?;
    let mut out = String::new();
    if let Some(mut so) = ch.stdout.take() {
        use std::io::Read;
        so.read_to_string(&mut out)
            .map_err(|e| format!("cannot read bench-one: {e}"))?;
    }
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value; wait4 fills it in for our
    // own child, which has not been reaped.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = ch.id() as libc::pid_t;
    // SAFETY: pid is our child; status and ru are valid for writes.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    if r != pid || !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!(
            "bench-one {calls:?} {threads} {share} failed ({status})"
        ));
    }
    let f: Vec<&str> = out.split_whitespace().collect();
    let parse = |i: usize| {
        f.get(i)
            .and_then(|x| x.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Ok(Measured {
        scenarios: parse(0) as u64,
        lives: parse(1) as u64,
        wall: parse(2),
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        max_rss_kb: ru.ru_maxrss,
    })
}

fn med(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median wall, CPU and peak memory of `samples` children.
fn measure(
    calls: Option<usize>,
    threads: usize,
    share: bool,
    samples: usize,
) -> Result<Measured, String> {
    let runs = (0..samples.max(1))
        .map(|_| child(calls, threads, share))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Measured {
        scenarios: runs[0].scenarios,
        lives: runs[0].lives,
        wall: med(runs.iter().map(|m| m.wall).collect()),
        cpu: med(runs.iter().map(|m| m.cpu).collect()),
        max_rss_kb: runs.iter().map(|m| m.max_rss_kb).max().unwrap_or(0),
    })
}

/// The growth benchmark: the five designs and the long jobs, shared and
/// brute force, 1 and 2 threads.
fn growth(args: &BenchArgs) -> Result<(), String> {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "== growth: keys and markers at depth 2 on synthetic jobs, each configuration a child process, median of {} ({} above {} calls; load average at start: {})",
        args.samples,
        args.long_samples.unwrap_or(args.samples),
        args.brute_up_to,
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "{:<14} {:>5} {:>7} {:>9} {:>10} {:>12} {:>9} {:>9} {:>9}",
        "job", "mode", "threads", "scenarios", "lives", "lives/scen.", "wall s", "CPU s", "peak MB"
    );
    let mut rows: Vec<(Option<usize>, bool, usize, Measured)> = Vec::new();
    let mut jobs: Vec<Option<usize>> = vec![None];
    jobs.extend(args.calls.iter().map(|&n| Some(n)));
    for &job in &jobs {
        for share in [true, false] {
            if !share && job.is_some_and(|n| n > args.brute_up_to) {
                continue;
            }
            for &threads in &args.threads {
                let samples = match (job, args.long_samples) {
                    (Some(n), Some(k)) if n > args.brute_up_to => k,
                    _ => args.samples,
                };
                let m = measure(job, threads, share, samples)?;
                println!(
                    "{:<14} {:>5} {:>7} {:>9} {:>10} {:>12.2} {:>9.3} {:>9.3} {:>9.1}",
                    job.map_or_else(|| "five designs".to_owned(), |n| format!("{n} calls")),
                    if share { "share" } else { "brute" },
                    threads,
                    m.scenarios,
                    m.lives,
                    m.lives as f64 / m.scenarios as f64,
                    m.wall,
                    m.cpu,
                    m.max_rss_kb as f64 / 1024.0
                );
                rows.push((job, share, threads, m));
            }
        }
    }
    print_growth_ratios(args, &jobs, &rows);
    Ok(())
}

/// The ratios between growth's measured `rows` (job, shared, threads, the
/// measure): threads, sharing, and how time grows with the job's calls.
fn print_growth_ratios(
    args: &BenchArgs,
    jobs: &[Option<usize>],
    rows: &[(Option<usize>, bool, usize, Measured)],
) {
    let get = |job: Option<usize>, share: bool, threads: usize| {
        rows.iter()
            .find(|(j, s, t, _)| *j == job && *s == share && *t == threads)
            .map(|(_, _, _, m)| m)
    };
    println!(
        "
ratios (same invocation):"
    );
    for &job in jobs {
        let name = job.map_or_else(|| "five designs".to_owned(), |n| format!("{n} calls"));
        if let (Some(a), Some(b)) = (get(job, true, 1), get(job, true, 2)) {
            println!(
                "{name:<14} shared, 2 threads vs 1: {:.2}x wall",
                a.wall / b.wall
            );
        }
        if let (Some(a), Some(b)) = (get(job, false, 2), get(job, true, 2)) {
            println!(
                "{name:<14} brute / shared (2 threads): {:.2}x wall, {:.2}x CPU, {:.1}x lives",
                a.wall / b.wall,
                a.cpu / b.cpu,
                a.lives as f64 / b.lives as f64
            );
        }
    }
    let (lo, hi) = (args.calls.first().copied(), args.calls.last().copied());
    if let (Some(lo), Some(hi)) = (lo, hi) {
        for (share, threads) in [(true, 2), (true, 1), (false, 2)] {
            if let (Some(a), Some(b)) =
                (get(Some(lo), share, threads), get(Some(hi), share, threads))
            {
                let k = (b.wall / a.wall).ln() / (hi as f64 / lo as f64).ln();
                let c = (b.cpu / a.cpu).ln() / (hi as f64 / lo as f64).ln();
                println!(
                    "growth {lo} → {hi} calls, {} {threads} thread(s): wall ~ calls^{k:.2}, CPU ~ calls^{c:.2}",
                    if share { "shared" } else { "brute" }
                );
            }
        }
    }
}

/// `cargo xtask` builds in the dev profile, shared with `cargo test`;
/// timings are taken from a release build, the one docs/benchmarks.md quotes.
fn in_release(args: &BenchArgs) -> Result<(), String> {
    eprintln!("note: timing a release build: cargo run --release --package xtask -- bench");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["run", "--release", "--package", "xtask", "--", "bench"])
        .current_dir(crate::root());
    if args.quick {
        cmd.arg("--quick");
    }
    if args.no_durable {
        cmd.arg("--no-durable");
    }
    if args.nets {
        cmd.arg("--nets");
    }
    if args.disk {
        cmd.arg("--disk");
    }
    if args.growth {
        cmd.arg("--growth");
    }
    if args.process {
        cmd.arg("--process");
    }
    if args.tracer {
        cmd.arg("--tracer");
    }
    if args.power {
        cmd.arg("--power");
    }
    if args.fork {
        cmd.arg("--fork");
    }
    let calls: Vec<String> = args.calls.iter().map(usize::to_string).collect();
    cmd.args(["--calls", &calls.join(",")]);
    cmd.args(["--brute-up-to", &args.brute_up_to.to_string()]);
    cmd.args(["--samples", &args.samples.to_string()]);
    let threads: Vec<String> = args.threads.iter().map(usize::to_string).collect();
    cmd.args(["--threads", &threads.join(",")]);
    if let Some(k) = args.long_samples {
        cmd.args(["--long-samples", &k.to_string()]);
    }
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run cargo run --release: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "the release build of the benchmarks failed: {status}"
        ))
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn sample(n: usize, mut f: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..n {
        f();
    }
    t.elapsed()
}

/// The enumerated sweeps of the real writer (depth 2, every disk of every
/// crash) and the whole disk table, default threads.
fn disk(samples: usize) -> Result<(), String> {
    use crate::disk;
    println!("== enumerated crash states (median of {samples} runs)");
    let script =
        designs::Script::load(designs::default_script_path()).map_err(|e| e.to_string())?;
    let keyed = disk::design(designs::Writer::Real, &script);
    let looped = disk::looped(loop_sweep::Writer::Real)?;
    let time = |f: &dyn Fn() -> Result<usize, String>| -> Result<(Duration, usize), String> {
        let mut times = Vec::new();
        let mut n = 0;
        for _ in 0..samples {
            let t = Instant::now();
            n = black_box(f()?);
            times.push(t.elapsed());
        }
        Ok((median(times), n))
    };
    let (d, n) = time(&|| Ok(disk::enumerated(&keyed, 2)?.scenarios.len()))?;
    println!(
        "keys and markers, depth 2  {n:>6} scenarios {:>8.3} s",
        d.as_secs_f64()
    );
    let (d, n) = time(&|| Ok(disk::enumerated(&looped, 2)?.scenarios.len()))?;
    println!(
        "loop keyed, depth 2        {n:>6} scenarios {:>8.3} s",
        d.as_secs_f64()
    );
    let (d, _) = time(&|| Ok(disk::render()?.len()))?;
    println!(
        "the whole disk table                        {:>8.3} s",
        d.as_secs_f64()
    );
    Ok(())
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    if args.this_build && cfg!(debug_assertions) {
        println!(
            "note: timing this dev build (opt-level 1, debug assertions on), not a release build"
        );
    } else if cfg!(debug_assertions) {
        return in_release(args);
    }
    if args.growth {
        return growth(args);
    }
    let samples = if args.quick { 5 } else { 11 };
    if args.nets {
        return nets(samples);
    }
    if args.disk {
        return disk(samples.min(5));
    }
    if args.tracer {
        return crate::bench_tracer::tracer(samples.min(5));
    }
    if args.power {
        return bench_power(samples.min(5));
    }
    if args.fork {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        return fork_server(&exe, samples).and_then(|()| langgraph_sweeps());
    }
    if args.process {
        return process(samples).and_then(|()| langgraph_sweeps());
    }

    bench_points(samples);
    bench_five_designs(samples)?;
    println!();
    growth(args)?;
    if !args.no_durable {
        bench_durable_save()?;
    }
    Ok(())
}

/// The cost of a crash point outside any scope and inside a recording
/// one: median ns per point of `samples` samples.
fn bench_points(samples: usize) {
    println!("== crash points ({samples} samples, median)");
    let n = 20_000_000;
    let outside = median(
        (0..samples)
            .map(|_| sample(n, || crashpoint::point!(black_box("bench"))))
            .collect(),
    );
    let per_outside = outside.as_secs_f64() * 1e9 / n as f64;
    println!("point outside any scope          {per_outside:>8.2} ns/point");
    let m = 1_000_000;
    let inside = median(
        (0..samples)
            .map(|_| {
                let t = Instant::now();
                let life = crashpoint::record(|| {
                    for _ in 0..m {
                        crashpoint::point!(black_box("bench"));
                    }
                });
                black_box(life.hits.len());
                t.elapsed()
            })
            .collect(),
    );
    let per_inside = inside.as_secs_f64() * 1e9 / m as f64;
    println!("point inside a recording scope   {per_inside:>8.2} ns/point");
    println!(
        "ratio inside/outside             {:>8.1}x",
        per_inside / per_outside
    );
}

/// The full five-design sweep on memory and disk storage, with 1 and 2
/// threads: median of `samples` (at most 5) runs each, and the ratios.
fn bench_five_designs(samples: usize) -> Result<(), String> {
    println!(
        "\n== the full five-design sweep (3,715 scenarios), median of {} runs",
        samples.min(5)
    );
    let mut results = Vec::new();
    for storage in [Storage::Memory, Storage::Disk] {
        let designs = crate::registry::five_designs(storage)?;
        for threads in [1usize, 2] {
            let config = Config {
                threads: Some(threads),
                ..Config::default()
            };
            let mut times = Vec::new();
            for _ in 0..samples.min(5) {
                let t = Instant::now();
                let mut scenarios = 0;
                for d in &designs {
                    let r = d.run(&config).map_err(|e| e.to_string())?;
                    scenarios += r.scenarios.len();
                }
                times.push(t.elapsed());
                black_box(scenarios);
            }
            let med = median(times);
            println!(
                "{storage:?} storage, {threads} thread(s)      {:>8.3} s",
                med.as_secs_f64()
            );
            results.push(((storage, threads), med));
        }
    }
    let get = |s: Storage, t: usize| {
        results
            .iter()
            .find(|((ss, tt), _)| *ss == s && *tt == t)
            .map_or(f64::NAN, |(_, d)| d.as_secs_f64())
    };
    println!(
        "speed-up 2 threads vs 1          memory {:.2}x, disk {:.2}x",
        get(Storage::Memory, 1) / get(Storage::Memory, 2),
        get(Storage::Disk, 1) / get(Storage::Disk, 2)
    );
    println!(
        "disk / memory (2 threads)        {:.2}x",
        get(Storage::Disk, 2) / get(Storage::Memory, 2)
    );
    Ok(())
}

/// The checkpoint save benchmark (`cargo bench -p durable --bench save`).
fn bench_durable_save() -> Result<(), String> {
    println!("\n== checkpoint save (cargo bench -p durable --bench save)");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["bench", "-q", "-p", "durable", "--bench", "save"])
        .current_dir(crate::root())
        .status()
        .map_err(|e| format!("cannot run cargo bench: {e}"))?;
    if !status.success() {
        return Err(format!("cargo bench -p durable failed: {status}"));
    }
    Ok(())
}

/// The cost of the safety nets on the five-design sweep (memory storage,
/// default threads): the default [`Config`] (the clean run twice and
/// compared, every failing scenario rerun, a watchdog per scenario) against
/// the same sweep with those three off (`clean_runs: 1`, `rerun_failures:
/// false`, `scenario_timeout: None`). The two alternate, so a busy machine
/// slows both alike; the ratio is of the medians. The nets that cost
/// nothing measurable (the scenario estimate, counter checks, the unscoped
/// tally) stay on in both.
fn nets(samples: usize) -> Result<(), String> {
    let designs = crate::registry::five_designs(Storage::Memory)?;
    let on = Config::default();
    let off = Config {
        clean_runs: 1,
        rerun_failures: false,
        scenario_timeout: None,
        ..Config::default()
    };
    println!("== the safety nets on the five-design sweep, median of {samples} runs each");
    let sweep_all = |config: &Config| -> Result<(Duration, usize), String> {
        let t = Instant::now();
        let mut scenarios = 0;
        for d in &designs {
            let r = d.run(config).map_err(|e| e.to_string())?;
            scenarios += r.scenarios.len();
        }
        Ok((t.elapsed(), black_box(scenarios)))
    };
    let (mut with, mut without) = (Vec::new(), Vec::new());
    let mut counts = (0, 0);
    for _ in 0..samples {
        let (t, n) = sweep_all(&on)?;
        with.push(t);
        counts.0 = n;
        let (t, n) = sweep_all(&off)?;
        without.push(t);
        counts.1 = n;
    }
    let (with, without) = (median(with), median(without));
    println!(
        "nets on (default Config)         {:>8.3} s  ({} scenarios)",
        with.as_secs_f64(),
        counts.0
    );
    println!(
        "nets off                         {:>8.3} s  ({} scenarios; 1 clean run, no reruns, no time limit)",
        without.as_secs_f64(),
        counts.1
    );
    println!(
        "ratio on/off                     {:>8.2}x",
        with.as_secs_f64() / without.as_secs_f64()
    );
    Ok(())
}

/// A subject whose life passes one point in this process.
struct OnePoint;

impl sweep::Subject for OnePoint {
    type World = ();
    fn name(&self) -> String {
        "one point".into()
    }
    fn counters(&self) -> Vec<sweep::Counter> {
        vec![sweep::Counter::new("none")]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), sweep::LifeError> {
        crashpoint::point!("one point");
        Ok(())
    }
    fn judge(&self, _: &()) -> sweep::Verdict {
        sweep::Verdict::new().count("none", 0)
    }
}

/// The process benchmark: a life in a child process against one in this
/// process (each a clean "sweep" of depth 0: one world, one life, the
/// judge), and the triage process sweep's scenarios per second.
fn process(samples: usize) -> Result<(), String> {
    use sweep::process::Process;
    println!("== process lives ({samples} samples, median)");
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let child = Process::new(
        "point child",
        [exe.as_os_str(), "point-child".as_ref(), "1".as_ref()],
    )
    .judge_with(|_| Ok(sweep::Verdict::new().count("none", 0)))
    .counters(vec![sweep::Counter::new("none")]);
    let clean = Config {
        depth: 0,
        threads: Some(1),
        clean_runs: 1,
        ..Config::default()
    };
    let lives = 50;
    let time_lives = |s: &dyn sweep::cli::DynSubject| -> Result<Duration, String> {
        let mut times = Vec::new();
        for _ in 0..samples {
            let t = Instant::now();
            for _ in 0..lives {
                black_box(s.run(&clean).map_err(|e| e.to_string())?);
            }
            times.push(t.elapsed() / lives);
        }
        Ok(median(times))
    };
    let in_process = time_lives(&OnePoint)?;
    let in_child = time_lives(&child)?;
    println!(
        "in-process life (world, life, judge)   {:>10.1} µs",
        in_process.as_secs_f64() * 1e6
    );
    println!(
        "process life (fork+exec, one point, exit, a world directory) {:>10.1} µs",
        in_child.as_secs_f64() * 1e6
    );
    println!(
        "ratio process/in-process               {:>10.0}x",
        in_child.as_secs_f64() / in_process.as_secs_f64()
    );
    fork_server(&exe, samples)?;
    bench_triage_process(samples)?;
    bench_power(samples.min(5))
}

/// The triage binary swept as a process at depths 1 and 2.
fn bench_triage_process(samples: usize) -> Result<(), String> {
    println!("\n== the triage process sweep (its own tracker, 2 threads)");
    let triage = crate::process::subject(crate::process::Tracker::Local)?;
    for depth in [1u32, 2] {
        let runs = if depth == 1 { samples.min(3) } else { 1 };
        let mut times = Vec::new();
        let mut n = 0;
        for _ in 0..runs {
            let config = Config {
                depth,
                threads: Some(2),
                ..Config::default()
            };
            let t = Instant::now();
            let report = sweep::run(&triage, &config).map_err(|e| e.to_string())?;
            let stats = report.stats;
            times.push(t.elapsed());
            n = stats.scenarios;
            black_box(report);
        }
        let d = median(times);
        println!(
            "depth {depth}: {n:>5} scenarios in {:>7.2} s (median of {runs}) = {:>6.1} scenarios/s",
            d.as_secs_f64(),
            n as f64 / d.as_secs_f64()
        );
    }
    // Depth 2 with and without restarts from the worlds captured at the
    // hits: the lives each runs, and the time.
    let mut seen = Vec::new();
    for share in [false, true] {
        let (d, r) = timed_sweep(&triage, share)?;
        let procs = r.stats.processes.unwrap_or_default();
        println!(
            "depth 2, {}: {} scenarios in {:>7.2} s, {} lives",
            if share {
                "restarts from captured worlds"
            } else {
                "replayed"
            },
            r.stats.scenarios,
            d.as_secs_f64(),
            procs.lives
        );
        seen.push((d, sweep::table(&r.rows())));
    }
    println!(
        "restarts: {:.2}x faster than replays; same table: {}",
        seen[0].0.as_secs_f64() / seen[1].0.as_secs_f64(),
        seen[0].1 == seen[1].1
    );
    crate::bench_tracer::tracer(samples.min(5))
}

/// The fork server against its floor: the per-life cost of a small Rust
/// binary's depth-2 sweep, exec'd and forked, next to spawning the same
/// binary and waiting for it; then the Python payouts example at depth 2
/// with and without the fork server (its example judge, a Python process
/// per scenario, in both).
fn fork_server(exe: &std::path::Path, samples: usize) -> Result<(), String> {
    println!("\n== the fork server ({samples} samples, median; per life = sweep time / lives)");
    let floor = spawn_floor(exe, samples);
    let mut per_life = Vec::new();
    for fork in [false, true] {
        per_life.push(point_child_life(exe, samples, fork)?);
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "floor: spawn the binary and wait             {:>10.1} µs",
        us(floor)
    );
    for ((d, lives), how) in per_life.iter().zip(["exec'd", "forked"]) {
        println!(
            "a life in a depth-2 sweep, {how} ({lives} lives) {:>10.1} µs = {:>5.2}x the floor",
            us(*d),
            d.as_secs_f64() / floor.as_secs_f64()
        );
    }
    for fork in [false, true] {
        life_breakdown(exe, samples, fork, floor)?;
    }
    fork_server_payouts()
}

/// The floor: the median time to spawn the point child and wait for it.
fn spawn_floor(exe: &std::path::Path, samples: usize) -> Duration {
    use std::process::Stdio;
    let spawns = 20;
    median(
        (0..samples)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..spawns {
                    let _ = black_box(
                        Command::new(exe)
                            .args(["point-child", "0"])
                            .stdin(Stdio::null())
                            .stdout(Stdio::null())
                            .stderr(Stdio::null())
                            .status(),
                    );
                }
                t.elapsed() / spawns
            })
            .collect(),
    )
}

/// Where a life of the point child goes, one part at a time: its world
/// (copied from the template, then removed), the life (spawned or forked,
/// its four points relayed, its exit; less the floor, the protocol and
/// the harness's threads), the judge.
fn life_breakdown(
    exe: &std::path::Path,
    samples: usize,
    fork: bool,
    floor: Duration,
) -> Result<(), String> {
    use sweep::Subject;
    let p = point_child(exe, fork)
        .discover()
        .map_err(|e| e.to_string())?;
    let lives = 20;
    let mut parts = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..samples {
        let mut sums = [Duration::ZERO; 3];
        for _ in 0..lives {
            let t = Instant::now();
            let mut world = p.world().map_err(|e| e.to_string())?;
            sums[0] += t.elapsed();
            let t = Instant::now();
            let life = crashpoint::record(|| p.life(&mut world));
            sums[1] += t.elapsed();
            if !matches!(life.outcome, crashpoint::Outcome::Finished(Ok(()))) {
                return Err(format!("the point child's life: {:?}", life.outcome));
            }
            let t = Instant::now();
            black_box(p.judge(&world));
            sums[2] += t.elapsed();
            let t = Instant::now();
            drop(world);
            sums[0] += t.elapsed();
        }
        for (part, sum) in parts.iter_mut().zip(sums) {
            part.push(sum / lives);
        }
    }
    let [world, life, judge] = parts.map(median);
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!(
        "a life's parts, {}: world (copy + removal) {:>8.1} µs, life {:>8.1} µs \
         (the floor {:>8.1} µs + protocol and relay {:>8.1} µs), judge {:>6.1} µs",
        if fork { "forked" } else { "exec'd" },
        us(world),
        us(life),
        us(floor),
        us(life.saturating_sub(floor)),
        us(judge)
    );
    Ok(())
}

/// The point child passing 4 points, on a RAM disk where there is one,
/// forked from a fork server or not.
fn point_child(exe: &std::path::Path, fork: bool) -> sweep::process::Process {
    use sweep::process::Process;
    let mut p = Process::new(
        "point child",
        [exe.as_os_str(), "point-child".as_ref(), "4".as_ref()],
    )
    .judge_with(|_| Ok(sweep::Verdict::new().count("none", 0)))
    .counters(vec![sweep::Counter::new("none")]);
    if let Some(ram) = sweep::process::ram_disk() {
        p = p.worlds_in(ram);
    }
    if fork {
        p = p.fork_server();
    }
    p
}

/// The median time of a life in a depth-2 sweep of the point child,
/// exec'd or forked, and how many lives a sweep runs.
fn point_child_life(
    exe: &std::path::Path,
    samples: usize,
    fork: bool,
) -> Result<(Duration, u64), String> {
    let p = point_child(exe, fork)
        .discover()
        .map_err(|e| e.to_string())?;
    let config = Config {
        depth: 2,
        threads: Some(1),
        ..Config::default()
    };
    let mut times = Vec::new();
    let mut lives = 0;
    for _ in 0..samples {
        let t = Instant::now();
        let r = sweep::run(&p, &config).map_err(|e| e.to_string())?;
        lives = r.stats.lives;
        times.push(t.elapsed() / u32::try_from(lives.max(1)).unwrap_or(1));
    }
    Ok((median(times), lives))
}

/// The Python payouts example swept exec'd and forked, with the example
/// judge and with the same counts in awk: scenarios per second, and
/// whether both tables agree.
fn fork_server_payouts() -> Result<(), String> {
    let root = crate::root();
    let script = root.join("clients/python/examples/payouts.py");
    let judge = format!(
        "python3 {}",
        root.join("clients/examples/judge.py").display()
    );
    // The example's template world: empty.
    let world = std::env::temp_dir().join(format!("crashsweep-bench-{}", std::process::id()));
    std::fs::create_dir_all(&world).map_err(|e| format!("{}: {e}", world.display()))?;
    // The example judge is a Python process per scenario; the same counts
    // in awk show what the lives cost without it.
    let awk = "cat ledger.txt 2>/dev/null | awk '{n[$1]++} END {d=0; m=0; \
               split(\"alice bob carol\",p,\" \"); for (i in p) { if (n[p[i]]==0) m++; \
               else d+=n[p[i]]-1 }; printf \"{\\\"duplicates\\\": %d, \\\"missing\\\": %d}\\n\", d, m}'";
    for (judge, which) in [(judge.as_str(), "judge.py"), (awk, "awk judge")] {
        let mut rates = Vec::new();
        let mut tables = Vec::new();
        // Exec'd and replayed (neither change), exec'd with restarts from
        // captured worlds, forked with them.
        for (fork, share) in [(false, false), (false, true), (true, true)] {
            let (rate, table) = payouts_sweep(&script, &world, judge, which, fork, share)?;
            rates.push(rate);
            tables.push(table);
        }
        println!(
            "python payouts, {which}: restarts sweep {:.1}x the scenarios per second of replays, and with the fork server {:.1}x; same table: {}",
            rates[1] / rates[0],
            rates[2] / rates[0],
            tables[0] == tables[1] && tables[1] == tables[2]
        );
    }
    let _ = std::fs::remove_dir(&world);
    Ok(())
}

/// A depth-2 sweep of `subject` on 2 threads, with restarts from captured
/// worlds (`share`) or every scenario replayed: its time and its report.
fn timed_sweep<S: sweep::Subject>(
    subject: &S,
    share: bool,
) -> Result<(Duration, sweep::Report), String> {
    let config = Config {
        depth: 2,
        threads: Some(2),
        share,
        ..Config::default()
    };
    let t = Instant::now();
    let r = sweep::run(subject, &config).map_err(|e| e.to_string())?;
    Ok((t.elapsed(), r))
}

/// One depth-2 sweep of the payouts example, its line printed: its
/// scenarios per second and its table.
fn payouts_sweep(
    script: &std::path::Path,
    world: &std::path::Path,
    judge: &str,
    which: &str,
    fork: bool,
    share: bool,
) -> Result<(f64, String), String> {
    use sweep::process::Process;
    let mut p = Process::new("payouts.py", ["python3".as_ref(), script.as_os_str()])
        .world_from(world)
        .judge_command(judge);
    if let Some(ram) = sweep::process::ram_disk() {
        p = p.worlds_in(ram);
    }
    if fork {
        p = p.fork_server();
    }
    let p = p.discover().map_err(|e| e.to_string())?;
    let (d, r) = timed_sweep(&p, share)?;
    let n = r.stats.scenarios;
    let procs = r.stats.processes.unwrap_or_default();
    let rate = n as f64 / d.as_secs_f64();
    println!(
        "python payouts, depth 2, {which}, {}{}: {n} scenarios in {:>7.2} s = {rate:>6.2} scenarios/s; {} processes ({} lives, {} forked, {} judges, {} forked)",
        if fork { "fork server" } else { "exec'd" },
        if share { "" } else { ", replayed (no restarts)" },
        d.as_secs_f64(),
        procs.total(),
        procs.lives,
        procs.forked,
        procs.judges,
        procs.forked_judges
    );
    Ok((rate, sweep::table(&r.rows())))
}

/// The LangGraph example agent's two sweeps of the fork-server targets,
/// each forked then exec'd in one run: `agent_points.py` (about 20 hits
/// around `SqliteSaver` and its tool) at depth 2 with named points, and
/// `agent.py` unchanged at depth 1 with every I/O point; both the fixed
/// agent in `sync` durability, whose hits do not depend on an async
/// writer's race, so the two tables and scenario lists must agree. Then
/// the buggy `agent_points.py` forked in LangGraph's default (`async`)
/// durability, whose hits and flaky count vary from run to run.
/// It needs the example's virtualenv, named by
/// `CRASHSWEEP_LANGGRAPH_PYTHON`; without it the rows say they are
/// skipped. The tracker and the judge run with the same Python: a
/// `python3` behind a version manager's shim (pyenv) costs a few hundred
/// milliseconds more per process, twice a scenario.
fn langgraph_sweeps() -> Result<(), String> {
    println!("\n== the LangGraph agent (clients/examples/langgraph, 2 threads)");
    let Some(python) = std::env::var_os("CRASHSWEEP_LANGGRAPH_PYTHON") else {
        println!(
            "skipped: CRASHSWEEP_LANGGRAPH_PYTHON is not set (a virtualenv's python with \
             clients/examples/langgraph/requirements.txt, as docs/sweep-an-unchanged-program.md says)"
        );
        return Ok(());
    };
    for sweep in [Lg::NamedDepth2, Lg::IoDepth1] {
        let forked = langgraph_sweep(&python, sweep, true, true)?;
        let exec = langgraph_sweep(&python, sweep, true, false)?;
        println!(
            "langgraph {}: the fork server sweeps {:.1}x faster; same table and scenarios: {}",
            sweep.shown(),
            exec.0.as_secs_f64() / forked.0.as_secs_f64(),
            forked.1 == exec.1
        );
        if forked.1 != exec.1 {
            println!("forked:\n{}\nexec'd:\n{}", forked.1, exec.1);
        }
    }
    langgraph_sweep(&python, Lg::NamedDepth2, false, true)?;
    Ok(())
}

/// The LangGraph agent's sweeps of the fork-server targets.
#[derive(Clone, Copy)]
enum Lg {
    /// `agent_points.py`, depth 2, named points.
    NamedDepth2,
    /// `agent.py` unchanged, depth 1, every I/O point.
    IoDepth1,
}

impl Lg {
    fn shown(self) -> &'static str {
        match self {
            Lg::NamedDepth2 => "agent_points.py, depth 2, named points",
            Lg::IoDepth1 => "agent.py, depth 1, --io-points",
        }
    }
}

/// One sweep of the LangGraph agent with `python`, the fixed agent or the
/// buggy one, forked or exec'd, its line printed: its time (discovery and
/// the fork server's check included), then its table and scenario list.
fn langgraph_sweep(
    python: &std::ffi::OsStr,
    which: Lg,
    fixed: bool,
    fork: bool,
) -> Result<(Duration, String), String> {
    use sweep::process::{IoPoints, Process};
    let dir = crate::root().join("clients/examples/langgraph");
    let judge = format!(
        "'{}' '{}'",
        python.to_string_lossy(),
        dir.join("judge.py").display()
    );
    let (script, depth) = match which {
        Lg::NamedDepth2 => ("agent_points.py", 2),
        Lg::IoDepth1 => ("agent.py", 1),
    };
    let mut argv = vec![python.to_owned(), dir.join(script).into_os_string()];
    if fixed {
        argv.extend(["--fixed".into(), "--durability".into(), "sync".into()]);
    }
    let mut p = Process::new(script, argv)
        .world_from(dir.join("world"))
        .service([python, dir.join("tracker.py").as_os_str()])
        .judge_command(&judge);
    if let Some(ram) = sweep::process::ram_disk() {
        p = p.worlds_in(ram);
    }
    if let Lg::IoDepth1 = which {
        p = p.io_points(IoPoints::all());
    }
    if fork {
        p = p.fork_server();
    }
    let t = Instant::now();
    let p = p.discover().map_err(|e| e.to_string())?;
    let config = Config {
        depth,
        threads: Some(2),
        ..Config::default()
    };
    let r = sweep::run(&p, &config).map_err(|e| e.to_string())?;
    let d = t.elapsed();
    print_langgraph_sweep(which, fixed, fork, d, &r);
    let scenarios: Vec<String> = (r.scenarios.iter())
        .map(|s| format!("{} {}", s.scenario, s.failed()))
        .collect();
    Ok((
        d,
        format!("{}{}\n", sweep::table(&r.rows()), scenarios.join("\n")),
    ))
}

/// One LangGraph sweep's line: its time, its verdicts, its processes.
fn print_langgraph_sweep(which: Lg, fixed: bool, fork: bool, d: Duration, r: &sweep::Report) {
    let n = r.stats.scenarios;
    let procs = r.stats.processes.unwrap_or_default();
    println!(
        "langgraph {}{}, {}: {n} scenarios in {:>7.1} s = {:>5.2} scenarios/s; \
         {} failed, {} flaky, {} not fired; {} processes ({} lives, {} forked, {} judges, \
         {} forked, {} services)",
        which.shown(),
        if fixed {
            ", fixed, sync"
        } else {
            ", buggy, async"
        },
        if fork { "fork server" } else { "exec'd" },
        d.as_secs_f64(),
        n as f64 / d.as_secs_f64(),
        r.scenarios.iter().filter(|s| s.failed()).count(),
        r.flaky().count(),
        r.scenarios.iter().filter(|s| s.unfired()).count(),
        procs.total(),
        procs.lives,
        procs.forked,
        procs.judges,
        procs.forked_judges,
        procs.services
    );
}

/// `cargo xtask bench --process`, the power cuts' part: the disk record's
/// cost on a program making 10,000 writes in its world (traced with and
/// without the record), and the crash states per second a power-cut sweep
/// rebuilds and judges (every disk of `dd` making 16 block writes, against
/// the same sweep in the process state).
fn bench_power(samples: usize) -> Result<(), String> {
    use sweep::process::{IoPoints, Process};
    let writes = 10_000u32;
    let dd = power_dd;
    let opens = || IoPoints::all().ops(["open"]).map_err(|e| e.to_string());
    let clean = Config {
        depth: 0,
        threads: Some(1),
        clean_runs: 1,
        ..Config::default()
    };
    let time = |p: &Process| -> Result<Duration, String> {
        let mut times = Vec::new();
        for _ in 0..samples {
            let t = Instant::now();
            black_box(sweep::run(p, &clean).map_err(|e| e.to_string())?);
            times.push(t.elapsed());
        }
        Ok(median(times))
    };
    println!("\n== power cuts ({samples} samples, median; `dd bs=1` making {writes} writes in the world)");
    let traced = dd(writes, 1)
        .io_points(opens()?)
        .discover()
        .map_err(|e| e.to_string())?;
    let recorded = dd(writes, 1)
        .io_points(opens()?)
        .crash_states(["lose"])
        .map_err(|e| e.to_string())?
        .discover()
        .map_err(|e| e.to_string())?;
    let (t, r) = (time(&traced)?, time(&recorded)?);
    println!(
        "traced, no record      {:>8.3} s\ntraced and recorded    {:>8.3} s = {:>6.1} µs a write recorded, {:>5.2}x traced",
        t.as_secs_f64(),
        r.as_secs_f64(),
        (r.as_secs_f64() - t.as_secs_f64()) * 1e6 / f64::from(writes),
        r.as_secs_f64() / t.as_secs_f64()
    );
    bench_power_states()
}

/// `dd` writing `count` blocks of `bs` bytes to `out` in its world,
/// judged by nothing (one counter, always 0).
fn power_dd(count: u32, bs: u32) -> sweep::process::Process {
    let none = |_: &sweep::process::ProcessWorld| Ok(sweep::Verdict::new().count("none", 0));
    let (count, bs) = (format!("count={count}"), format!("bs={bs}"));
    sweep::process::Process::new(
        "dd",
        ["dd", "if=/dev/zero", "of=out", bs.as_str(), count.as_str()],
    )
    .judge_with(none)
    .counters(vec![sweep::Counter::new("none")])
}

/// Crash states per second, rebuilt and judged: `dd` making 16 block
/// writes, a crash before each, in three states.
fn bench_power_states() -> Result<(), String> {
    use sweep::process::IoPoints;
    let dd = power_dd;
    println!("\n== crash states rebuilt and judged (`dd bs=512 count=16`, a crash before each write, the restart `true`, depth 1, 2 threads)");
    for state in ["process", "lose", "enumerated"] {
        let p = dd(16, 512)
            .restart(["true"])
            .io_points(IoPoints::all().ops(["write"]).map_err(|e| e.to_string())?)
            .crash_states([state])
            .map_err(|e| e.to_string())?
            .discover()
            .map_err(|e| e.to_string())?;
        let config = Config {
            depth: 1,
            threads: Some(2),
            ..Config::default()
        };
        let t = Instant::now();
        let r = sweep::run(&p, &config).map_err(|e| e.to_string())?;
        let d = t.elapsed();
        println!(
            "{state:<10} {:>5} scenarios in {:>6.2} s = {:>6.1} crash states/s",
            r.stats.scenarios,
            d.as_secs_f64(),
            r.stats.scenarios as f64 / d.as_secs_f64()
        );
    }
    Ok(())
}
