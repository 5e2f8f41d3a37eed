//! A task's catalog of checks: what must be true of the world once the run
//! is done, written as data next to the recorded replies.
//!
//! ```json
//! "checks": [
//!   {"check": "issue_filed", "title": "todo: done after delete panics", "body_contains": ["index 3"]},
//!   {"check": "comment", "on": "todo: done after delete panics", "contains": "fixed in"},
//!   {"check": "file_contains", "path": "todo.rs", "text": "fn done("},
//!   {"check": "answer_contains", "text": "filed"},
//!   {"name": "no reply paid twice", "check": "paid_once"}
//! ]
//! ```
//!
//! Every "exactly once" check counts: an issue filed twice fails
//! `issue_filed`, a comment made twice fails `comment`. `name` is optional;
//! without it the check describes itself.

use std::fmt;
use std::path::{Component, Path};

use serde::Deserialize;
use serde_json::Value;

/// One check of a catalog: a name for the report and what it checks.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// What the report calls it.
    pub name: String,
    /// What it checks.
    pub kind: Kind,
}

/// What a check checks.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(tag = "check", rename_all = "snake_case", deny_unknown_fields)]
pub enum Kind {
    /// Exactly one issue has this title, and its body holds every string of
    /// `body_contains`.
    IssueFiled {
        /// The exact title.
        title: String,
        /// Strings the body must contain.
        #[serde(default)]
        body_contains: Vec<String>,
    },
    /// The tracker holds exactly this many issues (seeded ones included).
    Issues {
        /// How many.
        count: usize,
    },
    /// Exactly one comment on the issue titled `on` contains `contains`.
    Comment {
        /// The issue's exact title.
        on: String,
        /// Text the comment contains.
        contains: String,
    },
    /// The tracker holds exactly this many comments, over all issues.
    Comments {
        /// How many.
        count: usize,
    },
    /// The workspace file exists and contains `text` (exactly `times` times,
    /// if given: a patch applied twice shows up here).
    FileContains {
        /// Workspace-relative path.
        path: String,
        /// The text.
        text: String,
        /// How often exactly, if it matters.
        #[serde(default)]
        times: Option<usize>,
    },
    /// The workspace file exists and does not contain `text`.
    FileLacks {
        /// Workspace-relative path.
        path: String,
        /// The text.
        text: String,
    },
    /// The run's answer contains `text`.
    AnswerContains {
        /// The text.
        text: String,
    },
    /// The run took exactly this many model turns over all its lives.
    Turns {
        /// How many.
        count: u32,
    },
    /// The tokens the run recorded are exactly those of the recorded
    /// replies: no reply was paid for twice, none was lost.
    PaidOnce,
}

impl fmt::Display for Kind {
    /// The check's default name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kind::IssueFiled {
                title,
                body_contains,
            } => {
                write!(f, "issue {title:?} filed once")?;
                if !body_contains.is_empty() {
                    write!(f, ", body mentions {}", quoted(body_contains))?;
                }
                Ok(())
            }
            Kind::Issues { count } => {
                write!(f, "tracker holds {count} {}", plural(*count, "issue"))
            }
            Kind::Comment { on, contains } => {
                write!(f, "one comment on {on:?} contains {contains:?}")
            }
            Kind::Comments { count } => {
                write!(f, "tracker holds {count} {}", plural(*count, "comment"))
            }
            Kind::FileContains {
                path,
                text,
                times: None,
            } => write!(f, "{path} contains {text:?}"),
            Kind::FileContains {
                path,
                text,
                times: Some(n),
            } => write!(f, "{path} contains {text:?} {n} time(s)"),
            Kind::FileLacks { path, text } => write!(f, "{path} no longer contains {text:?}"),
            Kind::AnswerContains { text } => write!(f, "answer mentions {text:?}"),
            Kind::Turns { count } => write!(f, "run took {count} model turns"),
            Kind::PaidOnce => f.write_str("every recorded reply paid for exactly once"),
        }
    }
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        word.to_owned()
    } else {
        format!("{word}s")
    }
}

fn quoted(items: &[String]) -> String {
    items
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Parse a catalog (the task file's `checks` array); `Err` says which entry
/// is wrong and why.
pub fn parse_catalog(value: &Value) -> Result<Vec<Check>, String> {
    let Value::Array(items) = value else {
        return Err("\"checks\" must be an array".to_owned());
    };
    let mut checks = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let at = |reason: String| format!("check {}: {reason}", i + 1);
        let Value::Object(fields) = item else {
            return Err(at("not an object".to_owned()));
        };
        let mut fields = fields.clone();
        let name = match fields.remove("name") {
            None => None,
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s),
            Some(_) => return Err(at("\"name\" must be a non-empty string".to_owned())),
        };
        let kind: Kind =
            serde_json::from_value(Value::Object(fields)).map_err(|e| at(e.to_string()))?;
        match &kind {
            Kind::FileContains { path, .. } | Kind::FileLacks { path, .. } => {
                check_workspace_path(path).map_err(at)?;
            }
            _ => {}
        }
        checks.push(Check {
            name: name.unwrap_or_else(|| kind.to_string()),
            kind,
        });
    }
    Ok(checks)
}

