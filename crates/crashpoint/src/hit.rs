//! Hits: one pass over a point, written and parsed as `name#occurrence`.
//!
//! [`Hit`] is at the crate root too; this module adds the error of parsing
//! one, [`ParseHitError`].

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

/// One pass over a point during one scope: the point's name and which pass
/// it was (1-based) among the passes over that name in the scope.
///
/// Written and parsed as `name#occurrence`, e.g. `after rename#3`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Hit {
    /// The point's name, as given to [`point!`](crate::point).
    pub point: Cow<'static, str>,
    /// 1 for the first pass over this point in the scope, 2 for the second, …
    pub occurrence: u32,
}

impl Hit {
    /// A hit of `point` at its `occurrence`-th pass (1-based).
    pub fn new(point: impl Into<Cow<'static, str>>, occurrence: u32) -> Self {
        Hit {
            point: point.into(),
            occurrence,
        }
    }
}

impl fmt::Display for Hit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.point, self.occurrence)
    }
}

/// Why a string is not a [`Hit`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseHitError {
    input: String,
}

impl fmt::Display for ParseHitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a hit: expected `point name#occurrence` with occurrence ≥ 1, e.g. `mid-save#2`",
            self.input
        )
    }
}

impl std::error::Error for ParseHitError {}

impl FromStr for Hit {
    type Err = ParseHitError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseHitError {
            input: s.to_owned(),
        };
        let (name, n) = s.trim().rsplit_once('#').ok_or_else(err)?;
        let occurrence: u32 = n.parse().map_err(|_| err())?;
        if name.is_empty() || occurrence == 0 {
            return Err(err());
        }
        Ok(Hit::new(name.to_owned(), occurrence))
    }
}
