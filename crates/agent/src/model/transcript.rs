//! Recorded runs as data: the replies a scripted model gives.
//!
//! ```json
//! {"name": "…", "task": "…the prompt…",
//!  "replies": [
//!    {"text": "…", "calls": [{"id": "c1", "tool": "issue_file", "args": {"title": "…"}}],
//!     "usage": {"input_tokens": 1200, "output_tokens": 80, "dollars": 0.004}},
//!    …,
//!    {"text": "the final answer"}]}
//! ```
//!
//! `args` is a JSON object, or a string holding the raw text the model wrote
//! (which may be invalid JSON: the loop must still save and resume such a
//! run). The last reply has no calls; its text is the answer. Unknown
//! top-level fields are allowed, so other programs (the `triage` command's
//! check catalogue) can keep their own data in the same file; unknown fields
//! inside replies and calls are refused, since there they are typos.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::state::{ToolCall, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::model::Reply;
use crate::tool::Tools;

/// A recorded run: its task and the model's replies in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Transcript {
    /// The file it was read from (or the name given to [`Transcript::parse`]),
    /// for error messages.
    pub path: PathBuf,
    /// The job's name.
    pub name: String,
    /// The task: the run's first user message.
    pub task: String,
    /// The replies; only the last has no calls.
    pub replies: Vec<Reply>,
}

/// Why a transcript cannot be used. Every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The file cannot be read.
    #[error("{}: cannot read the transcript: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a transcript of the expected shape.
    #[error("{}: not a transcript ({reason}); expected {{\"name\": …, \"task\": …, \"replies\": [{{\"text\": …, \"calls\": [{{\"id\": …, \"tool\": …, \"args\": {{…}}}}], \"usage\": {{…}}}}, …]}}", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What serde said.
        reason: String,
    },
    /// The last reply has calls (or there are no replies): the run would
    /// never get an answer.
    #[error("{}: no final reply: the last reply must have no calls (its text is the answer)", path.display())]
    NoFinalReply {
        /// The file.
        path: PathBuf,
    },
    /// Two calls share an ID. IDs make idempotency keys, so two calls with
    /// one ID would be taken for one call sent twice.
    #[error("{}: duplicate call ID {id:?} (replies {first} and {second})", path.display())]
    DuplicateCallId {
        /// The file.
        path: PathBuf,
        /// The ID.
        id: String,
        /// The reply (1-based) that used it first.
        first: usize,
        /// The reply that used it again.
        second: usize,
    },
    /// A call names a tool the agent does not have.
    #[error("{}: call {call:?} in reply {reply} uses unknown tool {tool:?} (known: {})", path.display(), known.join(", "))]
    UnknownTool {
        /// The file.
        path: PathBuf,
        /// The reply, 1-based.
        reply: usize,
        /// The call's ID.
        call: String,
        /// The tool it names.
        tool: String,
        /// The tools the agent has.
        known: Vec<String>,
    },
    /// Anything else inconsistent (an empty ID, a reply without calls before
    /// the last, a negative cost).
    #[error("{}: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The calls of reply `reply` (counted from 1), checked: each has an ID
/// and a tool, and no ID was `seen` before (IDs go into `seen` with their
/// reply).
fn checked_calls(
    raw: Vec<RawCall>,
    reply: usize,
    seen: &mut Vec<(String, usize)>,
    path: &Path,
) -> Result<Vec<ToolCall>, TranscriptError> {
    let invalid = |reason: String| TranscriptError::Invalid {
        path: path.to_path_buf(),
        reason,
    };
    let mut calls = Vec::with_capacity(raw.len());
    for c in raw {
        if c.id.is_empty() {
            return Err(invalid(format!("reply {reply}: a call has an empty ID")));
        }
        if c.tool.is_empty() {
            return Err(invalid(format!(
                "reply {reply}: call {:?} names no tool",
                c.id
            )));
        }
        if let Some((_, first)) = seen.iter().find(|(id, _)| *id == c.id) {
            return Err(TranscriptError::DuplicateCallId {
                path: path.to_path_buf(),
                id: c.id,
                first: *first,
                second: reply,
            });
        }
        seen.push((c.id.clone(), reply));
        let args = match c.args {
            None => "{}".to_owned(),
            Some(Value::String(raw)) => raw,
            Some(v) => v.to_string(),
        };
        calls.push(ToolCall {
            id: c.id,
            tool: c.tool,
            args,
        });
    }
    Ok(calls)
}

#[derive(Deserialize)]
struct RawTranscript {
    #[serde(default)]
    name: String,
    #[serde(default)]
    task: String,
    replies: Vec<RawReply>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawReply {
    #[serde(default)]
    text: String,
    #[serde(default)]
    calls: Vec<RawCall>,
    #[serde(default)]
    usage: RawUsage,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    id: String,
    tool: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    dollars: f64,
}

impl Transcript {
    /// Read and check the transcript at `path`.
    pub fn load(path: impl AsRef<Path>) -> Result<Transcript, TranscriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| TranscriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Transcript::parse(&text, path)
    }

