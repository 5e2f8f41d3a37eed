//! The real loop under power loss (issue 7 §1 on the `agent` loop): the
//! checkpoint directory and the workspace lose what was not synced when a
//! life dies, in each of the six crash states. The real writer (temp file,
//! fsync, rename, fsync the directory) must come through every scenario with
//! no duplicate, nothing missing, no lost save and no unreadable checkpoint;
//! a writer without the directory fsync (and one without the file fsync)
//! must be caught, with the failing scenario named. Compared with the
//! reviewed output in `snapshots/loop-power.txt`.

use std::path::PathBuf;

use durable::testing::CrashState;
use loop_sweep::{LoopSubject, Writer};
use sweep::{Config, Report, Row, Scenario};

fn snapshot() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/loop-power.txt")
}

fn cell(row: &Row, title: &str) -> u64 {
    row.cell(title)
        .unwrap_or_else(|| panic!("no column {title} in {row:?}"))
}

fn state_of(s: &LoopSubject) -> CrashState {
    s.variant().power.expect("a power-loss variant").state
}

fn sweep_all(writer: Writer, depth: u32) -> Vec<(LoopSubject, Report)> {
    let config = Config {
        depth,
        ..Config::default()
    };
    loop_sweep::power_subjects(writer, None)
        .expect("the loop's sweep job loads")
        .into_iter()
        .map(|s| {
            let r = sweep::run(&s, &config).expect("sweep runs");
            (s, r)
        })
        .collect()
}

/// A failure message cut to its cause: `final life 2: stopped with an
/// error: truncated checkpoint …` becomes `truncated checkpoint …`, and
/// `lost saves = 1; …notes` becomes `lost saves = 1`.
fn short_reason(failure: &str) -> &str {
    let cause = failure
        .split_once("stopped with an error: ")
        .map_or(failure, |(_, rest)| rest);
    let cause = cause.split(';').next().unwrap_or(cause);
    cause.split(" power:/").next().unwrap_or(cause).trim()
}

