use crashpoint::point;
use sweep::{Config, Counter, LifeError, Subject, Verdict};

/// Pays invoices 0, 1 and 2, saving how far it got after each payment.
struct Payday {
    keyed: bool, // the fix: the bank refuses an invoice it has paid
}

impl Subject for Payday {
    type World = (Vec<u32>, u32);
    fn name(&self) -> String {
        format!("payday{}", if self.keyed { ", keyed" } else { "" })
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("paid twice").required()]
    }
    fn world(&self) -> Result<Self::World, sweep::LifeError> {
        Ok((Vec::new(), 0)) // what a crash does not erase: the ledger, the progress
    }
    fn life(&self, (ledger, next): &mut Self::World) -> Result<(), LifeError> {
        while *next < 3 {
            if !(self.keyed && ledger.contains(next)) {
                ledger.push(*next); // the bank pays invoice `next`
            }
            point!("paid");
            *next += 1; // the job saves its progress
            point!("saved");
        }
        Ok(())
    }
    fn judge(&self, (ledger, _): &Self::World) -> Verdict {
        let twice = (0..3).filter(|i| ledger.iter().filter(|p| *p == i).count() > 1);
        Verdict::new().count("paid twice", twice.count() as u64)
    }
}
fn main() {
    let keyed = std::env::args().any(|a| a == "--fixed");
    let report = sweep::run(&Payday { keyed }, &Config::default()).expect("a sweep");
    println!("{}", sweep::table(&[report.row()]));
}
