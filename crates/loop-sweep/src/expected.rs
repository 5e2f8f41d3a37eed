//! What the job must leave in the world, worked out from the transcript:
//! the judge's reference.

use std::collections::BTreeMap;

use agent::model::Transcript;
use agent::state::ToolCall;
use serde_json::Value;
use tracker::Request;

use crate::error::SubjectError;

/// What the job must leave in the world, worked out from the transcript.
#[derive(Clone, Debug)]
pub(crate) struct Expected {
    /// Each tracker request of the job, with its call ID.
    pub(crate) requests: Vec<(String, Request)>,
    /// Each workspace file's content once every patch applied once.
    pub(crate) files: BTreeMap<String, String>,
}

fn job_arg<'v>(
    t: &Transcript,
    call: &ToolCall,
    args: &'v Value,
    name: &str,
) -> Result<&'v Value, SubjectError> {
    args.get(name).ok_or_else(|| SubjectError::Job {
        path: t.path.clone(),
        reason: format!(
            "call {:?} ({}) has no argument {name:?}",
            call.id, call.tool
        ),
    })
}

fn job_str(
    t: &Transcript,
    call: &ToolCall,
    args: &Value,
    name: &str,
) -> Result<String, SubjectError> {
    job_arg(t, call, args, name)?
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| SubjectError::Job {
            path: t.path.clone(),
            reason: format!("call {:?}: argument {name:?} must be a string", call.id),
        })
}

impl Expected {
    pub(crate) fn of(t: &Transcript) -> Result<Expected, SubjectError> {
        let job = |reason: String| SubjectError::Job {
            path: t.path.clone(),
            reason,
        };
        let mut requests = Vec::new();
        let mut files: BTreeMap<String, String> = BTreeMap::new();
        for call in t.calls() {
            let args: Value = serde_json::from_str(&call.args).map_err(|e| {
                job(format!(
                    "call {:?}: the sweep's judge needs JSON arguments ({e})",
                    call.id
                ))
            })?;
            match call.tool.as_str() {
                "issue_file" => requests.push((
                    call.id.clone(),
                    Request::FileIssue {
                        title: job_str(t, call, &args, "title")?,
                        body: job_str(t, call, &args, "body")?,
                    },
                )),
                "issue_comment" => {
                    let issue = job_arg(t, call, &args, "issue")?.as_u64().ok_or_else(|| {
                        job(format!("call {:?}: \"issue\" must be a number", call.id))
                    })?;
                    requests.push((
                        call.id.clone(),
                        Request::Comment {
                            issue,
                            body: job_str(t, call, &args, "body")?,
                        },
                    ));
                }
                "code_patch" => {
                    let path = job_str(t, call, &args, "path")?;
                    let old = job_str(t, call, &args, "old")?;
                    let new = job_str(t, call, &args, "new")?;
                    let next = match (old.is_empty(), files.get(&path)) {
                        (true, None) => new,
                        (false, Some(c)) if c.matches(old.as_str()).count() == 1 => {
                            c.replacen(old.as_str(), &new, 1)
                        }
                        _ => {
                            return Err(job(format!(
                            "call {:?}: the patch does not apply to {path} as the job leaves it",
                            call.id
                        )))
                        }
                    };
                    files.insert(path, next);
                }
                _ => {}
            }
        }
        Ok(Expected { requests, files })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transcript that creates `f.txt` holding "one one", then patches
    /// `old` into "two".
    fn patched(old: &str) -> Result<Expected, SubjectError> {
        let doc = serde_json::json!({
            "name": "patches",
            "task": "Patch f.txt.",
            "replies": [
                {"text": "Creating.", "calls": [{"id": "c1", "tool": "code_patch",
                    "args": {"path": "f.txt", "old": "", "new": "one one"}}]},
                {"text": "Patching.", "calls": [{"id": "c2", "tool": "code_patch",
                    "args": {"path": "f.txt", "old": old, "new": "two"}}]},
                {"text": "Done."}
            ]
        });
        let t = Transcript::parse(&doc.to_string(), "patches.json").unwrap();
        Expected::of(&t)
    }

    /// The judge's expected files follow each patch, which must apply
    /// exactly once to the file as the job leaves it.
    #[test]
    fn a_patch_applies_only_where_its_old_text_occurs_once() {
        let e = patched("one one").unwrap();
        assert_eq!(e.files.get("f.txt").map(String::as_str), Some("two"));
        for old in ["one", "three"] {
            let err = patched(old).unwrap_err().to_string();
            assert!(
                err.contains("call \"c2\": the patch does not apply to f.txt"),
                "{old}: {err}"
            );
        }
    }
}