/// A workspace path must be a plain file name: `code_patch` writes through
/// a flat [`durable::Dir`], which has no subdirectories, so nothing can
/// reach outside the workspace.
pub fn check_workspace_path(path: &str) -> Result<(), String> {
    let plain = Path::new(path)
        .components()
        .all(|c| matches!(c, Component::Normal(_)));
    if path.is_empty() || !plain || path.contains('/') || path.starts_with('.') {
        return Err(format!(
            "workspace path {path:?} must be a plain file name inside the workspace \
             (no '/', not starting with '.')"
        ));
    }
    Ok(())
}

/// What the checks look at once the run is done.
pub struct Evidence<'a> {
    /// Every issue in the run's tracker, with its comments.
    pub issues: &'a [tracker::Issue],
    /// The run's workspace directory.
    pub workspace: &'a Path,
    /// The run's answer.
    pub answer: &'a str,
    /// The run's model turns, over all its lives.
    pub turns: u32,
    /// The input and output tokens the run recorded, over all its lives.
    pub tokens: (u64, u64),
    /// Input and output tokens of all recorded replies.
    pub recorded_tokens: (u64, u64),
}

/// One check's verdict.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Verdict {
    /// The check's name.
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// What was found, when it failed.
    pub detail: Option<String>,
}

/// Evaluate every check of `catalog`, in order.
pub fn evaluate(catalog: &[Check], ev: &Evidence<'_>) -> Vec<Verdict> {
    catalog
        .iter()
        .map(|check| {
            let detail = check_one(&check.kind, ev).err();
            Verdict {
                name: check.name.clone(),
                passed: detail.is_none(),
                detail,
            }
        })
        .collect()
}

fn count_is(what: &str, found: usize, want: usize) -> Result<(), String> {
    if found == want {
        Ok(())
    } else {
        Err(format!("found {found} {what}, expected {want}"))
    }
}

fn read_workspace(workspace: &Path, path: &str) -> Result<String, String> {
    let file = workspace.join(path);
    std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))
}

