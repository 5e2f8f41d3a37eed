//! Events: one per step of the loop, for a command to print, log or act on.
//!
//! An [`Observer`] receives each [`Event`]; any `Fn(&Event) + Send` is one.
//! An event shows as one line a person reads (`Display`), and [`Print`]
//! writes those lines to stderr or any writer:
//!
//! ```
//! use agent::observe::{Event, Print};
//!
//! let event = Event::ModelCall { turn: 2 };
//! assert_eq!(event.to_string(), "turn 2: asking the model");
//! let print = Print::stderr(); // for Agent::with_observer
//! # drop(print);
//! ```

use std::fmt;
use std::io::Write;
use std::sync::Mutex;

use crate::state::{Phase, ToolCall, Usage};

use crate::approve::Decision;

/// A rung of the resolution ladder: how a marked call without a result (an
/// uncertain call) is settled. The one word for it across the workspace:
/// the loop's [`Event::Ladder`] names the rung it tried, the person's
/// [`Answer`](crate::approve::Answer) is rung 3's, and the designs' outcome
/// labels (`designs::labels::Settlement::Rung`) name the rung that settled
/// a crash's call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Rung {
    /// 1: run it again, because a repeat is harmless.
    Rerun,
    /// 2: ask the service through the tool's lookup.
    Lookup,
    /// 3: ask a person.
    Person,
}

impl Rung {
    /// Every rung, from the bottom of the ladder.
    pub const ALL: [Rung; 3] = [Rung::Rerun, Rung::Lookup, Rung::Person];

    /// Its short name: `rerun`, `lookup`, `person`.
    pub fn slug(self) -> &'static str {
        match self {
            Rung::Rerun => "rerun",
            Rung::Lookup => "lookup",
            Rung::Person => "person",
        }
    }
}

/// How a tool call came back, before its result is saved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Returned {
    /// With a result (which may report a failure the model sees).
    Result {
        /// The result text.
        output: String,
        /// Whether it reports a failure.
        is_error: bool,
    },
    /// With an unknown outcome: the call goes up the ladder.
    Unknown(String),
}

/// One step of the loop. Events arrive in the order the steps happen; a
/// save's event comes after the save.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    /// A fresh run started; its start save is done.
    Started {
        /// The run ID.
        run: String,
    },
    /// A run was resumed from its checkpoint; the restart is counted and
    /// saved.
    Resumed {
        /// The run ID.
        run: String,
        /// The phase it resumes in.
        phase: Phase,
        /// Restarts so far, this one included.
        resumes: u32,
        /// Turns taken so far.
        turns: u32,
    },
    /// The model is being called for this turn (1-based).
    ModelCall {
        /// The turn.
        turn: u32,
    },
    /// The model's reply is saved, its calls fixed before any of them runs.
    ReplySaved {
        /// The turn it answers.
        turn: u32,
        /// Its calls (none: it is the final answer).
        calls: Vec<ToolCall>,
        /// What it cost.
        usage: Usage,
    },
    /// A person decided on a gated call.
    Decided {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The decision.
        decision: Decision,
    },
    /// An attempt marker is saved; the call goes out next.
    MarkerSaved {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The idempotency key sent with it, if any.
        key: Option<String>,
        /// Whether a person approved it.
        approved: bool,
    },
    /// A tool is being called.
    ToolCall {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The idempotency key, in the harness's channel.
        key: Option<String>,
        /// The model's arguments.
        args: String,
        /// Whether this is a rerun (a retry after an unknown outcome, or
        /// the ladder's decision).
        rerun: bool,
    },
    /// A tool returned; its result is not saved yet. A command that wants to
    /// die in the window no checkpoint can close dies here.
    ToolReturned {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// What came back.
        returned: Returned,
    },
    /// A call's result is saved.
    ResultSaved {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The result text.
        output: String,
        /// Whether it reports a failure.
        is_error: bool,
    },
    /// A rung of the ladder was tried for a marked call without a result.
    Ladder {
        /// The call ID.
        call: String,
        /// The tool.
        tool: String,
        /// The rung.
        rung: Rung,
        /// Whether this rung settled it (else the question went up).
        settled: bool,
        /// What the rung found, in words.
        why: String,
    },
    /// The run paused, waiting on a person; the pause is saved.
    Paused {
        /// The call IDs waited on.
        waiting: Vec<String>,
    },
    /// The run was cancelled; where it stopped is saved.
    Cancelled {
        /// The saved phase.
        phase: Phase,
    },
    /// The run is done; the answer is saved.
    Done {
        /// The answer.
        answer: String,
    },
}

