//! The person: approves gated calls, and settles the calls nothing else can.

use std::io::{BufRead, Write};
use std::sync::Mutex;

use crate::state::{Attempt, ToolCall, ToolResult};
use durable::RunId;

/// A gated call waiting for a yes.
#[derive(Clone, Copy, Debug)]
pub struct Approval<'a> {
    /// The run.
    pub run: &'a RunId,
    /// The call, as the model wrote it.
    pub call: &'a ToolCall,
}

/// A marked call with no result that neither a harmless rerun nor the tool's
/// lookup could settle: the ladder's last rung.
#[derive(Clone, Copy, Debug)]
pub struct Question<'a> {
    /// The run.
    pub run: &'a RunId,
    /// The call, as the model wrote it.
    pub call: &'a ToolCall,
    /// Its attempt marker: key, approval, when it went out.
    pub marker: &'a Attempt,
    /// Why the lower rungs could not decide, in words.
    pub why: &'a str,
}

/// A person's answer to an [`Approval`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Run it. The loop writes the marker (with the yes) before the call.
    Approve,
    /// Don't; the model sees the reason as the call's error result.
    Deny(String),
    /// Not now: the run pauses (phase paused) and asks again on restart.
    Later,
}

/// A person's answer to a [`Question`]: how the ladder's last rung
/// ([`Rung::Person`](crate::observe::Rung::Person)) settles the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// It did not happen: run it.
    Rerun,
    /// It happened; this is what they found, which becomes the call's result.
    Done(ToolResult),
    /// Not now: the run pauses and asks again on restart.
    Later,
}

/// The person behind a run: the same approver that approves gated calls
/// answers the resolution ladder's last question.
pub trait Approver: Send {
    /// Approve, deny or postpone a gated call.
    fn approve(&self, request: &Approval<'_>) -> Decision;
    /// Say whether a call whose outcome is unknown happened.
    fn answer(&self, question: &Question<'_>) -> Answer;
}

impl<A: Approver + ?Sized> Approver for Box<A> {
    fn approve(&self, request: &Approval<'_>) -> Decision {
        (**self).approve(request)
    }
    fn answer(&self, question: &Question<'_>) -> Answer {
        (**self).answer(question)
    }
}

/// Nobody is there: gated calls and ladder questions pause the run, so it
/// never guesses. The default approver of an [`Agent`](crate::Agent).
#[derive(Clone, Copy, Debug, Default)]
pub struct Unattended;

impl Approver for Unattended {
    fn approve(&self, _: &Approval<'_>) -> Decision {
        Decision::Later
    }
    fn answer(&self, _: &Question<'_>) -> Answer {
        Answer::Later
    }
}

/// Approves every gated call and never blocks; a ladder question (which only
/// a tool without keys can raise) pauses the run rather than guess. What a
/// command's `--approve off` means.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve(&self, _: &Approval<'_>) -> Decision {
        Decision::Approve
    }
    fn answer(&self, _: &Question<'_>) -> Answer {
        Answer::Later
    }
}

/// A person at a terminal: prompts on `output`, reads answers from `input`.
///
/// End of input (no terminal, a closed pipe) answers "later", so an
/// unattended run pauses instead of guessing.
pub struct TerminalApprover<R, W> {
    io: Mutex<(R, W)>,
}

impl<R, W> std::fmt::Debug for TerminalApprover<R, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TerminalApprover { .. }")
    }
}

impl TerminalApprover<std::io::BufReader<std::io::Stdin>, std::io::Stderr> {
    /// Read from stdin, prompt on stderr (stdout stays the program's output).
    pub fn stdio() -> Self {
        TerminalApprover::new(std::io::BufReader::new(std::io::stdin()), std::io::stderr())
    }
}

/// How often an unreadable answer is asked for again before "later".
const PROMPT_ATTEMPTS: usize = 3;

impl<R: BufRead + Send, W: Write + Send> TerminalApprover<R, W> {
    /// Prompt on `output`, read from `input`.
    pub fn new(input: R, output: W) -> Self {
        TerminalApprover {
            io: Mutex::new((input, output)),
        }
    }

    /// Ask `prompt` until `parse` accepts a line; `None` at end of input, on
    /// an I/O error or after [`PROMPT_ATTEMPTS`] unreadable answers.
    fn ask<T>(&self, prompt: &str, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
        let mut io = self.io.lock().unwrap_or_else(|e| e.into_inner());
        let (input, output) = &mut *io;
        for _ in 0..PROMPT_ATTEMPTS {
            write!(output, "{prompt}").ok()?;
            output.flush().ok()?;
            let mut line = String::new();
            if input.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if let Some(t) = parse(line.trim()) {
                return Some(t);
            }
            writeln!(output, "unrecognised answer {:?}", line.trim()).ok()?;
        }
        None
    }
}

