//! `cargo xtask bench --process`, the tracer's part: the cost of one stop,
//! a program making 10,000 writes traced and untraced, and the scenarios
//! per second of the payouts example with I/O points against named points.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sweep::process::{IoPoints, Process, ProcessWorld};
use sweep::{Config, Counter, Verdict};

const WRITES: u32 = 10_000;

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// The median time of `samples` clean runs (one life, no judge) of `p`.
fn clean_run(p: &Process, samples: usize) -> Result<Duration, String> {
    let mut times = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        p.list_points().map_err(|e| e.to_string())?;
        times.push(t.elapsed());
    }
    Ok(median(times))
}

fn dd(of: &str) -> Process {
    let count = format!("count={WRITES}");
    Process::new("dd", ["dd", "if=/dev/zero", of, "bs=1", count.as_str()])
}

/// Duplicates and missing payees in the ledger (clients/examples/judge.py).
fn judge(world: &ProcessWorld) -> Result<Verdict, String> {
    let ledger = std::fs::read_to_string(world.dir().join("ledger.txt")).unwrap_or_default();
    let (mut dups, mut missing) = (0, 0);
    for payee in ["alice", "bob", "carol"] {
        let n = ledger
            .lines()
            .filter(|l| l.split(' ').next() == Some(payee))
            .count() as u64;
        dups += n.saturating_sub(1);
        missing += u64::from(n == 0);
    }
    Ok(Verdict::new()
        .count("duplicates", dups)
        .count("missing", missing))
}

fn scenarios_per_second(p: &Process) -> Result<(u64, f64), String> {
    let config = Config {
        depth: 1,
        threads: Some(2),
        ..Config::default()
    };
    let t = Instant::now();
    let r = sweep::run(p, &config).map_err(|e| e.to_string())?;
    let n = r.stats.scenarios;
    Ok((n, n as f64 / t.elapsed().as_secs_f64()))
}

pub fn tracer(samples: usize) -> Result<(), String> {
    println!("\n== the tracer ({samples} samples, median; `dd bs=1` making {WRITES} writes)");
    let untraced = clean_run(&dd("of=/dev/null"), samples)?;
    let stops = clean_run(&dd("of=/dev/null").io_points(IoPoints::all()), samples)?;
    let hits = clean_run(&dd("of=out").io_points(IoPoints::all()), samples)?;
    let per = |d: Duration| (d.as_secs_f64() - untraced.as_secs_f64()) * 1e6 / f64::from(WRITES);
    let times = |d: Duration| d.as_secs_f64() / untraced.as_secs_f64();
    println!(
        "untraced (a clean run: world, spawn, exit) {:>8.3} s",
        untraced.as_secs_f64()
    );
    println!(
        "traced, writes to /dev/null (no points)    {:>8.3} s = {:>6.1} µs a stop, {:>5.1}x untraced",
        stops.as_secs_f64(),
        per(stops),
        times(stops)
    );
    println!(
        "traced, writes in the world (each a hit)   {:>8.3} s = {:>6.1} µs a hit,  {:>5.1}x untraced",
        hits.as_secs_f64(),
        per(hits),
        times(hits)
    );

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = |p: PathBuf| vec!["python3".to_owned(), p.to_string_lossy().into_owned()];
    let named = Process::new(
        "payouts.py (named points)",
        python(root.join("clients/python/examples/payouts.py")),
    );
    let io = Process::new(
        "payouts.py (I/O points, unchanged)",
        python(root.join("clients/examples/unchanged/payouts.py")),
    )
    .io_points(IoPoints::all());
    println!("\n== the Python payouts example, depth 1, 2 threads, the judge in Rust");
    let mut rates = Vec::new();
    for p in [named, io] {
        let p = p
            .judge_with(judge)
            .counters(vec![Counter::new("duplicates"), Counter::new("missing")])
            .discover()
            .map_err(|e| e.to_string())?;
        let (n, rate) = scenarios_per_second(&p)?;
        println!(
            "{:<36} {n:>4} scenarios, {rate:>6.1} scenarios/s",
            sweep::Subject::name(&p)
        );
        rates.push(rate);
    }
    println!(
        "I/O points against named points: {:.2}x the scenarios per second",
        rates[1] / rates[0]
    );
    Ok(())
}