/// Receives the loop's [`Event`]s. Any `Fn(&Event) + Send` is one.
pub trait Observer: Send {
    /// One step happened.
    fn event(&self, event: &Event);
}

impl<F: Fn(&Event) + Send> Observer for F {
    fn event(&self, event: &Event) {
        self(event)
    }
}

/// Ignores every event.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Observer for Quiet {
    fn event(&self, _: &Event) {}
}

/// `text` on one line (line breaks become spaces), cut to `max`
/// characters with `…`: how an [`Event`] prints a long value, for callers
/// that print their own lines the same way.
///
/// ```
/// assert_eq!(agent::observe::short("a\nb", 10), "a b");
/// assert_eq!(agent::observe::short("abcdef", 4), "abc…");
/// ```
pub fn short(text: &str, max: usize) -> String {
    let line: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if line.chars().count() <= max {
        line
    } else {
        let mut cut: String = line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// How long a value (arguments, a result, an answer) may be on a line.
const SHOWN: usize = 120;

fn key_text(key: &Option<String>) -> String {
    match key {
        Some(k) => format!(" with key {k}"),
        None => String::new(),
    }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The line of [`Event::ToolReturned`].
fn returned_line(
    f: &mut fmt::Formatter<'_>,
    call: &str,
    tool: &str,
    returned: &Returned,
) -> fmt::Result {
    match returned {
        Returned::Result {
            output,
            is_error: false,
        } => write!(f, "call {call} ({tool}) returned {}", short(output, SHOWN)),
        Returned::Result {
            output,
            is_error: true,
        } => write!(
            f,
            "call {call} ({tool}) returned an error: {}",
            short(output, SHOWN)
        ),
        Returned::Unknown(why) => write!(
            f,
            "call {call} ({tool}) outcome unknown: {}",
            short(why, SHOWN)
        ),
    }
}

impl fmt::Display for Rung {
    /// `1 (rerun if harmless)`, `2 (ask the service)`, `3 (ask a person)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Rung::Rerun => "1 (rerun if harmless)",
            Rung::Lookup => "2 (ask the service)",
            Rung::Person => "3 (ask a person)",
        })
    }
}

impl fmt::Display for Event {
    /// One line a person reads, without a line break; long values (a
    /// call's arguments, a result, the answer) are cut to 120 characters.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Started { run } => write!(f, "run {run} started"),
            Event::Resumed {
                run,
                phase,
                resumes,
                turns,
            } => write!(
                f,
                "run {run} resumed in phase {phase} after {} (restart {resumes})",
                plural(*turns as usize, "turn")
            ),
            Event::ModelCall { turn } => write!(f, "turn {turn}: asking the model"),
            Event::ReplySaved { turn, calls, usage } => {
                write!(f, "turn {turn}: reply saved, ")?;
                if calls.is_empty() {
                    f.write_str("the final answer")?;
                } else {
                    let list: Vec<String> = calls
                        .iter()
                        .map(|c| format!("{} {}", c.tool, c.id))
                        .collect();
                    write!(f, "{}: {}", plural(calls.len(), "call"), list.join(", "))?;
                }
                write!(
                    f,
                    " ({} tokens, ${:.4})",
                    usage.input_tokens.saturating_add(usage.output_tokens),
                    usage.dollars
                )
            }
            Event::Decided { .. }
            | Event::MarkerSaved { .. }
            | Event::ToolCall { .. }
            | Event::ToolReturned { .. }
            | Event::ResultSaved { .. }
            | Event::Ladder { .. } => self.fmt_call(f),
            Event::Paused { waiting } => write!(
                f,
                "run paused, waiting on a person for call {}",
                waiting.join(", ")
            ),
            Event::Cancelled { phase } => write!(f, "run cancelled, saved in phase {phase}"),
            Event::Done { answer } => write!(f, "done: {}", short(answer, SHOWN)),
        }
    }
}

