use std::sync::{Arc, Mutex};

use crashpoint::point;
use sweep::{Config, Counter, LifeError, Subject, Verdict};

/// The bank, as an async call: what it paid outlives every crash.
#[derive(Clone, Default)]
struct Bank(Arc<Mutex<Vec<u32>>>);

impl Bank {
    async fn pay(self, invoice: u32) {
        let mut paid = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if !paid.contains(&invoice) {
            paid.push(invoice); // keyed by invoice: a repeat is refused
        }
        drop(paid);
        point!("paid");
    }
}

struct Payday {
    scoped: bool, // the fix: the task carries the life's scope
}

impl Subject for Payday {
    type World = (Bank, u32); // the bank, the job's progress
    fn name(&self) -> String {
        format!("payday{}", if self.scoped { ", scoped" } else { "" })
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("unpaid").required()]
    }
    fn world(&self) -> Result<Self::World, LifeError> {
        Ok((Bank::default(), 0))
    }
    fn life(&self, (bank, next): &mut Self::World) -> Result<(), LifeError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()?;
        rt.block_on(async {
            while *next < 3 {
                let pay = bank.clone().pay(*next);
                let task = match self.scoped {
                    true => tokio::spawn(crashpoint::task::scoped(pay)),
                    false => tokio::spawn(pay), // on a worker thread, outside any scope
                };
                task.await?;
                *next += 1;
                point!("saved");
            }
            Ok(())
        })
    }
    fn judge(&self, (bank, _): &Self::World) -> Verdict {
        let paid = bank.0.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
        Verdict::new().count("unpaid", 3 - paid)
    }
}

fn main() {
    let scoped = std::env::args().any(|a| a == "--fixed");
    match sweep::run(&Payday { scoped }, &Config::default()) {
        Ok(report) => println!("{}", sweep::table(&[report.row()])),
        Err(refused) => println!("{refused}"), // without the fix: sweep::Error::Unscoped
    }
}
