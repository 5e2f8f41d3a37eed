//! An outbox relay: events wait in a durable queue (`Checkpoint<Outbox>`)
//! and an async task on tokio delivers each to a receiver that honours
//! idempotency keys, the way a webhook endpoint or a payment API does.
//! `Relay::SendFirst` sends, then records the delivery; `Relay::RecordFirst`
//! (the bug) records it first, so a crash in between loses the event.
//! Each is swept in every crash state: the runner boots the relay's
//! `PowerDir` in the scenario's state before each life.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex};

use crashpoint::point;
use durable::testing::{DiskState, PowerDir};
use durable::{Checkpoint, Durable, Options, RunId};
use serde::{Deserialize, Serialize};
use sweep::power::{Boot, PowerCuts};
use sweep::{Counter, LifeError, Subject, Verdict};

/// The events the producer put in the outbox.
pub const EVENTS: [&str; 3] = ["order-1 paid", "order-2 paid", "order-1 shipped"];

/// The outbox: every event, and how many have been delivered, in order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Outbox {
    /// Every event put in the outbox, in order.
    pub events: Vec<String>,
    /// How many of `events`, from the first, have been delivered.
    pub delivered: usize,
}

impl Durable for Outbox {
    fn is_finished(&self) -> bool {
        self.delivered == self.events.len()
    }
}

/// The fake HTTP-like receiver: outlives every crash, answers a repeated
/// key without delivering again.
#[derive(Clone, Debug, Default)]
pub struct Receiver(Arc<Mutex<Vec<(String, String)>>>);

impl Receiver {
    /// `POST /events` with an `Idempotency-Key` header.
    pub async fn post(&self, key: &str, event: &str) -> Result<u16, LifeError> {
        point!("posting"); // the request is about to leave
        tokio::task::yield_now().await; // on the wire
        let mut log = self.0.lock().map_err(|_| "receiver poisoned")?;
        if log.iter().any(|(k, _)| k == key) {
            return Ok(200); // seen: answered, not delivered again
        }
        log.push((key.to_owned(), event.to_owned()));
        drop(log);
        point!("receiver accepted");
        Ok(201)
    }

    /// How many times `event` was delivered.
    pub fn deliveries(&self, event: &str) -> usize {
        let log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        log.iter().filter(|(_, e)| e == event).count()
    }
}

/// What a crash does not erase: the relay's directory and the receiver.
pub struct World {
    /// The relay's directory, holding its checkpoint.
    pub dir: PowerDir,
    /// The receiver the relay delivers to.
    pub receiver: Receiver,
}

/// The relay, in one of its two versions.
#[derive(Clone, Copy, Debug)]
pub enum Relay {
    /// Send each event, then record its delivery: a crash in between sends
    /// it again, under the same key, which the receiver answers without a
    /// second delivery.
    SendFirst,
    /// Record each delivery, then send the event (the bug): a crash in
    /// between loses the event.
    RecordFirst,
}

impl Relay {
    async fn run(self, w: &World) -> Result<(), LifeError> {
        let opts = Options {
            sync: true,
            max_resumes: None,
            ..Options::default()
        };
        let fresh = || Outbox {
            events: EVENTS.map(String::from).to_vec(),
            delivered: 0,
        };
        let run = RunId::parse("outbox")?;
        let opened = Checkpoint::open_with(Arc::new(w.dir.clone()), &run, opts, fresh)?;
        let (mut checkpoint, mut outbox) = (opened.checkpoint, opened.state);
        while outbox.delivered < outbox.events.len() {
            let event = outbox.events[outbox.delivered].clone();
            let key = durable::key(run.as_str(), &outbox.delivered.to_string());
            outbox.delivered += 1;
            if let Relay::RecordFirst = self {
                checkpoint.save(&outbox)?; // the bug: recorded before it is sent
            }
            w.receiver.post(&key, &event).await?;
            if let Relay::SendFirst = self {
                checkpoint.save(&outbox)?;
            }
        }
        Ok(())
    }
}

impl Subject for Relay {
    type World = World;

    fn name(&self) -> String {
        match self {
            Relay::SendFirst => "send first".into(),
            Relay::RecordFirst => "record first".into(),
        }
    }

    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("lost").with_scenarios("with lost").required(),
            Counter::new("dups").required(),
        ]
    }

    fn world(&self) -> Result<World, LifeError> {
        Ok(World {
            dir: PowerDir::new(DiskState::Process),
            receiver: Receiver::default(),
        })
    }

    fn life(&self, w: &mut World) -> Result<(), LifeError> {
        let rt = tokio::runtime::Builder::new_current_thread().build()?;
        rt.block_on(self.run(w))
    }

    fn judge(&self, w: &World) -> Verdict {
        let (mut lost, mut dups, mut v) = (0, 0, Verdict::new());
        for event in EVENTS {
            match w.receiver.deliveries(event) {
                0 => (lost, v) = (lost + 1, v.note(format!("{event:?} never delivered"))),
                1 => {}
                n => {
                    (dups, v) = (
                        dups + n as u64 - 1,
                        v.note(format!("{event:?} delivered {n} times")),
                    )
                }
            }
        }
        v.count("lost", lost).count("dups", dups)
    }

    fn describe(&self, w: &World) -> String {
        let log = w.receiver.0.lock().unwrap_or_else(|e| e.into_inner());
        let events: Vec<&str> = log.iter().map(|(_, e)| e.as_str()).collect();
        format!("the receiver has: {}", events.join(", "))
    }

    fn power_cuts(&self) -> Option<&dyn PowerCuts<World>> {
        Some(self)
    }
}

impl PowerCuts<World> for Relay {
    fn crash_states(&self) -> Vec<sweep::power::CrashState> {
        DiskState::ALL.map(Into::into).to_vec()
    }

    fn default_crash_states(&self) -> Vec<sweep::power::CrashState> {
        self.crash_states() // every one, one table row each
    }

    fn row_title(&self, subject: &str, state: &sweep::power::CrashState) -> String {
        format!("{subject} ({state})")
    }

    fn boot(&self, w: &mut World, ctx: &Boot) -> Result<(), LifeError> {
        w.dir.boot_in(ctx.state().try_into()?); // cuts the power first if the last life died
        Ok(())
    }

    fn shutdown(&self, w: &mut World, _: &Boot) {
        w.dir.shutdown();
    }
}

/// Both versions of the relay, each under every crash state, as a command line.
pub fn app() -> sweep::cli::App {
    sweep::cli::App::new("cargo run -p outbox --")
        .subject(Relay::SendFirst)
        .subject(Relay::RecordFirst)
        .snapshot(SNAPSHOT)
}

/// The reviewed table of the whole sweep.
pub const SNAPSHOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../snapshots/outbox.txt");
