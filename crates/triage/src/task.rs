//! Recorded tasks: a transcript of model replies plus what the command needs
//! around it, as one JSON file.
//!
//! ```json
//! {
//!   "name": "m1-done-after-delete",
//!   "description": "one line for --list-tasks",
//!   "task": "the prompt: the run's first user message",
//!   "approval": ["issue_file"],
//!   "workspace": {"todo.rs": "the code before the run (plain file names)"},
//!   "tracker": [{"title": "an issue filed before the run", "body": "…"}],
//!   "checks": [{"check": "issue_filed", "title": "…"}, …],
//!   "replies": [{"text": "…", "calls": [{"id": "c1", "tool": "search", "args": {…}}],
//!                "usage": {"input_tokens": 900, "output_tokens": 40, "dollars": 0.003}}, …]
//! }
//! ```
//!
//! `name`, `task` and `replies` are the agent's transcript format; the other
//! fields belong to this command: the tools that need a person's approval
//! (default `["issue_file"]`), the workspace files and tracker issues a new
//! run starts with, and the catalog of checks. Any other top-level field is
//! refused, since it is most likely a typo.
//!
//! The built-in tasks are `crates/triage/tasks/*.json`, embedded at build
//! time; `--tasks DIR` reads another directory instead.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use agent::model::{Transcript, TranscriptError};
use agent::tool::Tools;

use crate::checks::{self, Check};
use crate::exit::Failure;

/// The agent's triage tools, on a throwaway world: only their names and
/// declarations are used, to check a task's calls.
pub fn known_tools() -> Tools {
    triage_tools::triage(
        tracker::Tracker::new(tracker::Mode::Keyed),
        std::sync::Arc::new(durable::testing::MemDir::new()),
    )
}

/// The names of the tools a task may call, sorted.
pub fn tool_names() -> Vec<String> {
    known_tools().names().map(str::to_owned).collect()
}

/// The transcript parser's message names the file already; keep only the
/// reason, since callers say which file.
fn transcript_error(e: &TranscriptError) -> String {
    let text = e.to_string();
    match text.split_once(": ") {
        Some((_, reason)) => reason.to_owned(),
        None => text,
    }
}

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/tasks.rs"));
}

/// The top-level fields a task file may have.
const FIELDS: [&str; 8] = [
    "name",
    "description",
    "task",
    "approval",
    "workspace",
    "tracker",
    "checks",
    "replies",
];

/// An issue the tracker holds before the run starts.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeedIssue {
    /// Its title.
    pub title: String,
    /// Its body.
    #[serde(default)]
    pub body: String,
}

/// One tool call of the recorded replies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordedCall {
    /// The reply it belongs to, 1-based (the turn).
    pub turn: u32,
    /// The model's call ID.
    pub id: String,
    /// The tool.
    pub tool: String,
}

/// A recorded task, checked.
#[derive(Clone, Debug)]
pub struct Task {
    /// Its name (the file's stem).
    pub name: String,
    /// One line about it.
    pub description: String,
    /// Where it came from, for messages.
    pub source: PathBuf,
    /// The file's text, as the agent's transcript parser reads it.
    pub text: String,
    /// The recorded replies, parsed and checked by the agent's parser.
    pub transcript: Transcript,
    /// Tools that need a person's yes before each call.
    pub approval: Vec<String>,
    /// Workspace files a new run starts with: relative path → contents.
    pub workspace: BTreeMap<String, String>,
    /// Issues the tracker holds before the run starts.
    pub tracker: Vec<SeedIssue>,
    /// The catalog.
    pub checks: Vec<Check>,
    /// Every recorded call, in order.
    pub calls: Vec<RecordedCall>,
    /// Input and output tokens of all recorded replies.
    pub recorded_tokens: (u64, u64),
}

#[derive(Deserialize)]
struct RawTask {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    approval: Option<Vec<String>>,
    #[serde(default)]
    workspace: BTreeMap<String, String>,
    #[serde(default)]
    tracker: Vec<SeedIssue>,
    checks: Value,
}

