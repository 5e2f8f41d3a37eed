//! I/O errors as a sweep dimension, on the real loop, keyed, with the real
//! writer in a power-loss world: every call its checkpoint
//! directory receives in a clean run fails once in turn (`ENOSPC` on a
//! create or write, `EIO` on the rest: `durable::testing::FaultDir`); at
//! depth 2 the restart's next call of the same kind fails again; then the
//! disk heals and the program runs to the end, once with the power cut
//! before the healthy life and once without. Judged: nothing lost, nothing
//! twice (the loop's required counters all zero), every failure a typed
//! error naming the file, and the healthy life finishes (no state the next
//! life misreads).

use std::sync::Arc;

use durable::testing::{DiskState, Fault};
use loop_sweep::{LoopSubject, LoopVariant, Power, Situation, Writer};
use sweep::power::faults::{check_every_site, fault_run, FaultOutcome};
use sweep::power::PowerCuts;
use sweep::Subject;

fn subject(faults: Vec<Fault>) -> LoopSubject {
    let t = Arc::new(loop_sweep::transcript(None).expect("the loop's sweep job loads"));
    let v = LoopVariant {
        keyed: true,
        situation: Situation::Plain,
        power: Some(Power {
            state: DiskState::LoseUnsynced,
            writer: Writer::Real,
        }),
    };
    LoopSubject::new(v, t)
        .expect("the subject builds")
        .with_faults(faults)
}

/// `fault` fails; at depth 2 the next call of its kind after the first
/// error fails too; then the disk heals (and, if `cut`, the power is cut
/// before the healthy life): the fault sweep's one driver.
fn run(fault: Fault, depth: u32, cut: bool) -> FaultOutcome {
    let s = subject(Vec::new());
    fault_run(
        &s,
        |w| w.faults().cloned(),
        |w| w.power_cut(),
        fault,
        depth,
        cut,
    )
}

fn sites() -> Vec<Fault> {
    let s = subject(Vec::new());
    let mut w = s.world().unwrap();
    lived(|| s.life(&mut w)).expect("the clean run finishes");
    w.faults().expect("armed").sites()
}

#[test]
fn every_failed_call_is_a_typed_error_naming_the_file_and_nothing_is_lost_or_doubled() {
    let sites = sites();
    assert!(sites.len() > 20, "{sites:?}");
    let stopped = check_every_site(&sites, run).unwrap_or_else(|e| panic!("{e}"));
    assert!(stopped > 0, "some fault stops a life");
}

/// The loop's table saves unsynced (a panic keeps the page cache, so a
/// sync could not be told from none); a power-loss world syncs every save.
#[test]
fn only_a_power_loss_world_syncs_its_saves() {
    use durable::testing::Call;
    let t = Arc::new(loop_sweep::transcript(None).expect("the loop's sweep job loads"));
    let syncs = |power: Option<Power>| {
        let v = LoopVariant {
            keyed: true,
            situation: Situation::Plain,
            power,
        };
        let s = LoopSubject::new(v, Arc::clone(&t))
            .expect("the subject builds")
            .with_faults(Vec::new());
        let mut w = s.world().unwrap();
        lived(|| s.life(&mut w)).expect("the clean run finishes");
        let sites = w.faults().expect("armed").sites();
        let n = |call| sites.iter().filter(|f| f.call == call).count();
        (n(Call::Sync), n(Call::SyncDir))
    };
    assert_eq!(syncs(None), (0, 0));
    let (sync, sync_dir) = syncs(Some(Power {
        state: DiskState::LoseUnsynced,
        writer: Writer::Real,
    }));
    assert!(sync > 0 && sync_dir > 0, "{sync} {sync_dir}");
}

