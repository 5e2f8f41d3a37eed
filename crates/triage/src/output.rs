//! What the command prints: one readable line per step, or one JSON object
//! per line with `--json`.
//!
//! Human lines go to stdout as `<tag> <text>` with the tag padded to one
//! width, so a run reads as a column of steps. Errors go to stderr (and, with
//! `--json`, also to stdout as an `error` object, so a machine reading stdout
//! always gets a last line saying how the command ended).

use std::io::{self, Write};
use std::sync::{Mutex, MutexGuard};

use agent::approve::Decision;
use agent::observe::{Event, Returned, Rung};
use agent::state::Phase;
use serde_json::{json, Value};

use crate::checks::Verdict;
use crate::exit::Failure;

/// How long a value (arguments, a result) may be on a human line.
const SHOWN_CHARS: usize = 100;

/// The printer, shared by the command and the loop's observer.
#[derive(Debug)]
pub struct Printer {
    json: bool,
    /// The run being worked on, once known: named in a JSON error.
    pub run: Option<String>,
    /// Why the run paused, as the events said: set by a "later" decision or
    /// an unanswered ladder question.
    pub pause: Option<PauseCause>,
    /// Why the ladder's lower rungs could not decide, for the question.
    ladder_why: Vec<String>,
}

/// What the run waits on, for the exit message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PauseCause {
    /// A gated call got "later" (or nobody to ask).
    Approval {
        /// The tool.
        tool: String,
        /// The call.
        call: String,
    },
    /// A marked call nothing could settle: the ladder's last rung.
    Question {
        /// The tool.
        tool: String,
        /// The call.
        call: String,
        /// Why the lower rungs could not decide.
        why: String,
    },
}

/// Lock the shared printer; a panic while printing leaves nothing half
/// done that matters, so a poisoned lock is still usable.
pub fn lock(printer: &Mutex<Printer>) -> MutexGuard<'_, Printer> {
    printer.lock().unwrap_or_else(|e| e.into_inner())
}

/// `s` on one line, cut to `max` characters (agent's own rule, so a
/// line of ours and an event's print long values alike).
pub use agent::observe::short;

/// A call's arguments for a human line: a JSON object's fields shortest
/// first, so the path or title shows before a long patch text is cut.
pub fn args_summary(args: &str, max: usize) -> String {
    let Ok(Value::Object(fields)) = serde_json::from_str::<Value>(args) else {
        return short(args, max);
    };
    let mut parts: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
        .collect();
    parts.sort_by_key(|p| p.len());
    short(&format!("{{{}}}", parts.join(",")), max)
}

fn rung_name(rung: Rung) -> &'static str {
    match rung {
        Rung::Rerun => "1 (rerun if harmless)",
        Rung::Lookup => "2 (ask the service)",
        Rung::Person => "3 (ask a person)",
    }
}

fn rung_json(rung: Rung) -> &'static str {
    match rung {
        Rung::Rerun => "rerun",
        Rung::Lookup => "lookup",
        Rung::Person => "person",
    }
}

impl Printer {
    /// A printer for humans, or for machines with `json`.
    pub fn new(json: bool) -> Printer {
        Printer {
            json,
            run: None,
            pause: None,
            ladder_why: Vec::new(),
        }
    }

    /// Whether output is JSON lines.
    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Print a step: a tagged line for humans, `value` for machines.
    /// A closed stdout (`| head`) is not an error worth dying for.
    pub fn step(&self, tag: &str, text: &str, value: Value) {
        let mut out = io::stdout().lock();
        let _ = if self.json {
            writeln!(out, "{value}")
        } else {
            writeln!(out, "{tag:<9} {text}")
        };
        let _ = out.flush();
    }

    /// Print a human-only continuation line (nothing in JSON mode).
    pub fn detail(&self, text: &str) {
        if !self.json {
            let mut out = io::stdout().lock();
            let _ = writeln!(out, "{:<9} {text}", "");
        }
    }