/// Whether `name` can be a task's name: it becomes the start of run IDs and
/// a file name, so ASCII letters, digits, `-` and `_`, not starting with `-`.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('-')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl Task {
    /// Parse and check a task file's text; `source` names it in errors and
    /// `stem` is the name the file gives it.
    pub fn parse(text: &str, source: &Path, stem: &str) -> Result<Task, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let Value::Object(fields) = &value else {
            return Err("not a JSON object".to_owned());
        };
        if let Some(unknown) = fields.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            return Err(format!(
                "unknown field {unknown:?} (a task file has {})",
                FIELDS.join(", ")
            ));
        }
        let raw: RawTask = serde_json::from_value(value).map_err(|e| e.to_string())?;
        if !valid_name(stem) {
            return Err(format!(
                "{stem:?} is not a task name (ASCII letters, digits, '-' and '_')"
            ));
        }
        if let Some(name) = &raw.name {
            if name != stem {
                return Err(format!(
                    "its \"name\" is {name:?} but the file is named {stem:?}.json"
                ));
            }
        }
        for path in raw.workspace.keys() {
            checks::check_workspace_path(path)?;
        }
        let checks = checks::parse_catalog(&raw.checks)?;
        if checks.is_empty() {
            return Err("the catalog of checks is empty".to_owned());
        }
        let transcript = Transcript::parse(text, source).map_err(|e| transcript_error(&e))?;
        transcript
            .check_tools(&known_tools())
            .map_err(|e| transcript_error(&e))?;
        let approval = raw
            .approval
            .unwrap_or_else(|| vec!["issue_file".to_owned()]);
        let known = tool_names();
        if let Some(bad) = approval.iter().find(|t| !known.contains(t)) {
            return Err(format!(
                "\"approval\" names unknown tool {bad:?} (the tools are {})",
                known.join(", ")
            ));
        }
        let (calls, tokens) = recorded_calls(&transcript)?;
        Ok(Task {
            name: stem.to_owned(),
            description: raw.description,
            source: source.to_path_buf(),
            text: text.to_owned(),
            transcript,
            approval,
            workspace: raw.workspace,
            tracker: raw.tracker,
            checks,
            calls,
            recorded_tokens: tokens,
        })
    }

    /// The tools the recorded replies call, each once, in order of first
    /// call.
    pub fn tools(&self) -> Vec<&str> {
        let mut tools: Vec<&str> = Vec::new();
        for c in &self.calls {
            if !tools.contains(&c.tool.as_str()) {
                tools.push(&c.tool);
            }
        }
        tools
    }
}

/// Where tasks come from: the built-in ones, or a directory of task files.
#[derive(Clone, Debug)]
pub enum Catalog {
    /// `crates/triage/tasks/*.json`, embedded in the binary.
    BuiltIn,
    /// `DIR/*.json`.
    Dir(PathBuf),
}

impl Catalog {
    /// Every task's (file name, source path, text), by file name.
    fn files(&self) -> Result<Vec<(String, PathBuf, String)>, Failure> {
        match self {
            Catalog::BuiltIn => Ok(embedded::EMBEDDED
                .iter()
                .map(|(name, text)| {
                    (
                        (*name).to_owned(),
                        Path::new("tasks").join(name),
                        (*text).to_owned(),
                    )
                })
                .collect()),
            Catalog::Dir(dir) => {
                let bad = |e: std::io::Error| {
                    Failure::usage(
                        "bad_tasks_dir",
                        format!("cannot read the tasks directory {}: {e}", dir.display()),
                    )
                };
                let mut files = Vec::new();
                for entry in std::fs::read_dir(dir).map_err(bad)? {
                    let path = entry.map_err(bad)?.path();
                    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
                        continue;
                    };
                    if !name.ends_with(".json") || name.starts_with('.') {
                        continue;
                    }
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        Failure::usage(
                            "bad_task",
                            format!("cannot read task file {}: {e}", path.display()),
                        )
                    })?;
                    files.push((name.to_owned(), path, text));
                }
                files.sort_by(|a, b| a.0.cmp(&b.0));
                Ok(files)
            }
        }
    }

    /// Every task, checked; the first bad one is an error naming its file.
    pub fn all(&self) -> Result<Vec<Task>, Failure> {
        self.files()?
            .into_iter()
            .map(|(file, path, text)| parse_file(&file, &path, &text))
            .collect()
    }

    /// The task called `name`.
    pub fn get(&self, name: &str) -> Result<Task, Failure> {
        let files = self.files()?;
        let file = format!("{name}.json");
        match files.iter().find(|(f, _, _)| *f == file) {
            Some((f, path, text)) => parse_file(f, path, text),
            None => {
                let known: Vec<&str> = files
                    .iter()
                    .map(|(f, _, _)| f.trim_end_matches(".json"))
                    .collect();
                Err(
                    Failure::usage("unknown_task", format!("unknown task {name:?}")).hint(
                        if known.is_empty() {
                            "there are no tasks".to_owned()
                        } else {
                            format!("known tasks: {} (see --list-tasks)", known.join(", "))
                        },
                    ),
                )
            }
        }
    }
}