/// A subject's `Debug` names its variant, its job's file, its model and
/// whether its tools go over HTTP.
#[test]
fn a_subject_describes_itself() {
    let s = subject(Vec::new());
    let d = format!("{s:?}");
    assert!(d.starts_with("LoopSubject { variant: LoopVariant {"), "{d}");
    assert!(d.contains("keyed: true"), "{d}");
    assert!(d.contains(loop_sweep::JOB_NAME), "{d}");
    assert!(d.contains("model: None, http: false, .."), "{d}");
}

/// The sweep's loop has no restart limit of its own: a run crashed more
/// times than durable's default limit (ten) still finishes.
#[test]
fn many_crashes_in_a_row_do_not_reach_a_restart_limit() {
    let s = loop_sweep::subject(loop_sweep::plain(true, loop_sweep::Situation::Plain), None)
        .expect("the subject builds");
    let mut w = s.world().unwrap();
    for i in 1..=12 {
        let life =
            crashpoint::crash_at(crashpoint::Hit::new("reply arrived", 1), || s.life(&mut w));
        assert!(
            life.outcome.crashed().is_some(),
            "life {i}: {:?}",
            life.outcome
        );
    }
    lived(|| s.life(&mut w)).expect("the thirteenth life finishes");
    let v = s.judge(&w);
    for c in ["dups", "missing"] {
        assert!(
            v.counts.iter().any(|(k, _)| k == c),
            "{c} not counted: {v:?}"
        );
    }
    assert_eq!((v.get("dups"), v.get("missing")), (0, 0), "{:?}", v.notes);
}

/// A sweep that names no crash state runs the variant's own: a process
/// crash for the loop's table, the variant's disk state under power loss.
#[test]
fn a_variant_sweeps_its_own_crash_state_by_default() {
    let plain = loop_sweep::subject(loop_sweep::plain(true, loop_sweep::Situation::Plain), None)
        .expect("the subject builds");
    assert_eq!(
        plain.default_crash_states(),
        vec![sweep::power::CrashState::PROCESS]
    );
    let powered = loop_sweep::power_subjects(Writer::Real, None).expect("the subjects build");
    assert!(powered.len() > 1);
    for s in powered {
        let state = s.variant().power.expect("a power variant").state;
        assert_eq!(s.default_crash_states(), vec![state.into()], "{s:?}");
    }
}

/// A world describes itself for a failure report: the tracker's records,
/// the workspace, the tallies, the power cuts and the checkpoint on file.
#[test]
fn a_world_describes_what_it_holds() {
    let describe = |s: &LoopSubject| {
        let mut w = s.world().unwrap();
        lived(|| s.life(&mut w)).expect("the clean run finishes");
        s.describe(&w)
    };
    let d = describe(
        &loop_sweep::subject(loop_sweep::plain(true, loop_sweep::Situation::Plain), None)
            .expect("the subject builds"),
    );
    let lines: Vec<&str> = d.lines().collect();
    assert!(lines[0].starts_with("issue #1 \""), "{d}");
    assert!(lines.iter().any(|l| l.starts_with("    comment #")), "{d}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("workspace ") && l.ends_with(" bytes)")),
        "{d}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("model calls: ")
            && l.ends_with(", questions to a person: 0, gate: 0")),
        "{d}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("checkpoint: phase ")),
        "{d}"
    );
    assert!(!d.contains("power cuts"), "{d}");
    let s = subject(Vec::new());
    let mut w = s.world().unwrap();
    lived(|| s.life(&mut w)).expect("the clean run finishes");
    let d = s.describe(&w);
    assert!(d.contains("\npower cuts: 0 ("), "{d}");
    assert!(d.contains("\nlost saves: 0\n"), "{d}");
    w.power_cut();
    let d = s.describe(&w);
    assert!(
        d.contains("\npower cuts: 1 ("),
        "a cut by hand is counted: {d}"
    );
}