fn word_and_rest(line: &str) -> (String, &str) {
    let (w, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    (w.to_ascii_lowercase(), rest.trim())
}

impl<R: BufRead + Send, W: Write + Send> Approver for TerminalApprover<R, W> {
    fn approve(&self, request: &Approval<'_>) -> Decision {
        let c = request.call;
        let prompt = format!(
            "approve {} call {} with {}? [y]es / [n]o [reason] / [l]ater: ",
            c.tool, c.id, c.args
        );
        self.ask(&prompt, |line| {
            let (w, rest) = word_and_rest(line);
            match w.as_str() {
                "y" | "yes" => Some(Decision::Approve),
                "n" | "no" => Some(Decision::Deny(if rest.is_empty() {
                    "denied at the terminal".to_owned()
                } else {
                    rest.to_owned()
                })),
                "l" | "later" => Some(Decision::Later),
                _ => None,
            }
        })
        .unwrap_or(Decision::Later)
    }

    fn answer(&self, question: &Question<'_>) -> Answer {
        let c = question.call;
        let prompt = format!(
            "call {} ({} with {}) may have acted before the run stopped, and {}.\n\
             did it happen? [r]erun (it did not) / [d]one <what you found> / [l]ater: ",
            c.id, c.tool, c.args, question.why
        );
        self.ask(&prompt, |line| {
            let (w, rest) = word_and_rest(line);
            match w.as_str() {
                "r" | "rerun" => Some(Answer::Rerun),
                "d" | "done" => Some(Answer::Done(ToolResult {
                    output: if rest.is_empty() {
                        "done (a person confirmed it happened)".to_owned()
                    } else {
                        rest.to_owned()
                    },
                    is_error: false,
                })),
                "l" | "later" => Some(Answer::Later),
                _ => None,
            }
        })
        .unwrap_or(Answer::Later)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn call() -> ToolCall {
        ToolCall {
            id: "c1".into(),
            tool: "issue_file".into(),
            args: "{}".into(),
        }
    }

    #[test]
    fn terminal_reads_answers_and_pauses_at_end_of_input() {
        let run = RunId::parse("r").unwrap();
        let c = call();
        let approve = |input: &str| {
            let mut out = Vec::new();
            let d =
                TerminalApprover::new(Cursor::new(input.to_owned()), &mut out).approve(&Approval {
                    run: &run,
                    call: &c,
                });
            (d, String::from_utf8(out).unwrap())
        };
        assert_eq!(approve("y\n").0, Decision::Approve);
        assert_eq!(
            approve("no not today\n").0,
            Decision::Deny("not today".into())
        );
        assert_eq!(approve("").0, Decision::Later);
        let (d, out) = approve("what\nyes\n");
        assert_eq!(d, Decision::Approve);
        assert!(out.contains("unrecognised answer \"what\""), "{out}");
        assert!(out.contains("approve issue_file call c1"), "{out}");

        let marker = Attempt::default();
        let resolve = |input: &str| {
            TerminalApprover::new(Cursor::new(input.to_owned()), Vec::new()).answer(&Question {
                run: &run,
                call: &c,
                marker: &marker,
                why: "the lookup cannot tell",
            })
        };
        assert_eq!(resolve("r\n"), Answer::Rerun);
        assert_eq!(
            resolve("done {\"issue\": 4}\n"),
            Answer::Done(ToolResult {
                output: "{\"issue\": 4}".into(),
                is_error: false
            })
        );
        assert_eq!(resolve("x\ny\nz\nr\n"), Answer::Later);
        // "later" is an answer, not an unreadable line asked again.
        assert_eq!(approve("later\ny\n").0, Decision::Later);
        assert_eq!(approve("l\ny\n").0, Decision::Later);
        assert_eq!(resolve("later\nr\n"), Answer::Later);
        assert_eq!(resolve("l\nr\n"), Answer::Later);
    }

    #[test]
    fn a_terminal_approver_debugs_without_its_streams() {
        let t = TerminalApprover::new(Cursor::new(String::new()), Vec::new());
        assert_eq!(format!("{t:?}"), "TerminalApprover { .. }");
    }
}
