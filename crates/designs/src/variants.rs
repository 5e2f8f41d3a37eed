//! The named variants beyond the book chapter's table: each is one
//! of the five designs run with [`Modes`] — power loss instead of a panic, a
//! person who errs, a model that answers a repeated question differently, a
//! tracker that crashes. Its title is its row's name; [`variants`] lists
//! the reviewed snapshot's. A command line names one by its design and its
//! dimensions (`cargo xtask sweep --variant keys-markers --crash-state lose`).
//!
//! ```
//! use designs::{variants, Design, Writer};
//! use durable::testing::DiskState;
//!
//! let script = designs::Script::load(designs::default_script_path()).unwrap();
//! let v = variants::power(Design::KeysMarkers, Writer::Real, DiskState::LoseUnsynced);
//! assert!(variants::variants().contains(&v));
//! let subject = v.subject(&script);
//! assert_eq!(sweep::Subject::name(&subject), "keys and markers | real writer | lose");
//! ```

use durable::testing::DiskState;

use crate::design::Design;
use crate::modes::{ModelBehaviour, Modes, Person, Power, Writer, WRITERS};
use crate::script::Script;
use crate::subject::DesignSubject;
use crate::world::Storage;

/// One sweepable variant: a design with modes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesignVariant {
    /// The design.
    pub design: Design,
    /// What it runs with.
    pub modes: Modes,
}

impl DesignVariant {
    fn new(design: Design, modes: Modes) -> DesignVariant {
        DesignVariant { design, modes }
    }

    /// The subject running `script`.
    pub fn subject(&self, script: &Script) -> DesignSubject {
        self.design
            .subject(script, Storage::Memory)
            .with_modes(self.modes.clone())
    }

    /// The row title (the subject's name).
    pub fn title(&self) -> String {
        // The title does not depend on the job.
        let script = Script {
            name: String::new(),
            replies: vec![Vec::new()],
        };
        sweep::Subject::name(&self.subject(&script))
    }
}

/// A power-loss variant: `design`'s checkpoints written by `writer`, each
/// crash a power cut keeping what `state` says.
pub fn power(design: Design, writer: Writer, state: DiskState) -> DesignVariant {
    DesignVariant::new(
        design,
        Modes {
            power: Some(Power { writer, state }),
            ..Modes::default()
        },
    )
}

/// A person who answers the `k`-th question of each scenario wrong.
pub fn person(design: Design, k: u64) -> DesignVariant {
    DesignVariant::new(
        design,
        Modes {
            person: Person::WrongAt(k),
            ..Modes::default()
        },
    )
}

/// A model that answers a repeated question as `model` says; with `keys`,
/// the design also sends keys to a tracker that honours them (for `save once
/// per turn + keys`, which no design of the book chapter's table is).
pub fn model(design: Design, keys: bool, model: ModelBehaviour) -> DesignVariant {
    let keys = keys && !design.sends_keys();
    DesignVariant::new(
        design,
        Modes {
            model: Some(model),
            keys,
            ..Modes::default()
        },
    )
}

/// The changing-model variants of the reviewed snapshot: the design that
/// asks again after acting (save once per turn, without and with keys) and
/// two that save the reply first (+ idempotency keys, keys and markers).
pub fn model_variants() -> Vec<DesignVariant> {
    let mut v = Vec::new();
    for (design, keys) in [
        (Design::SaveOncePerTurn, false),
        (Design::SaveOncePerTurn, true),
        (Design::Keys, false),
        (Design::KeysMarkers, false),
    ] {
        for m in ModelBehaviour::ALL {
            v.push(model(design, keys, m));
        }
    }
    v
}

/// A log-backed tracker that crashes with the loop (at its own points as
/// well as the loop's) and restarts from its files, keeping keys as `layout`
/// says.
pub fn tracker_crash(design: Design, layout: tracker::LogLayout) -> DesignVariant {
    DesignVariant::new(
        design,
        Modes {
            tracker: Some(layout),
            ..Modes::default()
        },
    )
}

/// The crashing-tracker variants of the reviewed snapshot: all five designs
/// against the right log layout, and the two keyed ones against the layout
/// that keeps keys in the index only.
pub fn tracker_variants() -> Vec<DesignVariant> {
    let mut v: Vec<DesignVariant> = Design::ALL
        .into_iter()
        .map(|d| tracker_crash(d, tracker::LogLayout::KeysInLog))
        .collect();
    for d in [Design::Keys, Design::KeysMarkers] {
        v.push(tracker_crash(d, tracker::LogLayout::KeysInIndexOnly));
    }
    v
}

/// The most questions any scenario of the triage job's depth-2 sweep asks
/// (checked by the test): the person variants cover k = 1 up to it.
pub const MAX_QUESTIONS: u64 = 2;

/// The wrong-person variants of the reviewed snapshot: the two designs with
/// markers (the only ones that ask), k over every question a scenario asks.
pub fn person_variants() -> Vec<DesignVariant> {
    let mut v = Vec::new();
    for design in [Design::Markers, Design::KeysMarkers] {
        for k in 1..=MAX_QUESTIONS {
            v.push(person(design, k));
        }
    }
    v
}

/// The power-loss variants of the reviewed snapshot: every writer under every
/// crash state in the keyed design (a lost or torn checkpoint shows as a run
/// that stops on a corrupt file, or as repeated model calls), and the real
/// writer, the book chapter's setting and the missing directory fsync in the
/// keyless markers design too (a lost marker shows there as a duplicate).
pub fn power_variants() -> Vec<DesignVariant> {
    let mut v = Vec::new();
    for writer in WRITERS {
        for state in DiskState::ALL {
            v.push(power(Design::KeysMarkers, writer, state));
        }
    }
    for writer in [Writer::Real, Writer::SyncsOff, Writer::NoDirSync] {
        for state in DiskState::ALL {
            v.push(power(Design::Markers, writer, state));
        }
    }
    v
}

/// Every variant of the reviewed snapshot `snapshots/beyond.txt`, in its
/// order.
pub fn variants() -> Vec<DesignVariant> {
    let mut v = power_variants();
    v.extend(person_variants());
    v.extend(model_variants());
    v.extend(tracker_variants());
    v
}
