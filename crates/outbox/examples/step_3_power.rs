use std::sync::Arc;

use crashpoint::point;
use durable::testing::{DiskState, PowerDir};
use durable::{Checkpoint, Durable, Options, RunId};
use serde::{Deserialize, Serialize};
use sweep::power::{Boot, PowerCuts};
use sweep::{Config, Counter, LifeError, Subject, Verdict};

#[derive(Clone, Default, Serialize, Deserialize)]
struct Progress {
    next: u32,
}

impl Durable for Progress {
    fn is_finished(&self) -> bool {
        self.next == 3
    }
}

/// Tells the payee each payment once it is saved; a power cut may lose a save.
pub struct Payday {
    pub synced: bool, // the fix: fsync each save before telling anyone
}

impl Subject for Payday {
    type World = (PowerDir, Vec<u32>); // the job's disk, the notices sent
    fn name(&self) -> String {
        format!("payday{}", if self.synced { ", synced" } else { "" })
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("told twice").required()]
    }
    fn world(&self) -> Result<Self::World, LifeError> {
        Ok((PowerDir::new(DiskState::Process), Vec::new()))
    }
    fn life(&self, (dir, told): &mut Self::World) -> Result<(), LifeError> {
        let opts = Options {
            sync: self.synced,
            ..Options::default()
        };
        let run = RunId::parse("payday")?;
        let opened = Checkpoint::<Progress>::open(Arc::new(dir.clone()), &run, opts)?;
        let (mut checkpoint, mut progress) = (opened.checkpoint, opened.state);
        while progress.next < 3 {
            progress.next += 1; // the bank pays (keyed, as on the step before)
            checkpoint.save(&progress)?;
            told.push(progress.next); // "invoice N is paid", to a person
            point!("told");
        }
        Ok(())
    }
    fn judge(&self, (_, told): &Self::World) -> Verdict {
        let twice = (1..=3).filter(|n| told.iter().filter(|t| *t == n).count() > 1);
        Verdict::new().count("told twice", twice.count() as u64)
    }
    fn power_cuts(&self) -> Option<&dyn PowerCuts<Self::World>> {
        Some(self) // opts in to the crash states below
    }
}

impl PowerCuts<(PowerDir, Vec<u32>)> for Payday {
    fn crash_states(&self) -> Vec<sweep::power::CrashState> {
        DiskState::ALL.map(Into::into).to_vec() // process, lose, entries, …
    }
    fn default_crash_states(&self) -> Vec<sweep::power::CrashState> {
        self.crash_states() // one table row each
    }
    fn row_title(&self, subject: &str, state: &sweep::power::CrashState) -> String {
        format!("{subject} ({state})")
    }
    fn boot(&self, (dir, _): &mut (PowerDir, Vec<u32>), ctx: &Boot) -> Result<(), LifeError> {
        dir.boot_in(ctx.state().try_into()?); // cuts the power if the last life died
        Ok(())
    }
    fn shutdown(&self, (dir, _): &mut (PowerDir, Vec<u32>), _: &Boot) {
        dir.shutdown();
    }
}

#[allow(dead_code)] // step 4 reuses this file without its `main`
fn main() {
    let synced = std::env::args().any(|a| a == "--fixed");
    let report = sweep::run(&Payday { synced }, &Config::default()).expect("a sweep");
    println!("{}", sweep::table(&report.rows()));
}