    /// Parse and check a transcript; `path` names it in errors.
    pub fn parse(text: &str, path: impl AsRef<Path>) -> Result<Transcript, TranscriptError> {
        let path = path.as_ref().to_path_buf();
        let raw: RawTranscript =
            serde_json::from_str(text).map_err(|e| TranscriptError::Shape {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        let invalid = |reason: String| TranscriptError::Invalid {
            path: path.clone(),
            reason,
        };
        match raw.replies.last() {
            Some(last) if last.calls.is_empty() => {}
            _ => return Err(TranscriptError::NoFinalReply { path }),
        }
        let last = raw.replies.len() - 1;
        let mut seen: Vec<(String, usize)> = Vec::new();
        let mut replies = Vec::with_capacity(raw.replies.len());
        for (n, r) in raw.replies.into_iter().enumerate() {
            if r.calls.is_empty() && n != last {
                return Err(invalid(format!(
                    "reply {} has no calls but is not the last: a reply without calls is the final answer",
                    n + 1
                )));
            }
            if !r.usage.dollars.is_finite() || r.usage.dollars < 0.0 {
                return Err(invalid(format!(
                    "reply {}: dollars must be a finite amount ≥ 0",
                    n + 1
                )));
            }
            let calls = checked_calls(r.calls, n + 1, &mut seen, &path)?;
            replies.push(Reply {
                text: r.text,
                calls,
                usage: Usage {
                    input_tokens: r.usage.input_tokens,
                    output_tokens: r.usage.output_tokens,
                    dollars: r.usage.dollars,
                },
            });
        }
        Ok(Transcript {
            path,
            name: raw.name,
            task: raw.task,
            replies,
        })
    }

    /// Check that every call names one of `tools`, so a typo in a recorded
    /// job fails at load time with the file's name rather than as an error
    /// result in the middle of a run.
    pub fn check_tools(&self, tools: &Tools) -> Result<(), TranscriptError> {
        let known: BTreeSet<&str> = tools.names().collect();
        for (n, r) in self.replies.iter().enumerate() {
            for c in &r.calls {
                if !known.contains(c.tool.as_str()) {
                    return Err(TranscriptError::UnknownTool {
                        path: self.path.clone(),
                        reply: n + 1,
                        call: c.id.clone(),
                        tool: c.tool.clone(),
                        known: known.iter().map(|s| (*s).to_owned()).collect(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Every call of every reply, in order.
    pub fn calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.replies.iter().flat_map(|r| &r.calls)
    }

    /// The answer: the last reply's text.
    pub fn answer(&self) -> &str {
        self.replies.last().map_or("", |r| r.text.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Transcript, TranscriptError> {
        Transcript::parse(text, "jobs/x.json")
    }

    #[test]
    fn parses_object_and_raw_string_args() {
        let t = parse(
            r#"{"name": "x", "task": "do it", "extra": [1, 2],
                "replies": [
                  {"text": "a", "calls": [{"id": "c1", "tool": "t", "args": {"k": 1}},
                                          {"id": "c2", "tool": "t", "args": "{not json"},
                                          {"id": "c3", "tool": "t"}],
                   "usage": {"input_tokens": 10, "output_tokens": 2, "dollars": 0.5}},
                  {"text": "done"}]}"#,
        )
        .unwrap();
        assert_eq!(t.task, "do it");
        let args: Vec<&str> = t.calls().map(|c| c.args.as_str()).collect();
        assert_eq!(args, [r#"{"k":1}"#, "{not json", "{}"]);
        assert_eq!(t.replies[0].usage.input_tokens, 10);
        assert_eq!(t.replies[0].usage.dollars, 0.5);
        assert_eq!(t.answer(), "done");
    }

    #[test]
    fn errors_name_the_file() {
        let cases = [
            (r#"{"replies": []}"#, "no final reply"),
            (
                r#"{"replies": [{"text": "a", "calls": [{"id": "c1", "tool": "t"}]}]}"#,
                "no final reply",
            ),
            (
                r#"{"replies": [{"calls": [{"id": "c1", "tool": "t"}]}, {"calls": [{"id": "c1", "tool": "t"}]}, {}]}"#,
                "duplicate call ID \"c1\" (replies 1 and 2)",
            ),
            (r#"{"replies": [{}, {}]}"#, "reply 1 has no calls"),
            (r#"{"replies": [{"txt": "a"}]}"#, "unknown field `txt`"),
            (r#"{"replies": "#, "not a transcript"),
        ];
        for (text, want) in cases {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.starts_with("jobs/x.json: "), "{e}");
            assert!(e.contains(want), "{want:?} not in {e}");
        }
        let e = Transcript::load("/no/such/transcript.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("/no/such/transcript.json"), "{e}");
    }

    /// A reply's cost must be a finite amount of at least zero: a negative
    /// one is refused with the reply's number, a zero one is fine.
    #[test]
    fn a_negative_cost_is_refused() {
        let e = parse(r#"{"replies": [{"text": "done", "usage": {"dollars": -0.5}}]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("reply 1: dollars must be a finite amount ≥ 0"),
            "{e}"
        );
        parse(r#"{"replies": [{"text": "done", "usage": {"dollars": 0.0}}]}"#).unwrap();
    }

    #[test]
    fn unknown_tools_are_named() {
        let t =
            parse(r#"{"replies": [{"calls": [{"id": "c1", "tool": "issue_fiel"}]}, {}]}"#).unwrap();
        let e = t.check_tools(&Tools::new()).unwrap_err().to_string();
        assert!(
            e.starts_with("jobs/x.json: call \"c1\" in reply 1 uses unknown tool \"issue_fiel\""),
            "{e}"
        );
    }
}