    /// Print one event of the loop.
    pub fn event(&mut self, e: &Event) {
        match e {
            Event::Started { run } => self.step(
                "saved",
                &format!("start of run {run} (phase model)"),
                json!({"event": "started", "run": run}),
            ),
            Event::Resumed {
                run,
                phase: Phase::Done,
                turns,
                ..
            } => self.step(
                "opened",
                &format!(
                    "run {run} in phase done after {}: nothing to resume, nothing saved",
                    plural(*turns as usize, "turn")
                ),
                json!({"event": "opened_done", "run": run, "turns": turns}),
            ),
            Event::Resumed {
                run,
                phase,
                resumes,
                turns,
            } => self.step(
                "resumed",
                &format!(
                    "run {run} in phase {phase} after {} (restart {resumes}, saved)",
                    plural(*turns as usize, "turn")
                ),
                json!({"event": "resumed", "run": run, "phase": phase.as_str(),
                       "resumes": resumes, "turns": turns}),
            ),
            Event::ModelCall { turn } => self.step(
                "model",
                &format!("turn {turn}: calling the model"),
                json!({"event": "model_call", "turn": turn}),
            ),
            Event::ReplySaved { turn, calls, usage } => {
                let what = if calls.is_empty() {
                    "the final answer".to_owned()
                } else {
                    let list: Vec<String> = calls
                        .iter()
                        .map(|c| format!("{} {}", c.tool, c.id))
                        .collect();
                    format!(
                        "{} call{}: {}",
                        calls.len(),
                        if calls.len() == 1 { "" } else { "s" },
                        list.join(", ")
                    )
                };
                self.step(
                    "saved",
                    &format!(
                        "reply of turn {turn}, {what} ({} in / {} out tokens, ${:.4})",
                        usage.input_tokens, usage.output_tokens, usage.dollars
                    ),
                    json!({"event": "reply_saved", "turn": turn,
                           "calls": calls.iter().map(|c| json!({"id": c.id, "tool": c.tool, "args": c.args})).collect::<Vec<_>>(),
                           "usage": usage}),
                );
            }
            Event::Decided {
                call,
                tool,
                decision,
            } => {
                let (text, word, reason) = match decision {
                    Decision::Approve => ("approved".to_owned(), "approve", None),
                    Decision::Deny(r) => (format!("denied: {r}"), "deny", Some(r.clone())),
                    Decision::Later => {
                        self.pause = Some(PauseCause::Approval {
                            tool: tool.clone(),
                            call: call.clone(),
                        });
                        ("later".to_owned(), "later", None)
                    }
                };
                self.step(
                    "decided",
                    &format!("{tool} {call}: {text}"),
                    json!({"event": "decided", "call": call, "tool": tool,
                           "decision": word, "reason": reason}),
                );
            }
            Event::MarkerSaved {
                call,
                tool,
                key,
                approved,
            } => self.step(
                "saved",
                &format!(
                    "attempt marker for {tool} {call}{}{}",
                    key.as_deref()
                        .map_or_else(|| ", no key".to_owned(), |k| format!(", key {k}")),
                    if *approved { ", approved" } else { "" }
                ),
                json!({"event": "marker_saved", "call": call, "tool": tool,
                       "key": key, "approved": approved}),
            ),
            Event::ToolCall {
                call,
                tool,
                key,
                args,
                rerun,
            } => self.step(
                "call",
                &format!(
                    "{tool} {call}{} key {} {}",
                    if *rerun { " (rerun)" } else { "" },
                    key.as_deref().unwrap_or("-"),
                    args_summary(args, SHOWN_CHARS)
                ),
                json!({"event": "tool_call", "call": call, "tool": tool, "key": key,
                       "args": args, "rerun": rerun}),
            ),
            Event::ToolReturned {
                call,
                tool,
                returned,
            } => match returned {
                Returned::Result { output, is_error } => self.step(
                    "returned",
                    &format!(
                        "{tool} {call}{}: {}",
                        if *is_error { " (error)" } else { "" },
                        short(output, SHOWN_CHARS)
                    ),
                    json!({"event": "tool_returned", "call": call, "tool": tool,
                           "output": output, "is_error": is_error}),
                ),
                Returned::Unknown(reason) => self.step(
                    "returned",
                    &format!("{tool} {call}: outcome unknown: {reason}"),
                    json!({"event": "tool_returned", "call": call, "tool": tool,
                           "unknown": reason}),
                ),
            },
            Event::ResultSaved {
                call,
                tool,
                output,
                is_error,
            } => self.step(
                "saved",
                &format!("result of {tool} {call}"),
                json!({"event": "result_saved", "call": call, "tool": tool,
                       "output": output, "is_error": is_error}),
            ),
            Event::Ladder {
                call,
                tool,
                rung,
                settled,
                why,
            } => {
                match (rung, settled) {
                    (Rung::Rerun, false) => self.ladder_why = vec![why.clone()],
                    (Rung::Lookup, false) => self.ladder_why.push(why.clone()),
                    (Rung::Person, false) => {
                        self.pause = Some(PauseCause::Question {
                            tool: tool.clone(),
                            call: call.clone(),
                            why: self.ladder_why.join(", and "),
                        });
                    }
                    _ => {}
                }
                self.step(
                    "ladder",
                    &format!(
                        "{tool} {call}: rung {}: {}: {why}",
                        rung_name(*rung),
                        if *settled { "settled" } else { "cannot decide" }
                    ),
                    json!({"event": "ladder", "call": call, "tool": tool,
                           "rung": rung_json(*rung), "settled": settled, "why": why}),
                );
            }
            Event::Paused { waiting } => self.step(
                "saved",
                &format!("pause: waiting on a person for {}", waiting.join(", ")),
                json!({"event": "paused", "waiting": waiting}),
            ),
            Event::Cancelled { phase } => self.step(
                "saved",
                &format!("cancelled in phase {phase}"),
                json!({"event": "cancelled", "phase": phase.as_str()}),
            ),
            Event::Done { answer } => self.step(
                "done",
                "the run has its answer",
                json!({"event": "done", "answer": answer}),
            ),
        }
    }

