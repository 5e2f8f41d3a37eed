//! The scenario: the crash state, and which hit each life crashes at, by a
//! name that parses back.

use std::fmt;
use std::str::FromStr;

use crashpoint::{Hit, ParseHitError};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::crash_state::{BadCrashState, CrashState};

/// One crash hit per life, then a final life with no crash: `[]` is the
/// clean run, `[h1]` a single crash, `[h1, h2]` a double one; every crash
/// keeps what its [`CrashState`] says.
///
/// Written as its state, `: ` and its hits joined by ` → ` (`lose: tracker
/// accepted#2 → mid-save#1`), or `clean`; in the process state the prefix is
/// left out (`tracker accepted#2 → mid-save#1`). That text parses back, so
/// any scenario can be rerun by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scenario {
    /// What each crash keeps.
    pub state: CrashState,
    /// The hit each crashing life crashes at, in order.
    pub hits: Vec<Hit>,
}

impl Scenario {
    /// A scenario in the process state.
    pub fn new(hits: Vec<Hit>) -> Self {
        Scenario {
            state: CrashState::PROCESS,
            hits,
        }
    }

    /// `hits` crashed in `state`.
    pub fn in_state(state: CrashState, hits: Vec<Hit>) -> Self {
        Scenario { state, hits }
    }

    /// How many lives crash.
    pub fn depth(&self) -> usize {
        self.hits.len()
    }

    /// The hits alone, joined by ` → ` (or `clean`), without the state.
    pub fn hits_name(&self) -> String {
        if self.hits.is_empty() {
            return "clean".to_owned();
        }
        let names: Vec<String> = self.hits.iter().map(ToString::to_string).collect();
        names.join(" → ")
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.state.is_process() && !self.hits.is_empty() {
            write!(f, "{}: ", self.state)?;
        }
        f.write_str(&self.hits_name())
    }
}

/// Why a string is not a [`Scenario`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ParseScenarioError {
    /// One of its hits is not a hit.
    #[error(transparent)]
    Hit(#[from] ParseHitError),
    /// Its state's name is not a state's name.
    #[error(transparent)]
    State(#[from] BadCrashState),
}

impl FromStr for Scenario {
    type Err = ParseScenarioError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        // A hit's name may hold `:` too, but a state's never holds `#`: the
        // prefix is a state only if it comes before every `#`.
        let (state, rest) = match s.split_once(':') {
            Some((st, rest)) if !st.contains(['#', '→']) && !st.contains("->") => {
                (CrashState::new(st.trim().to_owned())?, rest.trim())
            }
            _ => (CrashState::PROCESS, s),
        };
        if rest.is_empty() || rest == "clean" {
            return Ok(Scenario::in_state(state, Vec::new()));
        }
        let hits = rest
            .split('→')
            .flat_map(|part| part.split("->"))
            .map(str::parse)
            .collect::<Result<Vec<Hit>, _>>()?;
        Ok(Scenario::in_state(state, hits))
    }
}

impl Serialize for Scenario {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Scenario {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}
