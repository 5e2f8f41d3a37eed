//! Why a scenario failed, as a value: the report, the table and a command
//! line render it; nobody parses it back.

use std::fmt;
use std::time::Duration;

use crashpoint::Hit;
use serde::{Deserialize, Serialize};

/// Which life of a scenario: a crashing one (1-based) or the final one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WhichLife {
    /// The `n`-th life (1-based), which was to crash.
    Crashing(usize),
    /// The final life (its number, 1-based), which was to finish.
    Final(usize),
}

impl fmt::Display for WhichLife {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhichLife::Crashing(n) => write!(f, "life {n}"),
            WhichLife::Final(n) => write!(f, "final life {n}"),
        }
    }
}

/// Why a scenario failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Failure {
    /// A life finished before reaching the hit it was to crash at: the
    /// program passed fewer hits than the scenario's name says (a program
    /// whose hits differ between runs shows up here, or as flaky). The
    /// scenario is run once more; if it still does not fire, it is counted
    /// apart ([`Failure::is_unfired`]), not as a failure of the program.
    CrashDidNotFire {
        /// The life.
        life: WhichLife,
        /// The hit it was to crash at.
        #[serde(with = "hit_text")]
        target: Hit,
    },
    /// A life stopped with an error of the program's own.
    Stopped {
        /// The life.
        life: WhichLife,
        /// The hit it was to crash at (`None` for the final life).
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "opt_hit_text"
        )]
        before: Option<Hit>,
        /// The error, as the program wrote it.
        error: String,
    },
    /// A life panicked for real (not an injected crash).
    Panicked {
        /// The life.
        life: WhichLife,
        /// The panic's message.
        message: String,
    },
    /// The final life crashed at a point with no crash injected (a crash
    /// payload raised by the program itself).
    Uninjected {
        /// The life.
        life: WhichLife,
        /// Where.
        #[serde(with = "hit_text")]
        hit: Hit,
    },
    /// A life ran past the scenario time limit and was stopped at its next
    /// point ([`Config::scenario_timeout`](crate::Config::scenario_timeout)).
    Hung {
        /// The life.
        life: WhichLife,
        /// The last hit it passed: where it was stopped.
        #[serde(with = "hit_text")]
        last_hit: Hit,
        /// The limit, in milliseconds.
        limit_ms: u64,
    },
    /// Threads a life started in its scope still ran when it ended: a
    /// final life returned while they were at work (one passed a point
    /// after the return, or one ran on past a second's grace), or a life
    /// crashed and they ran on to the time limit without passing another
    /// point (a real crash stops every thread at once; a sweep can stop one
    /// only at its next point). Each of them was made to die at its next
    /// point, so what it would have done there never reaches the world the
    /// judge sees.
    Outlived {
        /// The life.
        life: WhichLife,
        /// The threads, each by its name (`the thread started at
        /// src/flush.rs:12`, `thread "flusher"`, or `an unnamed thread`).
        threads: Vec<String>,
    },
    /// The judge panicked.
    JudgePanicked {
        /// The panic's message.
        message: String,
    },
    /// A point fired inside the judge, with a crash payload.
    JudgeCrashed {
        /// Where.
        #[serde(with = "hit_text")]
        hit: Hit,
    },
    /// The judge counted a name no counter declares (a misspelt counter).
    UndeclaredCounter {
        /// The name counted.
        name: String,
    },
    /// The judge did not set a counter that must stay zero, so it cannot
    /// have been checked here (a branch of the judge that forgets it).
    RequiredNotSet {
        /// The counter's name.
        name: String,
    },
    /// Required counters are not zero (beyond their baseline).
    Broken {
        /// Each broken counter's title and value.
        counters: Vec<(String, u64)>,
        /// The judge's notes.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
    },
    /// The scenario failed, was run again, and gave another result: the
    /// program does not behave the same way twice. Neither a pass nor a fail.
    Flaky {
        /// The first run's failure.
        first: Box<Failure>,
        /// The rerun's failure, or `None` if it passed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        again: Option<Box<Failure>>,
    },
}

impl Failure {
    /// The cause in a few words, for a line of a table: a broken counter's
    /// `dups = 1` without the notes, an error's own message without the
    /// life it stopped, a flaky scenario's first cause.
    pub fn cause(&self) -> String {
        match self {
            Failure::Stopped { error, .. } => error.clone(),
            Failure::Broken { counters, .. } => broken_counters(counters),
            Failure::Flaky { first, .. } => format!("flaky: {}", first.cause()),
            other => other.to_string(),
        }
    }

    /// Whether the scenario is flaky rather than failed.
    pub fn is_flaky(&self) -> bool {
        matches!(self, Failure::Flaky { .. })
    }

    /// Whether the scenario's crash never fired ([`Failure::CrashDidNotFire`]):
    /// the program passed fewer hits than in its clean runs, so the scenario
    /// tested nothing. Told apart from a failure of the program.
    pub fn is_unfired(&self) -> bool {
        matches!(self, Failure::CrashDidNotFire { .. })
    }

    /// A time limit in milliseconds, for [`Failure::Hung`].
    pub(crate) fn millis(d: Duration) -> u64 {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    }
}