fn check_one(kind: &Kind, ev: &Evidence<'_>) -> Result<(), String> {
    match kind {
        Kind::IssueFiled {
            title,
            body_contains,
        } => {
            let matching: Vec<_> = ev.issues.iter().filter(|i| i.title == *title).collect();
            count_is("issues with that title", matching.len(), 1)?;
            let body = &matching[0].body;
            match body_contains.iter().find(|s| !body.contains(s.as_str())) {
                Some(missing) => Err(format!(
                    "issue #{} body does not mention {missing:?}",
                    matching[0].number
                )),
                None => Ok(()),
            }
        }
        Kind::Issues { count } => count_is("issues", ev.issues.len(), *count),
        Kind::Comment { on, contains } => {
            let issues: Vec<_> = ev.issues.iter().filter(|i| i.title == *on).collect();
            count_is("issues with that title", issues.len(), 1)?;
            let n = issues[0]
                .comments
                .iter()
                .filter(|c| c.body.contains(contains.as_str()))
                .count();
            count_is("such comments", n, 1)
        }
        Kind::Comments { count } => {
            let n = ev.issues.iter().map(|i| i.comments.len()).sum();
            count_is("comments", n, *count)
        }
        Kind::FileContains { path, text, times } => {
            let content = read_workspace(ev.workspace, path)?;
            let found = content.matches(text.as_str()).count();
            match times {
                Some(n) => count_is(&format!("occurrences in {path}"), found, *n),
                None if found > 0 => Ok(()),
                None => Err(format!("{path} does not contain it")),
            }
        }
        Kind::FileLacks { path, text } => {
            if read_workspace(ev.workspace, path)?.contains(text.as_str()) {
                Err(format!("{path} still contains it"))
            } else {
                Ok(())
            }
        }
        Kind::AnswerContains { text } => {
            if ev.answer.contains(text.as_str()) {
                Ok(())
            } else {
                Err(format!("the answer is {:?}", ev.answer))
            }
        }
        Kind::Turns { count } => {
            if ev.turns == *count {
                Ok(())
            } else {
                Err(format!("the run took {} turns", ev.turns))
            }
        }
        Kind::PaidOnce => {
            let (input, output) = ev.recorded_tokens;
            if ev.tokens == (input, output) {
                Ok(())
            } else {
                Err(format!(
                    "the run recorded {} in / {} out tokens, the replies cost {input} in / {output} out",
                    ev.tokens.0, ev.tokens.1
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn issue(number: u64, title: &str, body: &str, comments: &[&str]) -> tracker::Issue {
        tracker::Issue {
            number,
            title: title.into(),
            body: body.into(),
            comments: comments
                .iter()
                .enumerate()
                .map(|(i, b)| tracker::Comment {
                    id: i as u64 + 1,
                    body: (*b).into(),
                })
                .collect(),
        }
    }

    #[test]
    fn parses_names_and_defaults() {
        let checks = parse_catalog(&json!([
            {"check": "issue_filed", "title": "T", "body_contains": ["x"]},
            {"name": "mine", "check": "paid_once"},
            {"check": "file_lacks", "path": "a.rs", "text": "bug"},
        ]))
        .unwrap();
        assert_eq!(
            checks[0].name,
            "issue \"T\" filed once, body mentions \"x\""
        );
        assert_eq!(checks[1].name, "mine");
        assert_eq!(checks[1].kind, Kind::PaidOnce);
        assert_eq!(checks[2].name, "a.rs no longer contains \"bug\"");
    }

    #[test]
    fn bad_entries_are_named() {
        let cases = [
            (json!({}), "must be an array"),
            (json!([1]), "check 1: not an object"),
            (
                json!([{"check": "nope"}]),
                "check 1: unknown variant `nope`",
            ),
            (json!([{"check": "issues"}]), "missing field `count`"),
            (
                json!([{"check": "issues", "count": 1, "extra": 2}]),
                "unknown field `extra`",
            ),
            (
                json!([{"check": "paid_once", "name": ""}]),
                "\"name\" must be",
            ),
            (
                json!([{"check": "paid_once"}, {"check": "file_contains", "path": "../x", "text": "a"}]),
                "check 2: workspace path \"../x\"",
            ),
            (
                json!([{"check": "file_contains", "path": "/etc/passwd", "text": "a"}]),
                "plain file name",
            ),
            (
                json!([{"check": "file_contains", "path": "src/a.rs", "text": "a"}]),
                "plain file name",
            ),
        ];
        for (value, want) in cases {
            let e = parse_catalog(&value).unwrap_err();
            assert!(e.contains(want), "{want:?} not in {e:?}");
        }
    }

    #[test]
    fn evaluates_counts_files_answer_and_usage() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.rs"), "fn fixed() {}").unwrap();
        let issues = [
            issue(1, "A", "body of a", &["seen again", "fixed in x"]),
            issue(2, "B", "b", &[]),
            issue(3, "B", "b", &[]),
        ];
        let ev = Evidence {
            issues: &issues,
            workspace: dir.path(),
            answer: "filed #1",
            turns: 4,
            tokens: (10, 2),
            recorded_tokens: (10, 2),
        };
        let catalog = parse_catalog(&json!([
            {"check": "issue_filed", "title": "A", "body_contains": ["of a"]},
            {"check": "issue_filed", "title": "B"},
            {"check": "issue_filed", "title": "A", "body_contains": ["nope"]},
            {"check": "issues", "count": 3},
            {"check": "comment", "on": "A", "contains": "fixed"},
            {"check": "comment", "on": "A", "contains": "e"},
            {"check": "comments", "count": 2},
            {"check": "file_contains", "path": "a.rs", "text": "fixed"},
            {"check": "file_lacks", "path": "a.rs", "text": "fixed"},
            {"check": "file_contains", "path": "missing.rs", "text": "x"},
            {"check": "file_contains", "path": "a.rs", "text": "fixed", "times": 1},
            {"check": "file_contains", "path": "a.rs", "text": "f", "times": 1},
            {"check": "answer_contains", "text": "#1"},
            {"check": "turns", "count": 4},
            {"check": "turns", "count": 5},
            {"check": "paid_once"},
        ]))
        .unwrap();
        let verdicts = evaluate(&catalog, &ev);
        let passed: Vec<bool> = verdicts.iter().map(|v| v.passed).collect();
        assert_eq!(
            passed,
            [
                true, false, false, true, true, false, true, true, false, false, true, false, true,
                true, false, true
            ]
        );
        assert_eq!(
            verdicts[1].detail.as_deref(),
            Some("found 2 issues with that title, expected 1")
        );
        assert_eq!(
            verdicts[5].detail.as_deref(),
            Some("found 2 such comments, expected 1")
        );
        assert!(verdicts[9].detail.as_ref().unwrap().contains("cannot read"));
        assert_eq!(
            verdicts[11].detail.as_deref(),
            Some("found 2 occurrences in a.rs, expected 1")
        );
    }
}
