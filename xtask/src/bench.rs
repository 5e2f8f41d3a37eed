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
}

/// `cargo xtask` builds in the dev profile, shared with `cargo test`;
/// timings are taken from a release build, the one the README quotes.
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
    use loop_sweep::disk;
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
    if cfg!(debug_assertions) {
        return in_release(args);
    }
    let samples = if args.quick { 5 } else { 11 };
    if args.nets {
        return nets(samples);
    }
    if args.disk {
        return disk(samples.min(5));
    }

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
                    let r = d.sweep(&config, &|_| {}).map_err(|e| e.to_string())?;
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

    if !args.no_durable {
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
            let r = d.sweep(config, &|_| {}).map_err(|e| e.to_string())?;
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