fn broken_counters(counters: &[(String, u64)]) -> String {
    let parts: Vec<String> = counters.iter().map(|(t, v)| format!("{t} = {v}")).collect();
    parts.join(", ")
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::CrashDidNotFire { life, target } => write!(
                f,
                "{life}: finished before reaching {target}: the crash did not fire"
            ),
            Failure::Stopped {
                life,
                before: Some(target),
                error,
            } => write!(
                f,
                "{life}: stopped with an error before reaching {target}: {error}"
            ),
            Failure::Stopped {
                life,
                before: None,
                error,
            } => write!(f, "{life}: stopped with an error: {error}"),
            Failure::Panicked { life, message } => write!(f, "{life}: panicked: {message}"),
            Failure::Uninjected { life, hit } => {
                write!(f, "{life}: crashed at {hit} with no crash injected")
            }
            Failure::Hung {
                life,
                last_hit,
                limit_ms,
            } => write!(
                f,
                "{life}: hung: still running after the scenario time limit of {limit_ms} ms; stopped at {last_hit}"
            ),
            Failure::Outlived {
                life: life @ WhichLife::Final(_),
                threads,
            } => write!(
                f,
                "{life}: returned while threads it started in its scope still ran: {}; join every thread a life starts before it returns",
                threads.join(", ")
            ),
            Failure::Outlived { life, threads } => write!(
                f,
                "{life}: crashed, and threads it started in its scope still ran at the time limit without passing another point: {}; a real crash stops them at once, a sweep only at their next point",
                threads.join(", ")
            ),
            Failure::JudgePanicked { message } => write!(f, "the judge panicked: {message}"),
            Failure::JudgeCrashed { hit } => write!(f, "the judge crashed at {hit}"),
            Failure::UndeclaredCounter { name } => write!(
                f,
                "the judge counted {name:?}, which no counter declares (a misspelt counter?)"
            ),
            Failure::RequiredNotSet { name } => write!(
                f,
                "the judge did not set the required counter {name:?} for this scenario, so it \
                 was not checked: set it in every branch of the judge (to 0 when nothing is wrong)"
            ),
            Failure::Broken { counters, notes } => {
                f.write_str(&broken_counters(counters))?;
                for n in notes {
                    write!(f, "; {n}")?;
                }
                Ok(())
            }
            Failure::Flaky { first, again } => match again {
                Some(a) => write!(f, "flaky: failed with {first}, then with {a} when run again"),
                None => write!(f, "flaky: failed with {first}, then passed when run again"),
            },
        }
    }
}

/// A hit as its text (`mid-save#2`) in JSON.
mod hit_text {
    use crashpoint::Hit;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(h: &Hit, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(h)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Hit, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// An optional hit as its text in JSON.
mod opt_hit_text {
    use crashpoint::Hit;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(h: &Option<Hit>, s: S) -> Result<S::Ok, S::Error> {
        match h {
            Some(h) => s.collect_str(h),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Hit>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|t| t.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_life_reads_as_its_number() {
        assert_eq!(WhichLife::Crashing(2).to_string(), "life 2");
        assert_eq!(WhichLife::Final(3).to_string(), "final life 3");
    }

    #[test]
    fn the_cause_is_the_short_form_of_each_failure() {
        let stopped = Failure::Stopped {
            life: WhichLife::Final(2),
            before: None,
            error: "disk full".into(),
        };
        assert_eq!(stopped.cause(), "disk full");
        assert_eq!(
            stopped.to_string(),
            "final life 2: stopped with an error: disk full"
        );
        let broken = Failure::Broken {
            counters: vec![("dups".into(), 1), ("lost".into(), 2)],
            notes: vec!["issue filed twice".into()],
        };
        assert_eq!(broken.cause(), "dups = 1, lost = 2");
        assert_eq!(broken.to_string(), "dups = 1, lost = 2; issue filed twice");
        let flaky = Failure::Flaky {
            first: Box::new(broken),
            again: None,
        };
        assert_eq!(flaky.cause(), "flaky: dups = 1, lost = 2");
        let judge = Failure::JudgePanicked {
            message: "boom".into(),
        };
        assert_eq!(judge.cause(), "the judge panicked: boom");
        assert!(flaky.is_flaky() && !judge.is_flaky());
    }

    #[test]
    fn limits_are_whole_milliseconds() {
        assert_eq!(Failure::millis(Duration::from_micros(2_500_900)), 2500);
        assert_eq!(Failure::millis(Duration::MAX), u64::MAX);
    }

    /// Hits travel as their text and come back as the same hits.
    #[test]
    fn failures_round_trip_through_json() {
        let hit = |s: &str| s.parse::<Hit>().unwrap();
        for f in [
            Failure::Stopped {
                life: WhichLife::Crashing(1),
                before: Some(hit("mid-save#2")),
                error: "no".into(),
            },
            Failure::Stopped {
                life: WhichLife::Final(2),
                before: None,
                error: "no".into(),
            },
            Failure::Hung {
                life: WhichLife::Final(1),
                last_hit: hit("sent#3"),
                limit_ms: 60_000,
            },
        ] {
            let text = serde_json::to_string(&f).unwrap();
            let back: Failure = serde_json::from_str(&text).unwrap();
            assert_eq!(back, f, "{text}");
        }
        let text = r#"{"kind":"stopped","life":{"final":1},"before":"a#1","error":"x"}"#;
        let back: Failure = serde_json::from_str(text).unwrap();
        assert!(matches!(back, Failure::Stopped { before: Some(h), .. } if h.to_string() == "a#1"));
    }
}
