//! A subject that lists power-cut states but forgets to boot its `PowerDir`
//! would sweep every state as a process crash, and its `lose` rows would
//! pass a writer that never fsyncs. The directory refuses instead: every
//! scenario of a power-cut state fails, naming the missing `boot_in`.

use std::sync::{Arc, Mutex};

use crashpoint::point;
use durable::testing::{DiskState, PowerDir};
use durable::write::{write_atomic, WriteOptions};
use durable::Dir;
use sweep::{power::Boot, Config, Counter, LifeError, Subject, Verdict};

/// Sends three effects, saving how many were sent after each — without an
/// fsync (the bug a `lose` row must catch).
struct NoFsync {
    boots: bool,
}

struct World {
    dir: PowerDir,
    sent: Arc<Mutex<Vec<u32>>>,
}

impl Subject for NoFsync {
    type World = World;
    fn name(&self) -> String {
        format!("no fsync{}", if self.boots { "" } else { ", never booted" })
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("dups").required()]
    }
    fn world(&self) -> Result<World, LifeError> {
        Ok(World {
            dir: PowerDir::new(DiskState::Process),
            sent: Arc::default(),
        })
    }
    fn life(&self, w: &mut World) -> Result<(), LifeError> {
        let unsynced = WriteOptions {
            sync: false,
            points: false,
        };
        let read = w.dir.read("n")?.unwrap_or_default();
        let mut n: u32 = String::from_utf8_lossy(&read).parse().unwrap_or(0);
        while n < 3 {
            w.sent.lock().map_err(|_| "poisoned")?.push(n);
            point!("sent");
            n += 1;
            write_atomic(&w.dir, "n", n.to_string().as_bytes(), unsynced)?;
            point!("saved");
        }
        Ok(())
    }
    fn judge(&self, w: &World) -> Verdict {
        let sent = w.sent.lock().unwrap_or_else(|e| e.into_inner());
        Verdict::new().count("dups", sent.len().saturating_sub(3) as u64)
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<World>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<World> for NoFsync {
    fn crash_states(&self) -> Vec<sweep::power::CrashState> {
        vec![
            sweep::power::CrashState::PROCESS,
            sweep::power::CrashState::named("lose"),
        ]
    }

    fn boot(&self, w: &mut World, ctx: &Boot) -> Result<(), LifeError> {
        if self.boots {
            w.dir.boot_in(ctx.state().try_into()?);
        }
        Ok(())
    }

    fn shutdown(&self, w: &mut World, _: &Boot) {
        if self.boots {
            w.dir.shutdown();
        }
    }
}

fn sweep_lose(subject: &NoFsync) -> sweep::Report {
    let config = Config {
        crash_states: vec![sweep::power::CrashState::named("lose")],
        depth: 1,
        ..Config::default()
    };
    sweep::run(subject, &config).expect("a sweep")
}

#[test]
fn a_power_dir_never_booted_refuses_every_power_cut_scenario() {
    // The control: booted, the `lose` row catches the missing fsync.
    let booted = sweep_lose(&NoFsync { boots: true });
    assert!(booted.failures().count() > 0, "the lose row missed the bug");
    assert!(booted.failures().all(|f| f.verdict.get("dups") > 0));

    // Never booted: without the refusal every scenario passed (nothing was
    // ever cut). Now each one fails, saying what to call.
    let forgot = sweep_lose(&NoFsync { boots: false });
    let failures: Vec<String> = forgot
        .failures()
        .map(|f| {
            f.failure
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        })
        .collect();
    assert!(!failures.is_empty(), "the forgotten boot passed silently");
    assert_eq!(failures.len(), forgot.failures().count());
    for f in &failures {
        assert!(
            f.contains("crash state `lose` but was not booted") && f.contains("boot_in"),
            "{f}"
        );
    }
}
