//! `cargo xtask bench --process`, the tracer's part: the cost of one stop,
//! a program making 10,000 writes traced and untraced, and the scenarios
//! per second of the payouts example with I/O points against named points,
//! and with I/O points forked from the fork server against exec'd.

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

/// A depth-1 sweep of `p`: its scenarios, their rate, its table.
fn scenarios_per_second(p: &Process) -> Result<(u64, f64, String), String> {
    let config = Config {
        depth: 1,
        threads: Some(2),
        ..Config::default()
    };
    let t = Instant::now();
    let r = sweep::run(p, &config).map_err(|e| e.to_string())?;
    let n = r.stats.scenarios;
    Ok((
        n,
        n as f64 / t.elapsed().as_secs_f64(),
        sweep::table(&r.rows()),
    ))
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
    let both = || {
        Process::new(
            "payouts.py (named + I/O points)",
            python(root.join("clients/python/examples/payouts.py")),
        )
        .io_points(IoPoints::all())
    };
    let (exec, forked) = (both(), both().fork_server());
    println!("\n== the Python payouts example, depth 1, 2 threads, the judge in Rust");
    let mut rates = Vec::new();
    let mut tables = Vec::new();
    for (p, how) in [(named, ""), (io, ""), (exec, ""), (forked, ", forked")] {
        let p = p
            .judge_with(judge)
            .counters(vec![Counter::new("duplicates"), Counter::new("missing")])
            .discover()
            .map_err(|e| e.to_string())?;
        let (n, rate, table) = scenarios_per_second(&p)?;
        let name = format!("{}{how}", sweep::Subject::name(&p));
        println!("{name:<40} {n:>4} scenarios, {rate:>6.1} scenarios/s");
        rates.push(rate);
        tables.push(table);
    }
    println!(
        "I/O points against named points: {:.2}x the scenarios per second",
        rates[1] / rates[0]
    );
    println!(
        "I/O points, the fork server against exec'd: {:.2}x the scenarios per second; same table: {}",
        rates[3] / rates[2],
        tables[2] == tables[3]
    );
    Ok(())
}
