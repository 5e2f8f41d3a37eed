//! The scenario: which hit each life crashes at, by a name that parses back.

use std::fmt;
use std::str::FromStr;

use crashpoint::{Hit, ParseHitError};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One crash hit per life, then a final life with no crash: `[]` is the
/// clean run, `[h1]` a single crash, `[h1, h2]` a double one.
///
/// Written as its hits joined by ` → ` (`tracker accepted#2 → mid-save#1`),
/// or `clean`; that text parses back, so any scenario can be rerun by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scenario(pub Vec<Hit>);

impl Scenario {
    /// How many lives crash.
    pub fn depth(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("clean");
        }
        for (i, h) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" → ")?;
            }
            write!(f, "{h}")?;
        }
        Ok(())
    }
}

impl FromStr for Scenario {
    type Err = ParseHitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s == "clean" {
            return Ok(Scenario::default());
        }
        s.split('→')
            .flat_map(|part| part.split("->"))
            .map(str::parse)
            .collect::<Result<Vec<Hit>, _>>()
            .map(Scenario)
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