impl Event {
    /// The line of an event of one call (see `fmt`).
    fn fmt_call(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Decided {
                call,
                tool,
                decision,
            } => match decision {
                Decision::Approve => write!(f, "call {call} ({tool}) approved"),
                Decision::Deny(why) => {
                    write!(f, "call {call} ({tool}) denied: {}", short(why, SHOWN))
                }
                Decision::Later => write!(f, "call {call} ({tool}) left for later"),
            },
            Event::MarkerSaved {
                call,
                tool,
                key,
                approved,
            } => write!(
                f,
                "call {call} ({tool}) marked{}{}, sending it",
                if *approved { " as approved" } else { "" },
                key_text(key)
            ),
            Event::ToolCall {
                call,
                tool,
                key,
                args,
                rerun,
            } => write!(
                f,
                "call {call}: {}{tool} {}{}",
                if *rerun { "again " } else { "" },
                short(args, SHOWN),
                key_text(key)
            ),
            Event::ToolReturned {
                call,
                tool,
                returned,
            } => returned_line(f, call, tool, returned),
            Event::ResultSaved {
                call,
                tool,
                is_error,
                ..
            } => write!(
                f,
                "call {call} ({tool}) {} saved",
                if *is_error { "error result" } else { "result" }
            ),
            Event::Ladder {
                call,
                tool,
                rung,
                settled,
                why,
            } => write!(
                f,
                "call {call} ({tool}) rung {rung}: {}: {}",
                if *settled { "settled" } else { "cannot tell" },
                short(why, SHOWN)
            ),
            _ => unreachable!("Event::fmt hands only a call's events to fmt_call"),
        }
    }
}

/// An observer that prints each event as its line ([`Event`]'s `Display`)
/// to a writer: stderr ([`Print::stderr`], which leaves stdout to the
/// program's own output) or any [`Write`] ([`Print::new`]). A failed write
/// is ignored: printing is not worth stopping a run for.
pub struct Print<W> {
    out: Mutex<W>,
    prefix: String,
}

impl<W> fmt::Debug for Print<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Print")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl Print<std::io::Stderr> {
    /// Print to stderr.
    pub fn stderr() -> Print<std::io::Stderr> {
        Print::new(std::io::stderr())
    }
}

impl<W: Write + Send> Print<W> {
    /// Print to `out`.
    pub fn new(out: W) -> Print<W> {
        Print {
            out: Mutex::new(out),
            prefix: String::new(),
        }
    }

    /// Start every line with `prefix` (e.g. `"agent: "`).
    pub fn with_prefix(mut self, prefix: impl Into<String>) -> Print<W> {
        self.prefix = prefix.into();
        self
    }

