//! A variant's name by composition: the dimensions a subject can be run
//! with ([`Dim`]) and one subject with a value for some of them ([`Spec`]),
//! written as its command-line flags. Both the registry (which names every
//! variant this way) and the parsing and checking of requests use it.

use std::collections::BTreeMap;
use std::fmt;

/// A dimension a subject can be run with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dim {
    Situation,
    CrashState,
    Mutation,
    PersonWrong,
    Model,
    PlusKeys,
    Tracker,
}

impl Dim {
    /// Every dimension, in the order flags are written.
    pub const ALL: [Dim; 7] = [
        Dim::Situation,
        Dim::CrashState,
        Dim::Mutation,
        Dim::PersonWrong,
        Dim::Model,
        Dim::PlusKeys,
        Dim::Tracker,
    ];

    /// The flag without its dashes, and the key in a sweep definition.
    pub fn key(self) -> &'static str {
        match self {
            Dim::Situation => "situation",
            Dim::CrashState => "crash-state",
            Dim::Mutation => "mutation",
            Dim::PersonWrong => "person-wrong",
            Dim::Model => "model",
            Dim::PlusKeys => "plus-keys",
            Dim::Tracker => "tracker",
        }
    }

    /// The command-line flag.
    pub fn flag(self) -> String {
        format!("--{}", self.key())
    }

    /// What a value of it is called in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Dim::Situation => "situation",
            Dim::CrashState => "crash state",
            Dim::Mutation => "mutation",
            Dim::PersonWrong => "question number",
            Dim::Model => "model",
            Dim::PlusKeys => "plus-keys",
            Dim::Tracker => "tracker",
        }
    }

    pub(crate) fn value_name(self) -> &'static str {
        match self {
            Dim::Situation | Dim::Mutation | Dim::Model | Dim::Tracker => " NAME",
            Dim::CrashState => " STATE",
            Dim::PersonWrong => " K",
            Dim::PlusKeys => "",
        }
    }

    pub(crate) fn about(self) -> &'static str {
        match self {
            Dim::Situation => "the loop in a harder situation",
            Dim::CrashState => "each crash a power cut, keeping this much of what was not synced",
            Dim::Mutation => "a faulty checkpoint writer",
            Dim::PersonWrong => "a person who answers question K of each scenario wrong",
            Dim::Model => "how the model answers when asked again",
            Dim::PlusKeys => "send idempotency keys the design does not send",
            Dim::Tracker => "a tracker that crashes too, keeping keys in its log or its index",
        }
    }

    /// A switch takes no value (`--plus-keys`).
    pub fn is_switch(self) -> bool {
        self == Dim::PlusKeys
    }

    pub(crate) fn by_key(key: &str) -> Option<Dim> {
        Dim::ALL.into_iter().find(|d| d.key() == key)
    }
}

/// The value a switch has when it is on.
pub const ON: &str = "yes";

/// One variant by composition: a subject and the dimensions it runs with.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Spec {
    pub subject: String,
    pub dims: BTreeMap<Dim, String>,
}

impl Spec {
    pub fn new(subject: &str) -> Spec {
        Spec {
            subject: subject.to_owned(),
            dims: BTreeMap::new(),
        }
    }

    /// This spec, also with `dim` set to `value`.
    pub fn with(mut self, dim: Dim, value: &str) -> Spec {
        self.dims.insert(dim, value.to_owned());
        self
    }

    /// The command-line arguments that name it: `--variant loop-keyed
    /// --crash-state lose`.
    pub fn command(&self) -> String {
        format!("--variant {self}")
    }
}

/// `loop-keyed --crash-state lose --mutation no-dir-fsync`.
impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.subject)?;
        for (d, v) in &self.dims {
            if d.is_switch() {
                write!(f, " {}", d.flag())?;
            } else {
                write!(f, " {} {v}", d.flag())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(subject: &str, dims: &[(Dim, &str)]) -> Spec {
        dims.iter()
            .fold(Spec::new(subject), |s, (d, v)| s.with(*d, v))
    }

    #[test]
    fn a_spec_is_written_as_its_flags() {
        let s = spec(
            "loop-keyed",
            &[(Dim::Mutation, "no-dir-fsync"), (Dim::CrashState, "lose")],
        );
        assert_eq!(
            s.to_string(),
            "loop-keyed --crash-state lose --mutation no-dir-fsync"
        );
        let k = spec("markers", &[(Dim::PlusKeys, ON), (Dim::Model, "new-ids")]);
        assert_eq!(k.command(), "--variant markers --model new-ids --plus-keys");
    }
}
