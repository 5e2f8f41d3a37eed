//! Sweep your own durable program: a bank-transfer job, crashed at every
//! point it can be crashed.
//!
//! This crate is an example written only against the public API of
//! [`crashpoint`], [`sweep`] and [`durable`], as someone adopting them for
//! their own program would write it. It has nothing to do with agents or
//! issue trackers: a nightly *payday* job pays out a batch of three transfers
//! through a payment service, and must pay each exactly once however often it
//! dies on the way.
//!
//! # The program
//!
//! * [`Bank`] is the fake payment service. [`Bank::transfer`] debits one
//!   account, credits another and writes the transfer's ID in its ledger, in
//!   one step. It honours idempotency keys: a repeat with a key it has seen
//!   returns the first [`Receipt`] and changes nothing. It marks the point
//!   `payment accepted` after it applied a transfer and before the reply gets
//!   back to the job: the window no checkpoint can close.
//! * The job ([`Payday`]'s [`life`](sweep::Subject::life)) keeps its own
//!   [`JobState`] — the run ID and a receipt per transfer done — in a
//!   [`durable::Checkpoint<JobState>`](durable::Checkpoint) filed under the
//!   job's name, `payday` (so `payday.json`, locked by `payday.lock`). It
//!   sends [`durable::key(run, transfer id)`](durable::key()) with each
//!   transfer, so a transfer retried after a crash carries the key its first
//!   attempt carried, and saves after each reply.
//!
//! [`durable::Checkpoint::open_with`] does the chores: it takes the lock (one
//! process per job; the lock goes with a crashed life), removes the temp
//! files a save that crashed before its rename left behind, loads the job
//! file or saves the fresh start — here a new run ID from the clock — at
//! once, and refuses a corrupt file with an error naming it. The run ID is
//! the job's own field, not the checkpoint's name: a restart must know the
//! name to find the file, and the file is what remembers the run ID. Every
//! save passes the two points of [`durable::write::write_atomic`], `mid-save` (temp
//! file written, not yet renamed) and `after rename`, so the job needs no
//! `job saved` point: `after rename` is that moment. The job does not count
//! restarts ([`durable::Options::max_resumes`] `None`): each life either pays
//! the next transfer or crashes, so a restart has nothing to save before it
//! acts.
//!
//! # The sweep
//!
//! A [`sweep::Subject`] says three things: what a fresh *world* is (here the
//! bank, the job's directory — an in-memory [`durable::testing::MemDir`] — and a clock
//! standing in for the time; none of them is erased by a crash), how one
//! *life* runs against it, and how to *judge* the world once a scenario is
//! over. The judge counts, and [`sweep::Counter::required`] makes a scenario
//! fail unless the count is zero:
//!
//! | counter | what the judge counts |
//! | --- | --- |
//! | `dups` | extra applications of a transfer (`with dups`: scenarios with any) |
//! | `missing` | transfers of the batch the bank never applied |
//! | `cents +/-` | money created or lost: the sum of all balances against the start |
//! | `cents off` | cents sitting in an account that one clean payout would not have put there |
//!
//! A duplicated transfer moves money, it does not make any, so the books
//! still balance (`cents +/-` stays 0) while Bob is paid twice: that is why
//! the judge also counts transfers and checks each account.
//!
//! [`sweep::run`] with the default [`sweep::Config`] records a clean run,
//! crashes once at each hit it passed, then crashes each restart once more at
//! every hit the restart reaches, and returns a [`sweep::Report`]. The clean
//! run of the correct job passes 11 hits — the start save (`mid-save#1`,
//! `after rename#1`), then for each transfer `payment accepted#n` and its
//! save — so the sweep runs 11 single scenarios and 59 double ones (each
//! restart reaches fewer hits, as more of the batch is done):
//!
//! ```
//! use bank::{Payday, Variant};
//!
//! let report = sweep::run(&Payday(Variant::SaveRunFirst), &sweep::Config::default()).unwrap();
//! assert_eq!(report.failures().count(), 0);
//! assert_eq!(report.row().depth_counts, [11, 59]);
//! print!("{}", sweep::table(&[report.row()]));
//!
//! // The variant with the ordering bug pays Bob twice, and the report says where.
//! let buggy = sweep::run(&Payday(Variant::FirstSaveAfterPayment), &sweep::Config::default()).unwrap();
//! let first = buggy.failures().next().unwrap();
//! assert_eq!(first.scenario.to_string(), "payment accepted#1");
//! assert_eq!(
//!     first.failure.as_ref().map(ToString::to_string).as_deref(),
//!     Some("dups = 1, cents off = 3000; transfer t1 applied 2 times; bob has 3000 cents too many"),
//! );
//!
//! // Any scenario reruns alone by the name the report prints, with each
//! // life's hits.
//! let bug = Payday(Variant::FirstSaveAfterPayment);
//! let again = sweep::rerun(&bug, &sweep::Config::default(), "payment accepted#1").unwrap();
//! assert!(again.timeline().contains("payment accepted#1  ← crash"));
//! ```
//!
//! # The ordering bug
//!
//! [`Variant::FirstSaveAfterPayment`] makes the run ID at its first start but
//! opens its checkpoint, and so writes the job file, only after the first
//! transfer's reply (it looks with [`durable::Checkpoint::load`] and, finding
//! nothing, starts paying from memory): the checkpoint is saved after the
//! payment call instead of before. A crash in between
//! (`payment accepted#1`, `mid-save#1`) leaves no job file, so the restart is
//! a first start again, with a new run ID, hence a new key for `t1`, and the
//! bank, seeing a key it does not know, applies `t1` a second time. The keys
//! were there all along; they were only as stable as what they were made of.
//! It is the book chapter's lesson about call IDs: a key is only useful if the ID it
//! is made from reached the checkpoint *before* the call went out.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use std::sync::Arc;

