//! The harder worlds a design can run in, beyond the book chapter's sweep:
//! power cuts with the real checkpoint writer or a mutation of it, a person
//! who answers wrong, a model that answers a repeated question differently,
//! keys added to a design without them, a tracker that crashes. Every option
//! defaults to the chapter's behaviour, so `Modes::default()` is the
//! chapter's sweep, row for row.

/// Everything a design can be run with beyond the book chapter's sweep.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Modes {
    /// Checkpoints live in a [`PowerDir`](durable::testing::PowerDir) whose crashes are power cuts in a
    /// chosen [`DiskState`](durable::testing::DiskState), written by a chosen [`Writer`]. `None`: the
    /// book chapter's world (a panic is the only crash, saves unsynced).
    pub power: Option<Power>,
    /// Who settles a call whose outcome the loop cannot know.
    pub person: Person,
    /// `None`: the book chapter's scripted model, judged by exact text.
    /// `Some`: the given model, judged by intent (a reworded issue or comment
    /// counts as the one it stands for) with a column for reworded records.
    pub model: Option<ModelBehaviour>,
    /// Send idempotency keys (to a tracker that honours them) even if the
    /// design does not: `save once per turn + keys`.
    pub keys: bool,
    /// `None`: the book chapter's tracker, in memory, which never crashes.
    /// `Some`: a log-backed tracker ([`tracker::Tracker::open_log_with`])
    /// with its own crash points, restarted from its files after every crash
    /// (the tracker's or the loop's: one crash takes both down).
    pub tracker: Option<tracker::LogLayout>,
}

/// How the model answers when it is asked again for a turn: after a crash
/// lost the reply it gave, or the turn's results.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ModelBehaviour {
    /// The same reply with the same call IDs (the book chapter's scripted
    /// model).
    #[default]
    Scripted,
    /// The same calls with new call IDs (`call-1~2` on the second ask), as a
    /// real provider mints fresh IDs for every reply.
    NewIds,
    /// A different set of calls: new IDs, the calls in the opposite order,
    /// and every title and body reworded (`… (take 2)`).
    NewCalls,
}

impl ModelBehaviour {
    /// Every model, the scripted one first.
    pub const ALL: [ModelBehaviour; 3] = [
        ModelBehaviour::Scripted,
        ModelBehaviour::NewIds,
        ModelBehaviour::NewCalls,
    ];

    /// The command-line name.
    pub fn slug(self) -> &'static str {
        match self {
            ModelBehaviour::Scripted => "scripted",
            ModelBehaviour::NewIds => "new-ids",
            ModelBehaviour::NewCalls => "new-calls",
        }
    }

    /// A short description for row titles.
    pub fn title(self) -> &'static str {
        match self {
            ModelBehaviour::Scripted => "model repeats itself",
            ModelBehaviour::NewIds => "model: new call IDs",
            ModelBehaviour::NewCalls => "model: other calls",
        }
    }
}

/// The person at the top of the resolution ladder: asked whether a marked
/// call took effect, when a rerun would not be harmless.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Person {
    /// Always answers right (the book chapter's person).
    #[default]
    Right,
    /// Answers the `k`-th question of the scenario (1-based, counted over
    /// every life) wrong, and every other right: "it did not happen" when it
    /// did (the loop sends it again), "it happened" when it did not (the
    /// loop records it as done, with no answer from the tracker).
    WrongAt(u64),
}

pub use durable::testing::{Power, Writer};

/// The writers the designs' power-loss tables show, the real one first
/// ([`Writer::RemoveFirst`] is left out: only the enumerated state catches
/// it).
pub const WRITERS: [Writer; 5] = [
    Writer::Real,
    Writer::SyncsOff,
    Writer::NoFileSync,
    Writer::NoDirSync,
    Writer::InPlace,
];

pub use durable::testing::MID_OVERWRITE;
