//! The real loop under power loss (the `agent` loop): the
//! checkpoint directory and the workspace lose what was not synced when a
//! life dies, in each of the six crash states. The real writer (temp file,
//! fsync, rename, fsync the directory) must come through every scenario with
//! no duplicate, nothing missing, no lost save and no unreadable checkpoint;
//! a writer without the directory fsync (and one without the file fsync)
//! must be caught, with the failing scenario named. Compared with the
//! reviewed output in `snapshots/loop-power.txt`.

use std::path::PathBuf;

use durable::testing::DiskState;
use loop_sweep::{LoopSubject, LoopVariant, Writer};
use sweep::{report::Row, scenario::Scenario, Config, Report};

fn snapshot() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../snapshots/loop-power.txt")
}

fn cell(row: &Row, title: &str) -> u64 {
    row.cell(title)
        .unwrap_or_else(|| panic!("no column {title} in {row:?}"))
}

/// Every crash state, as the sweep names them.
fn all_states() -> Vec<sweep::power::CrashState> {
    DiskState::ALL
        .into_iter()
        .map(sweep::power::CrashState::from)
        .collect()
}

/// One sweep per variant family (keyed, keyless) whose checkpoint is written
/// by `writer`, over every crash state: the runner boots and cuts the
/// power-loss directories in each scenario's state.
fn sweep_all(writer: Writer, depth: u32) -> Vec<(LoopSubject, Report)> {
    let config = Config {
        depth,
        crash_states: all_states(),
        ..Config::default()
    };
    loop_sweep::power_subjects(writer, None)
        .expect("the loop's sweep job loads")
        .into_iter()
        .filter(|s| {
            s.variant()
                .power
                .is_some_and(|p| p.state == DiskState::Process)
        })
        .map(|s| {
            let r = sweep::run(&s, &config).expect("sweep runs");
            (s, r)
        })
        .collect()
}

/// The variant `s` with crash state `state`.
fn in_state(s: &LoopSubject, state: DiskState) -> LoopVariant {
    let mut v = s.variant();
    if let Some(p) = &mut v.power {
        p.state = state;
    }
    v
}

/// `failing/total` per crash state, one line per variant family, and the
/// first failing scenario of each failing state with its rerun command.
fn mutation_section(writer: Writer, runs: &[(LoopSubject, Report)]) -> String {
    let mut out = format!("### {}\n\n", writer.title());
    let mut header = format!("{:<24}", "failing / scenarios");
    for s in DiskState::ALL {
        header.push_str(&format!("{:>12}", s.slug()));
    }
    out.push_str(header.trim_end());
    out.push('\n');
    for keyed in [true, false] {
        let mut line = format!("{:<24}", if keyed { "loop keyed" } else { "loop keyless" });
        for state in all_states() {
            let cell = runs
                .iter()
                .find(|(s, _)| s.variant().keyed == keyed)
                .map_or_else(
                    || "-".to_owned(),
                    |(_, r)| {
                        let failed = r.in_state(&state).filter(|s| s.failed()).count();
                        format!("{failed}/{}", r.in_state(&state).count())
                    },
                );
            line.push_str(&format!("{cell:>12}"));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out.push('\n');
    for (s, r) in runs {
        for state in DiskState::ALL {
            let st = sweep::power::CrashState::from(state);
            let mut failing = r.in_state(&st).filter(|s| s.failed());
            let Some(first) = failing.next() else {
                continue;
            };
            let v = in_state(s, state);
            out.push_str(&format!(
                "{}: {} failing; first: {} ({})\n    rerun: cargo xtask sweep {} --scenario \"{}\"\n",
                v.title(),
                1 + failing.count(),
                first.scenario,
                first.failure.as_ref().map(sweep::report::Failure::cause).unwrap_or_default(),
                v.command_args(),
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
            .chain(report.flaky())
            .take(5)
            .map(|s| {
                format!(
                    "{}: {}",
                    s.scenario,
                    s.failure
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                )
            })
            .collect();
        assert!(failed.is_empty(), "{}: {failed:#?}", v.title());
        for state in all_states() {
            assert!(
                report.in_state(&state).count() > 100,
                "{} {state}",
                v.title()
            );
        }
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
        for row in report.rows() {
            assert_eq!(cell(&row, "with dups"), 0);
            if !v.keyed {
                assert!(
                    cell(&row, "asks") > 0,
                    "{}: a keyless loop asks",
                    row.variant
                );
            }
        }
    }

    let mut mutations = Vec::new();
    for writer in [Writer::NoDirSync, Writer::NoFileSync] {
        let runs = sweep_all(writer, 1);
        for (s, r) in &runs {
            // A panic keeps the page cache: no sweep of process crashes can
            // see a dropped fsync.
            let process = r.in_state(&sweep::power::CrashState::PROCESS);
            assert_eq!(
                process.filter(|s| s.failed()).count(),
                0,
                "{}",
                s.variant().title()
            );
            assert_eq!(r.flaky().count(), 0, "{}", s.variant().title());
        }
        assert!(
            runs.iter()
                .any(|(s, r)| s.variant().keyed && r.failures().next().is_some()),
            "{}: no power cut caught it in the keyed loop",
            writer.title()
        );
        // Each named failing scenario fails again when rerun by its name
        // alone: the name carries the crash state.
        for (s, r) in &runs {
            for state in all_states() {
                let Some(first) = r.in_state(&state).find(|s| s.failed()) else {
                    continue;
                };
                let name = first.scenario.to_string();
                let parsed: Scenario = name.parse().expect("a scenario name");
                assert_eq!(parsed.state, state);
                let again = sweep::rerun(s, &sweep::Config::default(), &name).unwrap();
                assert!(
                    again.failed(),
                    "{} / {}: passes when rerun alone",
                    s.variant().title(),
                    first.scenario
                );
            }
        }
        mutations.push((writer, runs));
    }

    let rows: Vec<Row> = real.iter().flat_map(|(_, r)| r.rows()).collect();
    let mut out = String::from(
        "# The real agent loop under power loss: reviewed output of \
         crates/loop-sweep/tests/it/loop_power.rs; real writer at depth 2, mutations at depth 1\n\n",
    );
    out.push_str("Crash states (what a power cut keeps of the operations not yet synced):\n");
    for s in DiskState::ALL {
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
    let lose_index = DiskState::ALL
        .iter()
        .position(|s| *s == DiskState::LoseUnsynced)
        .expect("lose is a crash state");
    let lose: Vec<Row> = mutations
        .iter()
        .flat_map(|(_, runs)| runs)
        .filter_map(|(_, r)| r.rows().into_iter().nth(lose_index))
        .collect();
    out.push_str(&sweep::table(&lose));
    let out = out.trim_end().to_owned() + "\n";
    print!("{out}");
    if let Err(diff) = sweep::report::snapshot::check(&snapshot(), &out) {
        panic!("{diff}");
    }
}
