//! The disk as an adversary, in one table (`snapshots/disk.txt`): for the
//! keyed design (keys and markers, `designs`) and the real loop, keyed,
//! each in a power-loss world —
//!
//! * the enumerated crash states (`enumerated`): every disk the persistence
//!   model allows at each crash, a scenario each; the real writer to depth
//!   2, the four mutants (no file fsync, no directory fsync, overwrite in
//!   place, remove first) to depth 1, with how many crashes, the disks per
//!   crash (max, median), the crashes whose disks were a sample, the
//!   failing scenarios and the first one's name;
//! * the I/O errors: each call a clean run makes through the checkpoint
//!   directory fails once (depth 1), at depth 2 the restart's next call of
//!   the same kind fails again, then the disk heals, with or without a
//!   power cut before the healthy life; how many lives stopped with an
//!   error naming the file, how many faults the program absorbed, and how
//!   many scenarios broke (something lost or doubled, an error not naming
//!   the file, or no healthy finish).
//!
//! Every number comes from running the scenarios. It lives in xtask, the
//! one crate that depends on both `designs` and `loop-sweep`; `cargo xtask
//! sweep --disk` prints and checks it, `cargo xtask bench --disk` times it,
//! and its unit test `the_disk_table_matches_its_reviewed_snapshot` checks
//! it in `cargo test --workspace`.

use std::sync::Arc;

use designs::{Design, DesignSubject, Modes, Script, Storage};
use durable::testing::{DiskState, FaultDir, Power, Writer};
use durable::Dir;
use loop_sweep::{LoopSubject, LoopWorld, ENUMERATED};
use sweep::power::faults::fault_run;
use sweep::report::Table;
use sweep::{power::CrashDisks, Config, Report, Subject};

/// Why the table could not be made.
pub type DiskError = String;

/// The keyed design (keys and markers) in a power-loss world whose
/// checkpoints `writer` writes.
pub fn design(writer: Writer, script: &Script) -> DesignSubject {
    Design::KeysMarkers
        .subject(script, Storage::Memory)
        .with_modes(Modes {
            power: Some(Power {
                writer,
                state: DiskState::LoseUnsynced,
            }),
            ..Modes::default()
        })
}

/// The real loop, keyed, in a power-loss world whose checkpoints `writer`
/// writes.
pub fn looped(writer: Writer) -> Result<LoopSubject, DiskError> {
    LoopSubject::keyed_power_loss(writer).map_err(|e| e.to_string())
}

/// `s` swept to `depth` in the enumerated state alone.
pub fn enumerated<S: Subject>(s: &S, depth: u32) -> Result<Report, DiskError> {
    let config = Config {
        depth,
        crash_states: vec![ENUMERATED],
        ..Config::default()
    };
    sweep::run(s, &config).map_err(|e| e.to_string())
}

fn enum_row<S: Subject>(
    table: &mut Table,
    s: &S,
    writer: &str,
    depth: u32,
) -> Result<(), DiskError> {
    let r = enumerated(s, depth)?;
    let c = CrashDisks::of(&r, &ENUMERATED);
    let sampled = r
        .scenarios
        .iter()
        .filter(|s| {
            s.verdict
                .notes
                .iter()
                .any(|n| n.contains("sample of their disks"))
        })
        .count();
    let failing = r.failures().count();
    let first = r
        .failures()
        .next()
        .map_or_else(|| "-".to_owned(), |f| f.scenario.to_string());
    let counts = [
        depth as usize,
        c.scenarios,
        c.crashes,
        c.max,
        c.median,
        sampled,
        failing,
    ];
    table.row(
        [
            Subject::name(s)
                .split(" | ")
                .next()
                .unwrap_or_default()
                .to_owned(),
            writer.to_owned(),
        ]
        .into_iter()
        .chain(counts.iter().map(ToString::to_string))
        .chain([first]),
    );
    Ok(())
}

fn fault_rows<S: Subject>(
    table: &mut Table,
    s: &S,
    faults_of: impl Fn(&S::World) -> Option<FaultDir<Arc<dyn Dir>>> + Copy,
    power_cut: impl Fn(&S::World) + Copy,
) -> Result<(), DiskError> {
    let mut w = s.world().map_err(|e| format!("no world: {e}"))?;
    // In a recording scope, as a sweep runs a life (see `fault_run`).
    match crashpoint::record(|| s.life(&mut w)).outcome {
        crashpoint::Outcome::Finished(r) => {
            r.map_err(|e| format!("the clean run stopped: {e}"))?;
        }
        crashpoint::Outcome::Crashed(hit) => return Err(format!("the clean run crashed at {hit}")),
        crashpoint::Outcome::Panicked(m) => return Err(format!("the clean run panicked: {m}")),
    }
    let sites = faults_of(&w)
        .ok_or("no fault injector in the world")?
        .sites();
    let name = Subject::name(s);
    let name = name.split(" | ").next().unwrap_or_default().to_owned();
    for depth in [1, 2] {
        for cut in [false, true] {
            let (mut stopped, mut twice, mut broken, mut first) = (0, 0, 0, None);
            for &f in &sites {
                let o = fault_run(s, faults_of, power_cut, f, depth, cut);
                stopped += usize::from(!o.errors.is_empty());
                if o.errors.len() >= 2 {
                    twice += 1;
                }
                if !o.broken.is_empty() {
                    broken += 1;
                    first.get_or_insert(format!("{f}: {}", o.broken.join("; ")));
                }
            }
            // A fault that stopped no life was absorbed (retried or
            // survived by the program).
            let absorbed = sites.len() - stopped;
            table.row([
                name.clone(),
                sites.len().to_string(),
                depth.to_string(),
                if cut { "yes" } else { "no" }.to_owned(),
                stopped.to_string(),
                twice.to_string(),
                absorbed.to_string(),
                broken.to_string(),
                first.unwrap_or_else(|| "-".into()),
            ]);
        }
    }
    Ok(())
}