/// Parse one task file of a catalog.
pub fn parse_file(file: &str, path: &Path, text: &str) -> Result<Task, Failure> {
    let stem = file.trim_end_matches(".json");
    Task::parse(text, path, stem).map_err(|reason| {
        Failure::usage(
            "bad_task",
            format!("task file {} is not valid: {reason}", path.display()),
        )
    })
}

/// The calls a transcript records, each with its turn, and the tokens its
/// replies add up to (input, output).
fn recorded_calls(transcript: &Transcript) -> Result<(Vec<RecordedCall>, (u64, u64)), String> {
    let mut calls = Vec::new();
    let mut tokens: (u64, u64) = (0, 0);
    for (n, reply) in transcript.replies.iter().enumerate() {
        let turn = u32::try_from(n + 1).map_err(|_| "too many replies".to_owned())?;
        // Saturating, as the agent adds up the same replies: the counts
        // come from the file, and `paid_once` compares the two sums.
        tokens.0 = tokens.0.saturating_add(reply.usage.input_tokens);
        tokens.1 = tokens.1.saturating_add(reply.usage.output_tokens);
        for call in &reply.calls {
            calls.push(RecordedCall {
                turn,
                id: call.id.clone(),
                tool: call.tool.clone(),
            });
        }
    }
    Ok((calls, tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"{"name": "t", "task": "do it",
        "checks": [{"check": "paid_once"}],
        "replies": [{"calls": [{"id": "c1", "tool": "search", "args": {"query": "x"}}],
                     "usage": {"input_tokens": 5, "output_tokens": 1}},
                    {"calls": [{"id": "c2", "tool": "issue_file"}, {"id": "c3", "tool": "search"}]},
                    {"text": "done", "usage": {"input_tokens": 7, "output_tokens": 2}}]}"#;

    #[test]
    fn parses_a_minimal_task() {
        let t = Task::parse(MINIMAL, Path::new("x/t.json"), "t").unwrap();
        assert_eq!(t.approval, ["issue_file"]);
        assert_eq!(t.tools(), ["search", "issue_file"]);
        assert_eq!(t.calls[1].turn, 2);
        assert_eq!(t.recorded_tokens, (12, 3));
    }

    #[test]
    fn huge_token_counts_saturate_instead_of_overflowing() {
        let max = u64::MAX;
        let text = MINIMAL.replace("\"input_tokens\": 5", &format!("\"input_tokens\": {max}"));
        let t = Task::parse(&text, Path::new("x/t.json"), "t").unwrap();
        assert_eq!(t.recorded_tokens, (max, 3));
    }

    #[test]
    fn refuses_bad_tasks() {
        let cases = [
            ("[]", "t", "not a JSON object"),
            ("{", "t", "not JSON"),
            (
                r#"{"checks": [], "replies": [], "chekcs": 1}"#,
                "t",
                "unknown field \"chekcs\"",
            ),
            (
                r#"{"checks": [], "replies": []}"#,
                "t",
                "catalog of checks is empty",
            ),
            (r#"{"replies": []}"#, "t", "missing field `checks`"),
            (
                r#"{"name": "u", "checks": [], "replies": []}"#,
                "t",
                "file is named \"t\".json",
            ),
            (r#"{"checks": [], "replies": []}"#, "a b", "not a task name"),
            (
                r#"{"workspace": {"../x": ""}, "checks": [{"check": "paid_once"}], "replies": []}"#,
                "t",
                "plain file name inside the workspace",
            ),
        ];
        for (text, stem, want) in cases {
            let e = Task::parse(text, Path::new("t.json"), stem).unwrap_err();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
    }

    #[test]
    fn built_in_tasks_are_valid_and_named_by_file() {
        let tasks = Catalog::BuiltIn.all().unwrap();
        assert!(tasks.len() >= 2, "at least two recorded tasks ship");
        for t in &tasks {
            assert!(!t.description.is_empty(), "{} has no description", t.name);
            assert!(!t.calls.is_empty(), "{} calls no tool", t.name);
        }
        let e = Catalog::BuiltIn.get("nope").unwrap_err();
        assert_eq!(e.kind, "unknown_task");
        assert!(e.hint.unwrap().contains("m1-done-after-delete"));
    }
}
