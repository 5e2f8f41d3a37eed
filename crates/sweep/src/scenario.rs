//! The scenario: the crash state, and which hit each life crashes at, by a
//! name that parses back. A scenario reruns by its name with
//! [`rerun`](crate::rerun).

use std::fmt;
use std::str::FromStr;

use crashpoint::hit::ParseHitError;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::crash_state::{BadCrashState, CrashState};

pub use crashpoint::Hit;

/// One crash hit per life, then a final life with no crash: `[]` is the
/// clean run, `[h1]` a single crash, `[h1, h2]` a double one; every crash
/// keeps what its [`CrashState`] says.
///
/// In a state that enumerates the disks a power cut may leave
/// ([`PowerCuts::enumerates`](crate::power::PowerCuts::enumerates)), each crash also
/// names the disk its cut keeps, by index among them ([`Scenario::disks`]),
/// so the name alone determines every disk of the scenario.
///
/// Written as its state, `: ` and its hits joined by ` → ` (`lose: tracker
/// accepted#2 → mid-save#1`), or `clean`; in the process state the prefix is
/// left out (`tracker accepted#2 → mid-save#1`); a chosen disk follows its
/// hit (`all: after rename#1 (disk 2) → mid-save#3 (disk 0)`). That text
/// parses back, so any scenario can be rerun by name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scenario {
    /// What each crash keeps.
    pub state: CrashState,
    /// The hit each crashing life crashes at, in order.
    pub hits: Vec<Hit>,
    /// In an enumerating state, the disk each crash's power cut keeps (an
    /// index among the disks it may leave, one per hit); empty otherwise.
    pub disks: Vec<u32>,
}

impl Scenario {
    /// A scenario in the process state.
    pub fn new(hits: Vec<Hit>) -> Self {
        Scenario {
            state: CrashState::PROCESS,
            hits,
            disks: Vec::new(),
        }
    }

    /// `hits` crashed in `state`.
    pub fn in_state(state: CrashState, hits: Vec<Hit>) -> Self {
        Scenario {
            state,
            hits,
            disks: Vec::new(),
        }
    }

    /// `hits` crashed in `state`, the `i`-th crash's power cut keeping disk
    /// `disks[i]` of those it may leave.
    pub fn with_disks(state: CrashState, hits: Vec<Hit>, disks: Vec<u32>) -> Self {
        Scenario { state, hits, disks }
    }

    /// The disk the power cut after the `crash`-th crash (1-based) keeps,
    /// if the scenario names one.
    pub fn disk_after(&self, crash: usize) -> Option<u32> {
        crash
            .checked_sub(1)
            .and_then(|i| self.disks.get(i))
            .copied()
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
        let names: Vec<String> = self
            .hits
            .iter()
            .enumerate()
            .map(|(i, h)| match self.disks.get(i) {
                Some(d) => format!("{h} (disk {d})"),
                None => h.to_string(),
            })
            .collect();
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
    /// Some of its hits name a disk and others do not, or a disk is not a
    /// number.
    #[error("{0:?}: every hit of an enumerating scenario names its disk as `(disk N)`")]
    Disk(String),
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
        let mut hits = Vec::new();
        let mut disks = Vec::new();
        for part in split_hits(rest) {
            let part = part.trim();
            let (hit, disk) = match part
                .strip_suffix(')')
                .and_then(|p| p.rsplit_once(" (disk "))
            {
                Some((hit, d)) => {
                    let d = d
                        .trim()
                        .parse::<u32>()
                        .map_err(|_| ParseScenarioError::Disk(part.to_owned()))?;
                    (hit, Some(d))
                }
                None => (part, None),
            };
            hits.push(hit.parse::<Hit>()?);
            disks.extend(disk);
        }
        if !disks.is_empty() && disks.len() != hits.len() {
            return Err(ParseScenarioError::Disk(rest.to_owned()));
        }
        Ok(Scenario::with_disks(state, hits, disks))
    }
}

/// `rest` cut at each arrow (`→` or `->`) with a space on either side, or
/// right after `#N` or `(disk N)`. An arrow between two other characters
/// is part of a point's name (an I/O point `rename a.tmp→a#1`).
fn split_hits(rest: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < rest.len() {
        let tail = &rest[i..];
        let arrow = if tail.starts_with('→') {
            '→'.len_utf8()
        } else if tail.starts_with("->") {
            2
        } else {
            0
        };
        let spaced = || {
            rest[..i].ends_with(char::is_whitespace)
                || rest[i + arrow..].starts_with(char::is_whitespace)
        };
        if arrow > 0 && (spaced() || ends_a_hit(&rest[start..i])) {
            parts.push(&rest[start..i]);
            start = i + arrow;
            i = start;
            continue;
        }
        i += tail.chars().next().map_or(1, char::len_utf8);
    }
    parts.push(&rest[start..]);
    parts
}

/// Whether `s` ends as a hit does: `#` and digits, or `(disk N)`.
fn ends_a_hit(s: &str) -> bool {
    let s = s.trim_end();
    if s.ends_with(')') {
        return s.contains(" (disk ");
    }
    let digits = s.len() - s.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    digits > 0 && s[..s.len() - digits].ends_with('#')
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrow_inside_a_point_name_is_part_of_the_name() {
        let sc: Scenario = "rename a.tmp→a#2 → write a#1".parse().unwrap();
        assert_eq!(
            sc.hits,
            vec![Hit::new("rename a.tmp→a", 2), Hit::new("write a", 1)]
        );
        assert_eq!(sc.to_string(), "rename a.tmp→a#2 → write a#1");
        let sc: Scenario = "a#1->b#2→c->d#3".parse().unwrap();
        assert_eq!(
            sc.hits,
            vec![Hit::new("a", 1), Hit::new("b", 2), Hit::new("c->d", 3)]
        );
        // A spaced arrow always separates: a hit without `#N` is refused.
        assert!("a → b#1".parse::<Scenario>().is_err());
        assert!("rename a→b → c#1".parse::<Scenario>().is_err());
        let sc: Scenario = "é#1 → ü→é#2".parse().unwrap();
        assert_eq!(sc.hits, vec![Hit::new("é", 1), Hit::new("ü→é", 2)]);
    }
}