/// `failing/total` per crash state, one line per variant family, and the
/// first failing scenario of each failing sweep with its rerun command.
fn mutation_section(writer: Writer, runs: &[(LoopSubject, Report)]) -> String {
    let mut out = format!("### {}\n\n", writer.title());
    let mut header = format!("{:<24}", "failing / scenarios");
    for s in CrashState::ALL {
        header.push_str(&format!("{:>12}", s.slug()));
    }
    out.push_str(header.trim_end());
    out.push('\n');
    for keyed in [true, false] {
        let mut line = format!("{:<24}", if keyed { "loop keyed" } else { "loop keyless" });
        for state in CrashState::ALL {
            let cell = runs
                .iter()
                .find(|(s, _)| s.variant().keyed == keyed && state_of(s) == state)
                .map_or_else(
                    || "-".to_owned(),
                    |(_, r)| format!("{}/{}", r.failures().count(), r.scenarios.len()),
                );
            line.push_str(&format!("{cell:>12}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push('\n');
    for (s, r) in runs {
        if let Some(first) = r.failures().next() {
            out.push_str(&format!(
                "{}: {} failing; first: {} ({})\n    rerun: cargo xtask sweep --variant {} --scenario \"{}\"\n",
                s.variant().title(),
                r.failures().count(),
                first.scenario,
                short_reason(first.failure.as_deref().unwrap_or("")),
                s.variant().slug(),
                first.scenario
            ));
        }
    }
    out
}

#[test]
fn the_real_writer_comes_through_every_power_cut_and_dropped_fsyncs_are_caught() {
    // Depth 2 (every single crash, and every crash of each restart) for the
    // real writer; the mutations at depth 1, where they already fail.
    let real = sweep_all(Writer::Real, 2);
    for (subject, report) in &real {
        let v = subject.variant();
        let failed: Vec<String> = report
            .failures()
            .take(5)
            .map(|s| format!("{}: {}", s.scenario, s.failure.as_deref().unwrap_or("")))
            .collect();
        assert!(failed.is_empty(), "{}: {failed:#?}", v.title());
        assert!(report.scenarios.len() > 100, "{}", v.title());
        for s in &report.scenarios {
            for counter in ["dups", "missing", "lost saves", "stopped"] {
                assert_eq!(
                    report.value(s, counter),
                    0,
                    "{}: {} {counter}",
                    v.title(),
                    s.scenario
                );
            }
            if v.keyed {
                assert_eq!(report.value(s, "asks"), 0, "{}: {}", v.title(), s.scenario);
            }
        }
        let row = report.row();
        assert_eq!(cell(&row, "with dups"), 0);
        if !v.keyed {
            assert!(cell(&row, "asks") > 0, "{}: a keyless loop asks", v.title());
        }
    }

    let mut mutations = Vec::new();
    for writer in [Writer::NoDirSync, Writer::NoFileSync] {
        let runs = sweep_all(writer, 1);
        for (s, r) in &runs {
            // A panic keeps the page cache: no sweep of process crashes can
            // see a dropped fsync.
            if state_of(s) == CrashState::Process {
                assert_eq!(r.failures().count(), 0, "{}", s.variant().title());
            }
        }
        let caught: Vec<&(LoopSubject, Report)> = runs
            .iter()
            .filter(|(_, r)| r.failures().next().is_some())
            .collect();
        assert!(
            caught.iter().any(|(s, _)| s.variant().keyed),
            "{}: no power cut caught it in the keyed loop",
            writer.title()
        );
        // Each named failing scenario fails again when rerun by its name.
        for (s, r) in &caught {
            let first = r.failures().next().expect("a failing scenario");
            let name: Scenario = first.scenario.to_string().parse().expect("a scenario name");
            let again = sweep::run_one(s, &name);
            assert!(
                again.failure.is_some(),
                "{} / {}: passes when rerun alone",
                s.variant().title(),
                first.scenario
            );
        }
        mutations.push((writer, runs));
    }

    let rows: Vec<Row> = real.iter().map(|(_, r)| r.row()).collect();
    // The header names the file's old place (crates/agent): the reviewed
    // snapshot stays byte-identical until its owner updates it.
    let mut out = String::from(
        "# The real loop under power loss (issue 7 §1 on crates/agent): reviewed output of \
         crates/agent/tests/loop_power.rs; real writer at depth 2, mutations at depth 1\n\n",
    );
    out.push_str("Crash states (what a power cut keeps of the operations not yet synced):\n");
    for s in CrashState::ALL {
        out.push_str(&format!("  {:<9} {}\n", s.slug(), s.title()));
    }
    out.push_str(
        "The checkpoint directory and the workspace are both cut; saves and patches are fsynced.\n\
         lost saves: restarts that resumed from an older checkpoint than the last save that returned;\n\
         stopped: runs that ended on an error (an unreadable checkpoint).\n\n",
    );
    out.push_str("## The real writer\n\n");
    out.push_str(&sweep::table(&rows));
    out.push_str("\n## Mutations: failing scenarios per crash state\n\n");
    for (writer, runs) in &mutations {
        out.push_str(&mutation_section(*writer, runs));
        out.push('\n');
    }
    out.push_str("### Both mutations when nothing unsynced survives (`lose`), in full\n\n");
    let lose: Vec<Row> = mutations
        .iter()
        .flat_map(|(_, runs)| runs)
        .filter(|(s, _)| state_of(s) == CrashState::LoseUnsynced)
        .map(|(_, r)| r.row())
        .collect();
    out.push_str(&sweep::table(&lose));
    let out = out.trim_end().to_owned() + "\n";
    print!("{out}");
    if let Err(diff) = sweep::snapshot::check(&snapshot(), &out) {
        panic!("{diff}");
    }
}
