use std::sync::Arc;

use crashpoint::point;
use durable::testing::MemDir;
use durable::{Checkpoint, Durable, Options, RunId};
use serde::{Deserialize, Serialize};
use sweep::{Config, Counter, LifeError, Subject, Verdict};

/// How far the job got, kept in a `Checkpoint` instead of the world's memory.
#[derive(Clone, Default, Serialize, Deserialize)]
struct Progress {
    next: u32,
}

impl Durable for Progress {
    fn is_finished(&self) -> bool {
        self.next == 3
    }
}

struct Payday {
    keyed: bool, // the fix: the bank refuses a key it has paid
}

impl Subject for Payday {
    type World = (MemDir, Vec<String>); // the job's directory, the bank's ledger
    fn name(&self) -> String {
        format!("payday{}", if self.keyed { ", keyed" } else { "" })
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("paid twice").required()]
    }
    fn world(&self) -> Result<Self::World, LifeError> {
        Ok((MemDir::new(), Vec::new()))
    }
    fn life(&self, (dir, ledger): &mut Self::World) -> Result<(), LifeError> {
        let run = RunId::parse("payday")?;
        let opened = Checkpoint::<Progress>::open(Arc::new(dir.clone()), &run, Options::default())?;
        let (mut checkpoint, mut progress) = (opened.checkpoint, opened.state);
        while progress.next < 3 {
            let key = durable::key(run.as_str(), &progress.next.to_string());
            if !(self.keyed && ledger.contains(&key)) {
                ledger.push(key); // the bank pays
            }
            point!("paid");
            progress.next += 1;
            checkpoint.save(&progress)?; // crash points of its own: mid-save, after rename
        }
        Ok(())
    }
    fn judge(&self, (_, ledger): &Self::World) -> Verdict {
        let twice = ledger
            .iter()
            .filter(|k| ledger.iter().filter(|p| p == k).count() > 1);
        Verdict::new().count("paid twice", twice.count() as u64 / 2)
    }
}

fn main() {
    let keyed = std::env::args().any(|a| a == "--fixed");
    let report = sweep::run(&Payday { keyed }, &Config::default()).expect("a sweep");
    println!("{}", sweep::table(&[report.row()]));
}