use crashpoint::point;
use durable::testing::MemDir;
use durable::{Checkpoint, Dir, Durable, Options, RunId};
use serde::{Deserialize, Serialize};
use sweep::{Counter, LifeError, Subject, Verdict};

/// One payment of the batch; its ID names it in the job file, in its key and
/// in the bank's ledger.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Unique within the batch.
    pub id: &'static str,
    /// The account debited.
    pub from: &'static str,
    /// The account credited.
    pub to: &'static str,
    /// How much, in cents.
    pub cents: i64,
}

/// What the payday job pays out.
#[rustfmt::skip]
pub const BATCH: [Transfer; 3] = [
    Transfer { id: "t1", from: "alice", to: "bob", cents: 3000 },
    Transfer { id: "t2", from: "bob", to: "carol", cents: 2000 },
    Transfer { id: "t3", from: "carol", to: "alice", cents: 500 },
];

/// The balances, in cents, before the job's first start.
pub const OPENING: [(&str, i64); 3] = [("alice", 10_000), ("bob", 5_000), ("carol", 1_000)];

/// The bank's answer to a transfer: its entry number in the ledger.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Receipt(pub usize);

/// The fake payment service: part of the world, so its books outlive every
/// crash of the job, as a real bank's database would.
#[derive(Clone, Debug, Default)]
pub struct Bank {
    /// Balance in cents, by account.
    pub balances: BTreeMap<String, i64>,
    /// The ID of each transfer applied, in order (ledger entry `n` is `[n - 1]`).
    pub ledger: Vec<String>,
    replies: BTreeMap<String, Receipt>,
}

impl Bank {
    /// A bank with the [`OPENING`] balances.
    pub fn open() -> Bank {
        let balances = OPENING.iter().map(|(a, c)| (a.to_string(), *c)).collect();
        Bank {
            balances,
            ..Bank::default()
        }
    }

    /// Debit `t.from` and credit `t.to` by `t.cents` in one step, unless
    /// `key` was seen before: then return the first answer and change nothing.
    pub fn transfer(&mut self, t: &Transfer, key: &str) -> Result<Receipt, String> {
        if let Some(first) = self.replies.get(key) {
            return Ok(*first);
        }
        if !(self.balances.contains_key(t.from) && self.balances.contains_key(t.to)) {
            return Err(format!("transfer {}: unknown account", t.id));
        }
        *self.balances.entry(t.from.into()).or_default() -= t.cents;
        *self.balances.entry(t.to.into()).or_default() += t.cents;
        self.ledger.push(t.id.into());
        let receipt = Receipt(self.ledger.len());
        self.replies.insert(key.into(), receipt);
        point!("payment accepted");
        Ok(receipt)
    }

    /// How many times the ledger holds transfer `id`.
    pub fn applied(&self, id: &str) -> usize {
        self.ledger.iter().filter(|t| *t == id).count()
    }
}

/// What the job remembers across crashes, in `payday.json`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobState {
    /// Made at the job's first start and never reused: every key is made from it.
    pub run: String,
    /// The bank's receipt for each transfer done, by transfer ID.
    pub done: BTreeMap<String, Receipt>,
}

impl Durable for JobState {
    /// Every transfer of the batch has its receipt.
    fn is_finished(&self) -> bool {
        BATCH.iter().all(|t| self.done.contains_key(t.id))
    }
}

/// Everything a crash does not erase.
#[derive(Debug)]
pub struct World {
    /// The payment service.
    pub bank: Bank,
    /// The job's directory.
    pub dir: MemDir,
    /// The time, one tick per start (a real job would use
    /// [`durable::RunId::generate`] with the wall clock).
    pub clock: u64,
}

/// When the job first saves its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Saves the fresh run ID before the first payment goes out (correct).
    SaveRunFirst,
    /// Saves only after the first payment's reply (the ordering bug).
    FirstSaveAfterPayment,
}

/// The payday job as a sweep subject.
#[derive(Clone, Copy, Debug)]
pub struct Payday(pub Variant);