    /// Print the verdicts of the task's checks.
    pub fn checks(&self, verdicts: &[Verdict]) {
        let passed = verdicts.iter().filter(|v| v.passed).count();
        if self.json {
            return; // part of the summary object
        }
        self.step(
            "checks",
            &format!("{passed} of {} passed", verdicts.len()),
            Value::Null,
        );
        for v in verdicts {
            let mark = if v.passed { "  pass" } else { "  FAIL" };
            match &v.detail {
                Some(d) => self.step(mark, &format!("{}: {d}", v.name), Value::Null),
                None => self.step(mark, &v.name, Value::Null),
            }
        }
    }

    /// Report a failure: on stderr for people, and as a final `error` object
    /// on stdout with `--json`.
    pub fn failure(&self, f: &Failure) {
        if self.json {
            self.step(
                "",
                "",
                json!({"event": "error", "exit": f.exit.code(), "status": f.exit.name(),
                       "kind": f.kind, "message": f.message, "hint": f.hint,
                       "run": self.run}),
            );
        }
        let mut err = io::stderr().lock();
        let _ = writeln!(err, "triage: error: {}", f.message);
        if let Some(hint) = &f.hint {
            let _ = writeln!(err, "triage: hint: {hint}");
        }
    }
}

/// `1 turn`, `2 turns`, `0 turns`: a count with its noun, in agreement.
pub fn plural(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_put_short_fields_first() {
        assert_eq!(
            args_summary(r#"{"new":"a long text","old":"","path":"a.rs"}"#, 100),
            r#"{"old":"","path":"a.rs","new":"a long text"}"#
        );
        assert_eq!(args_summary("{not json", 100), "{not json");
    }

    #[test]
    fn short_keeps_one_line_and_cuts() {
        assert_eq!(short("a\nb", 10), "a b");
        assert_eq!(short("abcdef", 4), "abc…");
        assert_eq!(short("äöü", 3), "äöü");
    }
}
