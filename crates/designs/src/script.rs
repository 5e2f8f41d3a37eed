//! The scripted triage job: the replies a scripted model gives, as data.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// What one tool call does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `issue_file {title, body}`: files an issue; changes the tracker.
    FileIssue {
        /// The issue's title.
        title: String,
        /// The issue's body.
        body: String,
    },
    /// `issue_comment {issue, body}`: comments on the issue an earlier call
    /// (named by its call ID) filed; changes the tracker.
    Comment {
        /// The ID of the `issue_file` call whose issue this comments on.
        issue_call: String,
        /// The comment's text.
        body: String,
    },
    /// `search {query}`: reads only.
    Search {
        /// The search text.
        query: String,
    },
}

impl Op {
    /// The tool's name.
    pub fn tool(&self) -> &'static str {
        match self {
            Op::FileIssue { .. } => "issue_file",
            Op::Comment { .. } => "issue_comment",
            Op::Search { .. } => "search",
        }
    }
    /// Whether the call can change the outside world.
    pub fn mutates(&self) -> bool {
        !matches!(self, Op::Search { .. })
    }
}

/// One tool call of a scripted reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// The call's ID, fixed by the model's reply.
    pub id: String,
    /// What it does.
    pub op: Op,
    /// The arguments as the model wrote them (JSON text).
    pub args: String,
}

/// A scripted job: the model's replies in order, each a list of tool calls;
/// the last reply has no calls (the final answer). Asking the model again for
/// a turn gives the same reply with the same call IDs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Script {
    /// The job's name.
    pub name: String,
    /// The replies, the last one empty.
    pub replies: Vec<Vec<Call>>,
}