/// The job's name: its checkpoint is `payday.json`, its lock `payday.lock`.
const JOB: &str = "payday";

/// A `MemDir` has nothing to sync; restarts are not counted.
const OPTS: Options = Options {
    sync: false,
    max_resumes: None,
    max_read_bytes: durable::checkpoint::DEFAULT_MAX_READ_BYTES,
    compact: false,
};

impl Subject for Payday {
    type World = World;

    fn name(&self) -> String {
        match self.0 {
            Variant::SaveRunFirst => "save the run ID first".into(),
            Variant::FirstSaveAfterPayment => "first save after a payment".into(),
        }
    }

    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("dups").with_scenarios("with dups").required(),
            Counter::new("missing").required(),
            Counter::new("money").titled("cents +/-").required(),
            Counter::new("misplaced").titled("cents off").required(),
        ]
    }

    fn world(&self) -> Result<World, sweep::LifeError> {
        Ok(World {
            bank: Bank::open(),
            dir: MemDir::new(),
            clock: 0,
        })
    }

    fn life(&self, w: &mut World) -> Result<(), LifeError> {
        w.clock += 1;
        let name = RunId::parse(JOB)?;
        let dir = w.dir.clone();
        let open =
            |fresh: JobState| Checkpoint::open_with(Arc::new(dir.clone()), &name, OPTS, || fresh);
        let fresh = JobState {
            run: format!("payday-{}", w.clock),
            done: BTreeMap::new(),
        };
        let lazy = self.0 == Variant::FirstSaveAfterPayment
            && Checkpoint::<JobState>::load(&w.dir, &name)?.is_none();
        let (mut checkpoint, mut job) = if lazy {
            (None, fresh) // the bug: nothing saved before the first payment
        } else {
            let opened = open(fresh)?;
            (Some(opened.checkpoint), opened.state)
        };
        for t in &BATCH {
            if !job.done.contains_key(t.id) {
                let receipt = w.bank.transfer(t, &durable::key(&job.run, t.id))?;
                job.done.insert(t.id.into(), receipt);
                match &mut checkpoint {
                    Some(c) => c.save(&job)?,
                    None => checkpoint = Some(open(job.clone())?.checkpoint),
                }
            }
        }
        Ok(())
    }

    fn judge(&self, w: &World) -> Verdict {
        let mut v = Verdict::new();
        let (mut dups, mut missing) = (0, 0);
        let mut expected: BTreeMap<&str, i64> = OPENING.into_iter().collect();
        for t in &BATCH {
            *expected.entry(t.from).or_default() -= t.cents;
            *expected.entry(t.to).or_default() += t.cents;
            let n = w.bank.applied(t.id);
            if n == 0 {
                missing += 1;
                v = v.note(format!("transfer {} never applied", t.id));
            } else if n > 1 {
                dups += n as u64 - 1;
                v = v.note(format!("transfer {} applied {n} times", t.id));
            }
        }
        let drift =
            w.bank.balances.values().sum::<i64>() - OPENING.iter().map(|a| a.1).sum::<i64>();
        if drift != 0 {
            let what = if drift > 0 { "created" } else { "lost" };
            v = v.note(format!("{} cents {what}", drift.abs()));
        }
        let mut misplaced = 0;
        for (account, cents) in &w.bank.balances {
            let extra = cents - expected.get(account.as_str()).copied().unwrap_or(0);
            if extra > 0 {
                misplaced += extra.unsigned_abs();
                v = v.note(format!("{account} has {extra} cents too many"));
            }
        }
        v.count("dups", dups)
            .count("missing", missing)
            .count("money", drift.unsigned_abs())
            .count("misplaced", misplaced)
    }

    fn describe(&self, w: &World) -> String {
        let job = w.dir.read(&format!("{JOB}.json")).ok().flatten();
        let job = String::from_utf8_lossy(job.as_deref().unwrap_or_default());
        let (balances, ledger) = (&w.bank.balances, &w.bank.ledger);
        format!("balances {balances:?}\nledger {ledger:?}\n{JOB}.json {job}")
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<Self::World>> {
        Some(self)
    }
}

impl sweep::sharing::Share<World> for Payday {
    // Shared lives: a world is copied whole (the bank's books, the
    // directory's files, the clock) and hashed whole; the bank's replies and
    // the files are what a life reads back, the balances and ledger what the
    // judge counts.
    fn copy(&self, w: &World) -> Option<World> {
        Some(World {
            bank: w.bank.clone(),
            dir: w.dir.deep_clone()?,
            clock: w.clock,
        })
    }
    fn fingerprint(&self, w: &World) -> Option<sweep::sharing::Fingerprint> {
        let mut fp = sweep::sharing::Fingerprint::new();
        w.dir.hash_contents(fp.observer());
        Some(
            fp.observe(&w.clock)
                .observe_debug(&w.bank.replies)
                .judge(&w.bank.balances)
                .judge(&w.bank.ledger),
        )
    }
}