/// The whole table, as `snapshots/disk.txt` holds it.
pub fn render() -> Result<String, DiskError> {
    let script = Script::load(designs::default_script_path()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    out.push_str("Enumerated crash states (state `enumerated`; persistence model: block 512 bytes, 2 torn prefixes per write, at most 64 disks per crash)\n\n");
    let mut table = Table::new([
        "subject",
        "writer",
        "depth",
        "scenarios",
        "crashes",
        "disks/crash max",
        "median",
        "sampled",
        "failing",
        "first failing scenario",
    ])
    .left([0, 1, 9]);
    // Each writer, and the depth its enumerated disks are swept to: the
    // real writer deep, the mutants to the first crash that shows them.
    let writers = [
        (Writer::Real, 2),
        (Writer::NoFileSync, 1),
        (Writer::NoDirSync, 1),
        (Writer::InPlace, 1),
        (Writer::RemoveFirst, 1),
    ];
    for (w, depth) in writers {
        enum_row(&mut table, &design(w, &script), w.title(), depth)?;
    }
    for (w, depth) in writers {
        enum_row(&mut table, &looped(w)?, w.title(), depth)?;
    }
    out.push_str(&table.markdown());
    out.push_str("\nI/O errors (each call of the clean run through the checkpoint directory fails once; depth 2: the restart's next call of that kind fails too; then healthy; real writer)\n\n");
    let mut table = Table::new([
        "subject",
        "calls",
        "depth",
        "power cut",
        "a life stopped",
        "two lives stopped",
        "absorbed",
        "broken",
        "first broken",
    ])
    .left([0, 3, 8]);
    let d = design(Writer::Real, &script).with_faults(Vec::new());
    fault_rows(
        &mut table,
        &d,
        |w: &designs::World| w.faults().cloned(),
        |w: &designs::World| w.power_cut(),
    )?;
    let l = looped(Writer::Real)?.with_faults(Vec::new());
    fault_rows(
        &mut table,
        &l,
        |w: &LoopWorld| w.faults().cloned(),
        |w: &LoopWorld| w.power_cut(),
    )?;
    out.push_str(&table.markdown());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole table, every scenario run, compared byte for byte with the
    /// reviewed snapshot `snapshots/disk.txt` (`CRASHSWEEP_BLESS=1`
    /// rewrites it; so does `cargo xtask sweep --disk --bless`).
    #[test]
    #[ignore = "slow tier: .ci/run runs it (cargo test --workspace -- --ignored)"]
    fn the_disk_table_matches_its_reviewed_snapshot() {
        let table = render().expect("the disk table runs");
        // What the table must show, whatever the snapshot says: the real
        // writer never fails, each mutant does, and no fault scenario breaks.
        for line in table.lines().filter(|l| l.starts_with("| ")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.len() == 12 && cells[2] != "writer" {
                let failing: u64 = cells[9].parse().expect("a count");
                if cells[2] == "real writer" {
                    assert_eq!(failing, 0, "{line}");
                } else {
                    assert!(failing > 0, "{line}");
                    assert!(cells[10].starts_with("enumerated: "), "{line}");
                }
            }
            if cells.len() == 11 && cells[2] != "calls" {
                // Every fault stops a life with an error naming the file; at
                // depth 2 some restarts stop again; nothing breaks.
                assert_eq!(cells[5], cells[2], "{line}");
                if cells[3] == "2" {
                    assert_ne!(cells[6], "0", "{line}");
                }
                assert_eq!(cells[8], "0", "{line}");
            }
        }
        let path = crate::root().join("snapshots/disk.txt");
        sweep::report::snapshot::check(&path, &table).unwrap_or_else(|e| panic!("{e}"));
    }

    /// A design that saves once per turn breaks under some faults (a
    /// failed save repeats the turn's calls): its rows count the broken
    /// scenarios and name the first; every call stopped a life or was
    /// absorbed.
    #[test]
    fn broken_fault_scenarios_are_counted_and_the_first_is_named() {
        let script = Script::load(designs::default_script_path()).unwrap();
        let weak = Design::SaveOncePerTurn
            .subject(&script, Storage::Memory)
            .with_modes(Modes {
                power: Some(Power {
                    writer: Writer::Real,
                    state: DiskState::LoseUnsynced,
                }),
                ..Modes::default()
            })
            .with_faults(Vec::new());
        let mut table = Table::new([
            "subject", "calls", "depth", "cut", "1", "2", "ok", "bad", "first",
        ]);
        fault_rows(
            &mut table,
            &weak,
            |w: &designs::World| w.faults().cloned(),
            |w: &designs::World| w.power_cut(),
        )
        .unwrap();
        let out = table.markdown();
        let rows: Vec<Vec<&str>> = out
            .lines()
            .skip(2) // the header and its rule
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        assert_eq!(rows.len(), 4, "{out}");
        for r in &rows {
            let n = |i: usize| r[i].parse::<usize>().unwrap();
            let (calls, stopped, twice, absorbed, broken) = (n(1), n(4), n(5), n(6), n(7));
            assert_eq!(stopped + absorbed, calls, "{out}");
            assert!(twice <= stopped, "{out}");
            assert!(broken > 0 && broken <= calls, "{out}");
            assert!(
                r[8].contains(": "),
                "the first broken scenario is named: {out}"
            );
        }
    }
}