/// Why a job file cannot be used; every variant names the file.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file cannot be read.
    #[error("{path}: cannot read the job: {source}")]
    Read {
        /// The job file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a job of the expected shape.
    #[error("{path}: not a scripted job ({reason}); expected {{\"name\": …, \"replies\": [[{{\"id\": …, \"tool\": …, \"args\": {{…}}}}, …], …, []]}}")]
    Shape {
        /// The job file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The job's content is inconsistent.
    #[error("{path}: {reason}")]
    Invalid {
        /// The job file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: String,
    replies: Vec<Vec<RawCall>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    id: String,
    tool: String,
    args: serde_json::Value,
}

fn arg(call: &RawCall, name: &str) -> Result<String, String> {
    match call.args.get(name) {
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!(
            "call {:?}: argument {name:?} must be a string",
            call.id
        )),
        None => Err(format!(
            "call {:?} ({}): missing argument {name:?}",
            call.id, call.tool
        )),
    }
}

/// The operation a raw call names.
fn op_of(c: &RawCall) -> Result<Op, String> {
    Ok(match c.tool.as_str() {
        "issue_file" => Op::FileIssue {
            title: arg(c, "title")?,
            body: arg(c, "body")?,
        },
        "issue_comment" => Op::Comment {
            issue_call: arg(c, "issue")?,
            body: arg(c, "body")?,
        },
        "search" => Op::Search {
            query: arg(c, "query")?,
        },
        other => {
            return Err(format!(
                "call {:?}: unknown tool {other:?} (known: issue_file, issue_comment, search)",
                c.id
            ))
        }
    })
}

impl Call {
    /// A call as a model's reply gives it: its ID, tool and arguments (JSON
    /// text), as they are saved in a checkpoint.
    pub fn parse(id: &str, tool: &str, args: &str) -> Result<Call, String> {
        let args_value: serde_json::Value = serde_json::from_str(args)
            .map_err(|e| format!("call {id:?}: arguments are not JSON: {e}"))?;
        let raw = RawCall {
            id: id.to_owned(),
            tool: tool.to_owned(),
            args: args_value,
        };
        Ok(Call {
            id: id.to_owned(),
            op: op_of(&raw)?,
            args: args.to_owned(),
        })
    }

    /// A call with this ID doing `op`, its arguments written as JSON.
    pub fn new(id: &str, op: Op) -> Call {
        let args = match &op {
            Op::FileIssue { title, body } => serde_json::json!({ "title": title, "body": body }),
            Op::Comment { issue_call, body } => {
                serde_json::json!({ "issue": issue_call, "body": body })
            }
            Op::Search { query } => serde_json::json!({ "query": query }),
        };
        Call {
            id: id.to_owned(),
            op,
            args: args.to_string(),
        }
    }
}

impl Script {
    /// Load and check a job file.
    pub fn load(path: impl AsRef<Path>) -> Result<Script, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Script::parse(&text, path)
    }

    /// Parse and check a job; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Script, ScriptError> {
        let raw: RawJob = serde_json::from_str(text).map_err(|e| ScriptError::Shape {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
        let invalid = |reason: String| ScriptError::Invalid {
            path: path.to_owned(),
            reason,
        };
        match raw.replies.last() {
            None => return Err(invalid("the job has no replies".into())),
            Some(last) if !last.is_empty() => {
                return Err(invalid(
                    "the job has no final reply: the last reply must be empty (the answer)".into(),
                ))
            }
            Some(_) => {}
        }
        let mut ids = BTreeSet::new();
        let mut filed = BTreeSet::new();
        let mut replies = Vec::new();
        for (n, reply) in raw.replies.iter().enumerate() {
            if reply.is_empty() && n + 1 < raw.replies.len() {
                return Err(invalid(format!(
                    "reply {} is empty but is not the last: an empty reply is the final answer",
                    n + 1
                )));
            }
            let mut calls = Vec::new();
            for c in reply {
                if c.id.is_empty() {
                    return Err(invalid(format!("reply {}: a call has an empty ID", n + 1)));
                }
                if !ids.insert(c.id.clone()) {
                    return Err(invalid(format!("duplicate call ID {:?}", c.id)));
                }
                let op = op_of(c).map_err(&invalid)?;
                if let Op::Comment { issue_call, .. } = &op {
                    if !filed.contains(issue_call) {
                        return Err(invalid(format!(
                            "call {:?} comments on {issue_call:?}, which no earlier issue_file call filed",
                            c.id
                        )));
                    }
                }
                if let Op::FileIssue { .. } = op {
                    filed.insert(c.id.clone());
                }
                calls.push(Call {
                    id: c.id.clone(),
                    op,
                    args: c.args.to_string(),
                });
            }
            replies.push(calls);
        }
        Ok(Script {
            name: raw.name,
            replies,
        })
    }

    /// A synthetic long job of `calls` tool calls, two per turn, cycling
    /// `issue_file`, `issue_file`, `search`, `issue_comment` (each comment on
    /// the issue filed last), every argument unique: the book's job made
    /// longer, for measuring how a sweep grows with the job.
    ///
    /// ```
    /// let job = designs::Script::synthetic(8);
    /// assert_eq!(job.replies.iter().flatten().count(), 8);
    /// assert_eq!(job.replies.len(), 5); // four turns of two calls, then the answer
    /// ```
    pub fn synthetic(calls: usize) -> Script {
        let mut replies: Vec<Vec<Call>> = Vec::new();
        let mut last_filed: Option<String> = None;
        for n in 1..=calls {
            let id = format!("call-{n}");
            let op = match (n - 1) % 4 {
                0 | 1 => Op::FileIssue {
                    title: format!("group {n}: crash number {n}"),
                    body: format!("Crash group {n}: reports of crash {n}."),
                },
                2 => Op::Search {
                    query: format!("query {n}"),
                },
                _ => match &last_filed {
                    Some(issue) => Op::Comment {
                        issue_call: issue.clone(),
                        body: format!("Reproduced crash {n} on {issue}."),
                    },
                    None => Op::Search {
                        query: format!("query {n}"),
                    },
                },
            };
            if matches!(op, Op::FileIssue { .. }) {
                last_filed = Some(id.clone());
            }
            if n % 2 == 1 {
                replies.push(Vec::new());
            }
            if let Some(turn) = replies.last_mut() {
                turn.push(Call::new(&id, op));
            }
        }
        replies.push(Vec::new());
        Script {
            name: format!("synthetic-{calls}"),
            replies,
        }
    }

    /// The job as a job file's JSON text (what [`Script::load`] reads back).
    pub fn to_json(&self) -> String {
        let replies: Vec<Vec<serde_json::Value>> = self
            .replies
            .iter()
            .map(|turn| {
                turn.iter()
                    .map(|c| {
                        let args: serde_json::Value =
                            serde_json::from_str(&c.args).unwrap_or(serde_json::Value::Null);
                        serde_json::json!({"id": c.id, "tool": c.op.tool(), "args": args})
                    })
                    .collect()
            })
            .collect();
        let job = serde_json::json!({"name": self.name, "replies": replies});
        serde_json::to_string_pretty(&job).unwrap_or_default()
    }

    /// The call with this ID.
    pub fn call(&self, id: &str) -> Option<&Call> {
        self.replies.iter().flatten().find(|c| c.id == id)
    }

    /// Every call that changes the tracker, in order.
    pub fn effects(&self) -> impl Iterator<Item = &Call> {
        self.replies.iter().flatten().filter(|c| c.op.mutates())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(text: &str) -> String {
        Script::parse(text, Path::new("sweeps/bad.json"))
            .unwrap_err()
            .to_string()
    }

    const FILE: &str = r#"{"id": "c1", "tool": "issue_file", "args": {"title": "A", "body": "a"}}"#;

    #[test]
    fn a_synthetic_job_round_trips_and_is_valid() {
        for n in [1, 4, 8, 33] {
            let job = Script::synthetic(n);
            assert_eq!(job.replies.iter().flatten().count(), n);
            let back = Script::parse(&job.to_json(), Path::new("synthetic.json")).unwrap();
            assert_eq!(back, job);
        }
        let job = Script::synthetic(8);
        let tools: Vec<&str> = job.replies.iter().flatten().map(|c| c.op.tool()).collect();
        assert_eq!(
            tools,
            ["issue_file", "issue_file", "search", "issue_comment"].repeat(2)
        );
        let args: BTreeSet<&str> = job
            .replies
            .iter()
            .flatten()
            .map(|c| c.args.as_str())
            .collect();
        assert_eq!(args.len(), 8, "every argument is unique");
    }

    #[test]
    fn the_shipped_job_loads() {
        let s = Script::load(crate::default_script_path()).unwrap();
        assert_eq!(s.replies.len(), 3);
        assert_eq!(s.effects().count(), 3);
    }

    #[test]
    fn bad_jobs_are_clear_errors_naming_the_file() {
        let cases = [
            (format!(r#"{{"name": "x", "replies": [[{FILE}]]}}"#), "no final reply"),
            (r#"{"name": "x", "replies": []}"#.to_owned(), "no replies"),
            (
                format!(r#"{{"name": "x", "replies": [[{FILE}, {FILE}], []]}}"#),
                "duplicate call ID \"c1\"",
            ),
            (
                r#"{"name": "x", "replies": [[{"id": "c1", "tool": "deploy", "args": {}}], []]}"#
                    .to_owned(),
                "unknown tool \"deploy\"",
            ),
            (
                r#"{"name": "x", "replies": [[{"id": "c2", "tool": "issue_comment", "args": {"issue": "c1", "body": "b"}}], []]}"#
                    .to_owned(),
                "which no earlier issue_file call filed",
            ),
            (
                r#"{"name": "x", "replies": [[{"id": "c1", "tool": "search", "args": {}}], []]}"#
                    .to_owned(),
                "missing argument \"query\"",
            ),
            (
                format!(r#"{{"name": "x", "replies": [[], [{FILE}], []]}}"#),
                "reply 1 is empty but is not the last",
            ),
            ("not json".to_owned(), "not a scripted job"),
            (r#"{"name": "x", "replies": [[]], "extra": 1}"#.to_owned(), "unknown field"),
        ];
        for (text, needle) in cases {
            let e = err(&text);
            assert!(e.starts_with("sweeps/bad.json: "), "{e}");
            assert!(e.contains(needle), "{needle:?} not in {e}");
        }
        let e = Script::load("sweeps/does-not-exist.json")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does-not-exist.json") && e.contains("cannot read"),
            "{e}"
        );
    }
}