    /// The writer, once the run is over (a test reads what was printed).
    pub fn into_inner(self) -> W {
        self.out.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl<W: Write + Send> Observer for Print<W> {
    fn event(&self, event: &Event) {
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ignored = writeln!(out, "{}{event}", self.prefix).and_then(|()| out.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, tool: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            tool: tool.into(),
            args: "{}".into(),
        }
    }

    /// Every event reads as one line of words.
    #[test]
    fn every_event_shows_as_one_readable_line() {
        let s = |c: &str| c.to_owned();
        let cases: Vec<(Event, &str)> = vec![
            (Event::Started { run: s("r1") }, "run r1 started"),
            (
                Event::Resumed {
                    run: s("r1"),
                    phase: Phase::Tools,
                    resumes: 2,
                    turns: 1,
                },
                "run r1 resumed in phase tools after 1 turn (restart 2)",
            ),
            (Event::ModelCall { turn: 3 }, "turn 3: asking the model"),
            (
                Event::ReplySaved {
                    turn: 1,
                    calls: vec![call("c1", "search"), call("c2", "issue_file")],
                    usage: Usage {
                        input_tokens: 100,
                        output_tokens: 20,
                        dollars: 0.0012,
                    },
                },
                "turn 1: reply saved, 2 calls: search c1, issue_file c2 (120 tokens, $0.0012)",
            ),
            (
                Event::ReplySaved {
                    turn: 2,
                    calls: Vec::new(),
                    usage: Usage::default(),
                },
                "turn 2: reply saved, the final answer (0 tokens, $0.0000)",
            ),
            (
                Event::Decided {
                    call: s("c2"),
                    tool: s("issue_file"),
                    decision: Decision::Approve,
                },
                "call c2 (issue_file) approved",
            ),
            (
                Event::Decided {
                    call: s("c2"),
                    tool: s("issue_file"),
                    decision: Decision::Deny(s("not\ntoday")),
                },
                "call c2 (issue_file) denied: not today",
            ),
            (
                Event::Decided {
                    call: s("c2"),
                    tool: s("issue_file"),
                    decision: Decision::Later,
                },
                "call c2 (issue_file) left for later",
            ),
            (
                Event::MarkerSaved {
                    call: s("c2"),
                    tool: s("issue_file"),
                    key: Some(s("r1/c2")),
                    approved: true,
                },
                "call c2 (issue_file) marked as approved with key r1/c2, sending it",
            ),
            (
                Event::MarkerSaved {
                    call: s("c3"),
                    tool: s("code_patch"),
                    key: None,
                    approved: false,
                },
                "call c3 (code_patch) marked, sending it",
            ),
            (
                Event::ToolCall {
                    call: s("c2"),
                    tool: s("issue_file"),
                    key: Some(s("r1/c2")),
                    args: s(r#"{"title":"crash"}"#),
                    rerun: true,
                },
                r#"call c2: again issue_file {"title":"crash"} with key r1/c2"#,
            ),
            (
                Event::ToolReturned {
                    call: s("c2"),
                    tool: s("issue_file"),
                    returned: Returned::Result {
                        output: s(r#"{"issue":1}"#),
                        is_error: false,
                    },
                },
                r#"call c2 (issue_file) returned {"issue":1}"#,
            ),
            (
                Event::ToolReturned {
                    call: s("c2"),
                    tool: s("issue_file"),
                    returned: Returned::Result {
                        output: s("no"),
                        is_error: true,
                    },
                },
                "call c2 (issue_file) returned an error: no",
            ),
            (
                Event::ToolReturned {
                    call: s("c2"),
                    tool: s("issue_file"),
                    returned: Returned::Unknown(s("cut")),
                },
                "call c2 (issue_file) outcome unknown: cut",
            ),
            (
                Event::ResultSaved {
                    call: s("c2"),
                    tool: s("issue_file"),
                    output: s("x"),
                    is_error: false,
                },
                "call c2 (issue_file) result saved",
            ),
            (
                Event::ResultSaved {
                    call: s("c2"),
                    tool: s("issue_file"),
                    output: s("x"),
                    is_error: true,
                },
                "call c2 (issue_file) error result saved",
            ),
            (
                Event::Ladder {
                    call: s("c2"),
                    tool: s("issue_file"),
                    rung: Rung::Lookup,
                    settled: true,
                    why: s("the lookup found it"),
                },
                "call c2 (issue_file) rung 2 (ask the service): settled: the lookup found it",
            ),
            (
                Event::Ladder {
                    call: s("c2"),
                    tool: s("issue_file"),
                    rung: Rung::Person,
                    settled: false,
                    why: s("later"),
                },
                "call c2 (issue_file) rung 3 (ask a person): cannot tell: later",
            ),
            (
                Event::Paused {
                    waiting: vec![s("c2"), s("c3")],
                },
                "run paused, waiting on a person for call c2, c3",
            ),
            (
                Event::Cancelled {
                    phase: Phase::Model,
                },
                "run cancelled, saved in phase model",
            ),
            (
                Event::Done {
                    answer: s("Filed #1."),
                },
                "done: Filed #1.",
            ),
        ];
        for (event, line) in cases {
            assert_eq!(event.to_string(), line, "{event:?}");
        }
        assert_eq!(Rung::Rerun.to_string(), "1 (rerun if harmless)");
    }

    /// A long value is cut, and no value breaks the line.
    #[test]
    fn a_long_or_multiline_value_stays_on_one_short_line() {
        let answer = "line\n".repeat(100);
        let shown = Event::Done { answer }.to_string();
        assert!(!shown.contains('\n'), "{shown}");
        assert_eq!(shown.chars().count(), "done: ".len() + SHOWN, "{shown}");
        assert!(shown.ends_with('…'), "{shown}");
    }

    /// `Print` writes one line per event, with its prefix.
    #[test]
    fn print_writes_one_line_per_event() {
        let print = Print::new(Vec::new()).with_prefix("agent: ");
        print.event(&Event::Started { run: "r1".into() });
        print.event(&Event::Done {
            answer: "ok".into(),
        });
        assert_eq!(
            String::from_utf8(print.into_inner()).unwrap(),
            "agent: run r1 started\nagent: done: ok\n"
        );
        assert_eq!(
            format!("{:?}", Print::stderr()),
            r#"Print { prefix: "", .. }"#
        );
    }
}