/// A world whose run has not finished says so: the judge reads the
/// checkpoint, and one that is not done is noted.
#[test]
fn an_unfinished_run_is_noted() {
    let s = loop_sweep::subject(loop_sweep::plain(true, loop_sweep::Situation::Plain), None)
        .expect("the subject builds");
    let mut w = s.world().unwrap();
    let life = crashpoint::crash_at(crashpoint::Hit::new("reply arrived", 2), || s.life(&mut w));
    assert!(life.outcome.crashed().is_some(), "{:?}", life.outcome);
    let v = s.judge(&w);
    assert!(
        v.notes.iter().any(|n| n == "the run did not finish"),
        "{:?}",
        v.notes
    );
    lived(|| s.life(&mut w)).expect("the restart finishes");
    let v = s.judge(&w);
    assert!(
        !v.notes.iter().any(|n| n == "the run did not finish"),
        "{:?}",
        v.notes
    );
}

/// After a life that ends without a crash the subject shuts its power-loss
/// directories down, so a boot right after it cuts nothing. (A sweep never
/// boots again after such a life; a subject that restarts at once shows it.)
#[test]
fn a_clean_shutdown_is_no_power_cut() {
    use std::sync::Mutex;
    use sweep::{power::Boot, Counter, LifeError, Verdict};
    struct Restarts {
        inner: LoopSubject,
        cuts: Mutex<Vec<(String, String)>>,
    }
    fn cuts(d: &str) -> String {
        d.lines().filter(|l| l.starts_with("power cuts")).collect()
    }
    impl Subject for Restarts {
        type World = loop_sweep::LoopWorld;
        fn name(&self) -> String {
            self.inner.name()
        }
        fn counters(&self) -> Vec<Counter> {
            self.inner.counters()
        }
        fn world(&self) -> Result<Self::World, sweep::LifeError> {
            self.inner.world()
        }
        fn life(&self, w: &mut Self::World) -> Result<(), LifeError> {
            self.inner.life(w)
        }
        fn judge(&self, w: &Self::World) -> Verdict {
            self.inner.judge(w)
        }

        fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<loop_sweep::LoopWorld>> {
            Some(self)
        }
    }

    impl sweep::power::PowerCuts<loop_sweep::LoopWorld> for Restarts {
        fn crash_states(&self) -> Vec<sweep::power::CrashState> {
            self.inner.crash_states()
        }

        fn default_crash_states(&self) -> Vec<sweep::power::CrashState> {
            self.inner.default_crash_states()
        }

        fn boot(&self, w: &mut loop_sweep::LoopWorld, ctx: &Boot) -> Result<(), LifeError> {
            self.inner.boot(w, ctx)
        }

        fn shutdown(&self, w: &mut loop_sweep::LoopWorld, ctx: &Boot) {
            self.inner.shutdown(w, ctx);
            let before = cuts(&self.inner.describe(w));
            assert!(self.inner.boot(w, ctx).is_ok());
            let after = cuts(&self.inner.describe(w));
            self.cuts.lock().unwrap().push((before, after));
        }
    }
    let s = Restarts {
        inner: subject(Vec::new()),
        cuts: Mutex::new(Vec::new()),
    };
    let config = sweep::Config {
        depth: 0,
        ..sweep::Config::default()
    };
    sweep::run(&s, &config).expect("the clean run finishes");
    let cuts = s.cuts.into_inner().unwrap();
    assert!(!cuts.is_empty());
    for (before, after) in cuts {
        assert!(before.starts_with("power cuts: 0 ("), "{before}");
        assert_eq!(before, after);
    }
}

/// Run `f`, a life outside any sweep, in a recording scope of its own as a
/// sweep would: its points are recorded, not passes outside any scope,
/// which another test's sweep running meanwhile would count (and refuse).
fn lived<R>(f: impl FnOnce() -> R) -> R {
    match crashpoint::record(f).outcome {
        crashpoint::Outcome::Finished(r) => r,
        crashpoint::Outcome::Crashed(hit) => panic!("the life crashed at {hit}"),
        crashpoint::Outcome::Panicked(m) => panic!("the life panicked: {m}"),
    }
}
