//! The crash state: what a crash keeps of the world, a dimension of the sweep.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What a crash keeps: [`CrashState::PROCESS`] (a process dies, the
/// operating system's page cache survives: every write is kept) or a state
/// a subject's power-loss directories know by name (`lose`, `torn`, …).
///
/// The set is open: sweep only carries the name. A [`Subject`](crate::Subject)
/// lists the states it can run in ([`Subject::crash_states`](crate::Subject::crash_states)),
/// a [`Config`](crate::Config) picks some, and the runner tells the subject
/// the state of each life through its [`Boot`](crate::Boot),
/// so the subject's directories cut the power in that state when the next
/// life boots. A scenario's name starts with its state (`lose: after
/// rename#1 → mid-save#3`), except in the process state, whose scenarios
/// keep their plain names.
///
/// A name is non-empty and holds none of `:`, `→`, `#` and no leading or
/// trailing space, so a scenario's name parses back.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CrashState(Cow<'static, str>);

impl CrashState {
    /// A process crash: every write survives. The state of a sweep that asks
    /// for no other.
    pub const PROCESS: CrashState = CrashState(Cow::Borrowed("process"));

    /// The state named `name` (see the type's rules for names).
    pub fn new(name: impl Into<Cow<'static, str>>) -> Result<CrashState, BadCrashState> {
        let name = name.into();
        let ok = !name.is_empty()
            && name.trim() == name
            && !name.contains([':', '→', '#'])
            && !name.contains("->");
        if ok {
            Ok(CrashState(name))
        } else {
            Err(BadCrashState(name.into_owned()))
        }
    }

    /// A state named by a literal, for constants of a subject's own
    /// (`CrashState::named("lose")`). The name is not checked: one that
    /// breaks the rules makes scenario names that do not parse back.
    pub const fn named(name: &'static str) -> CrashState {
        CrashState(Cow::Borrowed(name))
    }

    /// The state's name.
    pub fn name(&self) -> &str {
        &self.0
    }

    /// Whether this is [`CrashState::PROCESS`].
    pub fn is_process(&self) -> bool {
        self.0 == "process"
    }
}

impl Default for CrashState {
    fn default() -> Self {
        CrashState::PROCESS
    }
}

impl fmt::Display for CrashState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A crash state's name that breaks the rules of [`CrashState::new`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} is not a crash state's name: expected a non-empty name without `:`, `→`, `->` or `#`"
)]
pub struct BadCrashState(pub String);

impl Serialize for CrashState {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CrashState {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CrashState::new(s).map_err(serde::de::Error::custom)
    }
}
