//! The crash state: what a crash keeps of the world, named once for every
//! crate that speaks of it (a directory that models power cuts, a sweep
//! that runs each scenario in one state).

use std::borrow::Cow;
use std::fmt;

/// What a crash keeps: [`CrashState::PROCESS`] (a process dies, the
/// operating system's page cache survives: every write is kept) or a state
/// a power-loss directory knows by name (`lose`, `torn`, …).
///
/// The set is open: this type only carries the name. `durable`'s testing
/// directories name their states in an enum that converts into this type
/// (`From`) and back (`TryFrom`); a sweep's subject lists the states it can
/// run in, and the sweep tells it the state of each life. A scenario's name
/// starts with its state (`lose: after rename#1 → mid-save#3`), except in
/// the process state, whose scenarios keep their plain names.
///
/// A name is non-empty and holds none of `:`, `→`, `->`, `#` and no leading
/// or trailing space, so a scenario's name parses back.
///
/// ```
/// use crashpoint::scope::CrashState;
///
/// let lose = CrashState::new("lose").unwrap();
/// assert_eq!(lose.to_string(), "lose");
/// assert!(CrashState::default().is_process());
/// assert!(CrashState::new("a: b").is_err());
/// ```
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

impl AsRef<CrashState> for CrashState {
    fn as_ref(&self) -> &CrashState {
        self
    }
}

impl fmt::Display for CrashState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A crash state's name that breaks the rules of [`CrashState::new`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadCrashState(pub String);

impl fmt::Display for BadCrashState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a crash state's name: expected a non-empty name without `:`, `→`, `->` or `#`",
            self.0
        )
    }
}

impl std::error::Error for BadCrashState {}

#[cfg(feature = "serde")]
impl serde::Serialize for CrashState {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for CrashState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        CrashState::new(s).map_err(serde::de::Error::custom)
    }
}
