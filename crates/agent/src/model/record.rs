//! Recording a run's replies as a transcript, so a live run becomes a
//! replayable, sweepable job.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::state::{Message, Role, ToolCall, Usage};
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::model::{Model, ModelError, Reply};

/// A [`Model`] that passes each request to `inner` and writes the replies
/// of the run so far to a file, in the transcript format
/// [`Transcript`](crate::model::Transcript) reads (text, calls with their IDs and
/// arguments, usage).
///
/// The file always matches the conversation the loop sent: on each reply,
/// the earlier replies are the conversation's assistant messages (with the
/// usage recorded for them, when the file has it), and the new reply
/// follows. So a reply asked again after a crash (it arrived but was never
/// saved) replaces the lost one, and a resumed run recording to the same
/// file continues it. Once the run's final reply (one without calls) is
/// written, the file replays to the same tool calls.
///
/// Arguments are written as a JSON object when the model's raw text is
/// compact JSON, and otherwise as a string holding the raw text, so a
/// replay gets the very same bytes, invalid JSON included.
///
/// The file is replaced on every reply (written to a temporary file beside
/// it, then renamed; missing directories are created), so a crash leaves
/// the last complete version. On unix it is readable by its owner only
/// (mode `0600`), like every other file a run writes: a recording holds the
/// whole conversation.
#[derive(Debug)]
pub struct Recording<M> {
    inner: M,
    path: PathBuf,
    header: Map<String, Value>,
    replies: Mutex<Vec<Reply>>,
}

/// Why a recording cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The existing file cannot be read.
    #[error("{}: cannot read the recording: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The existing file is not a recording of the expected shape.
    #[error("{}: not a recording to continue ({reason})", path.display())]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

#[derive(Deserialize)]
struct Existing {
    #[serde(default)]
    replies: Vec<ExistingReply>,
}

#[derive(Deserialize)]
struct ExistingReply {
    #[serde(default)]
    text: String,
    #[serde(default)]
    calls: Vec<ExistingCall>,
    #[serde(default)]
    usage: ExistingUsage,
}

#[derive(Deserialize)]
struct ExistingCall {
    id: String,
    tool: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Default, Deserialize)]
struct ExistingUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    dollars: f64,
}

impl<M: Model> Recording<M> {
    /// Record `inner`'s replies to `path`. `header` holds the file's other
    /// top-level fields, written before `replies` (at least `name` and
    /// `task`, the transcript's; a program may add its own). If `path`
    /// exists, its replies are the start of the recording.
    pub fn new(
        inner: M,
        path: impl AsRef<Path>,
        header: Map<String, Value>,
    ) -> Result<Recording<M>, RecordError> {
        let path = path.as_ref().to_path_buf();
        let replies = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let e: Existing = serde_json::from_str(&text).map_err(|e| RecordError::Shape {
                    path: path.clone(),
                    reason: e.to_string(),
                })?;
                e.replies.into_iter().map(reply_of).collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(source) => return Err(RecordError::Read { path, source }),
        };
        Ok(Recording {
            inner,
            path,
            header,
            replies: Mutex::new(replies),
        })
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The model recorded.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// The file's contents for `replies`.
    fn document(&self, replies: &[Reply]) -> Value {
        let mut doc = self.header.clone();
        doc.insert(
            "replies".into(),
            Value::Array(replies.iter().map(reply_json).collect()),
        );
        Value::Object(doc)
    }

    fn write(&self, replies: &[Reply]) -> std::io::Result<()> {
        let mut text =
            serde_json::to_string_pretty(&self.document(replies)).map_err(std::io::Error::other)?;
        text.push('\n');
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(parent) = self.path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let tmp = self.path.with_file_name(format!(".{name}.recording.tmp"));
        // A leftover from a crash may have other permissions; start afresh.
        match std::fs::remove_file(&tmp) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&tmp)?;
        std::io::Write::write_all(&mut file, text.as_bytes())?;
        drop(file);
        std::fs::rename(&tmp, &self.path)
    }
}

fn reply_of(r: ExistingReply) -> Reply {
    Reply {
        text: r.text,
        calls: r
            .calls
            .into_iter()
            .map(|c| ToolCall {
                id: c.id,
                tool: c.tool,
                args: match c.args {
                    None => "{}".to_owned(),
                    Some(Value::String(raw)) => raw,
                    Some(v) => v.to_string(),
                },
            })
            .collect(),
        usage: Usage {
            input_tokens: r.usage.input_tokens,
            output_tokens: r.usage.output_tokens,
            dollars: r.usage.dollars,
        },
    }
}

/// `args` as the transcript writes them: the JSON value when the raw text
/// is exactly its compact form (so it reads back byte for byte), else the
/// raw text as a string.
fn args_json(raw: &str) -> Value {
    match serde_json::from_str::<Value>(raw) {
        Ok(v) if !v.is_string() && serde_json::to_string(&v).is_ok_and(|s| s == raw) => v,
        _ => Value::String(raw.to_owned()),
    }
}

fn reply_json(r: &Reply) -> Value {
    let mut o = Map::new();
    o.insert("text".into(), Value::String(r.text.clone()));
    if !r.calls.is_empty() {
        o.insert(
            "calls".into(),
            r.calls
                .iter()
                .map(
                    |c| serde_json::json!({"id": c.id, "tool": c.tool, "args": args_json(&c.args)}),
                )
                .collect(),
        );
    }
    o.insert(
        "usage".into(),
        serde_json::json!({
            "input_tokens": r.usage.input_tokens,
            "output_tokens": r.usage.output_tokens,
            "dollars": r.usage.dollars,
        }),
    );
    Value::Object(o)
}

impl<M: Model> Model for Recording<M> {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        let reply = self.inner.reply(conversation)?;
        let mut recorded = self.replies.lock().unwrap_or_else(|p| p.into_inner());
        // The earlier replies are what the conversation holds; keep the
        // recorded usage where the recorded reply is the saved one.
        let earlier: Vec<Reply> = conversation
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .enumerate()
            .map(|(i, m)| match recorded.get(i) {
                Some(r) if r.text == m.text && r.calls == m.calls => r.clone(),
                _ => Reply {
                    text: m.text.clone(),
                    calls: m.calls.clone(),
                    usage: Usage::default(),
                },
            })
            .collect();
        *recorded = earlier;
        recorded.push(reply.clone());
        self.write(&recorded).map_err(|e| {
            ModelError::Failed(format!(
                "{}: cannot write the recording: {e}",
                self.path.display()
            ))
        })?;
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ScriptedModel, Transcript};

    #[test]
    fn a_recording_replays_to_the_same_calls_and_follows_the_conversation() {
        let t = Transcript::parse(
            r#"{"name": "j", "task": "t", "replies": [
                {"text": "a", "calls": [{"id": "c1", "tool": "x", "args": {"k": 1}},
                                        {"id": "c2", "tool": "x", "args": "{not json"},
                                        {"id": "c3", "tool": "x", "args": "{\"spaced\": 1}"}],
                 "usage": {"input_tokens": 3, "output_tokens": 1, "dollars": 0.1}},
                {"text": "done", "usage": {"input_tokens": 4}}]}"#,
            "t.json",
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.json");
        let mut header = Map::new();
        header.insert("name".into(), "j".into());
        header.insert("task".into(), "t".into());
        let rec = Recording::new(ScriptedModel::new(t.clone()), &path, header.clone()).unwrap();
        let mut conv = vec![Message {
            role: Role::User,
            text: "t".into(),
            ..Message::default()
        }];
        let first = rec.reply(&conv).unwrap();
        // Asked again (the reply was lost in a crash): still one reply.
        let again = rec.reply(&conv).unwrap();
        assert_eq!(first, again);
        let partial = std::fs::read_to_string(&path).unwrap();
        assert!(
            Transcript::parse(&partial, &path).is_err(),
            "no final reply yet"
        );
        conv.push(Message {
            role: Role::Assistant,
            text: first.text.clone(),
            calls: first.calls.clone(),
            call_id: None,
        });
        // A new life continues the same file.
        drop(rec);
        let rec = Recording::new(ScriptedModel::new(t.clone()), &path, header).unwrap();
        rec.reply(&conv).unwrap();
        let replayed = Transcript::load(&path).unwrap();
        assert_eq!(replayed.replies, t.replies);
        assert_eq!(replayed.task, "t");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(r#""args": {"#), "{text}");
        assert!(text.contains(r#""args": "{not json""#), "{text}");
    }

    /// The recording is its owner's only (`0600`), as every other file a
    /// run writes, whatever a crash left behind.
    #[cfg(unix)]
    #[test]
    fn a_recording_is_written_for_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let t =
            Transcript::parse(r#"{"task": "t", "replies": [{"text": "done"}]}"#, "t.json").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.json");
        // A temporary file a crash left, readable by everyone.
        let tmp = dir.path().join(".rec.json.recording.tmp");
        std::fs::write(&tmp, "half").unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o644)).unwrap();
        let rec = Recording::new(ScriptedModel::new(t), &path, header()).unwrap();
        rec.reply(&[Message::default()]).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        assert!(!tmp.exists());
        // Written again (the next reply), still the owner's only.
        rec.reply(&[Message::default()]).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    fn header() -> Map<String, Value> {
        let mut header = Map::new();
        header.insert("name".into(), "j".into());
        header.insert("task".into(), "t".into());
        header
    }

    fn assistant(text: &str, call: &str) -> Message {
        Message {
            role: Role::Assistant,
            text: text.into(),
            calls: vec![ToolCall {
                id: call.into(),
                tool: "x".into(),
                args: "{}".into(),
            }],
            call_id: None,
        }
    }

    /// A recording into a directory that does not exist yet creates it
    /// (and its parents) and writes the file there.
    #[test]
    fn a_recording_into_a_new_directory_creates_it() {
        let t =
            Transcript::parse(r#"{"task": "t", "replies": [{"text": "done"}]}"#, "t.json").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("new").join("deeper").join("rec.json");
        let rec = Recording::new(ScriptedModel::new(t.clone()), &path, header()).unwrap();
        assert_eq!(rec.reply(&[Message::default()]).unwrap().text, "done");
        assert_eq!(Transcript::load(&path).unwrap().replies, t.replies);
    }

    /// The usage read from the file is kept for a reply only where the
    /// conversation's assistant message is that very reply (same text and
    /// same calls); a message that differs in its text or in its calls is
    /// written as the conversation has it, with no usage.
    #[test]
    fn recorded_usage_is_kept_only_for_the_reply_the_conversation_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.json");
        let usage =
            |n: u64| serde_json::json!({"input_tokens": n, "output_tokens": 0, "dollars": 0.0});
        let existing = serde_json::json!({"name": "j", "task": "t", "replies": [
            {"text": "a", "calls": [{"id": "c1", "tool": "x", "args": {}}], "usage": usage(3)},
            {"text": "b", "calls": [{"id": "c2", "tool": "x", "args": {}}], "usage": usage(5)},
            {"text": "c", "calls": [{"id": "c3", "tool": "x", "args": {}}], "usage": usage(7)},
        ]});
        std::fs::write(&path, existing.to_string()).unwrap();
        let t = Transcript::parse(
            r#"{"task": "t", "replies": [{"text": "1", "calls": [{"id": "d1", "tool": "x"}]},
                {"text": "2", "calls": [{"id": "d2", "tool": "x"}]},
                {"text": "3", "calls": [{"id": "d3", "tool": "x"}]},
                {"text": "done", "usage": {"input_tokens": 9}}]}"#,
            "t.json",
        )
        .unwrap();
        let rec = Recording::new(ScriptedModel::new(t), &path, header()).unwrap();
        let conversation = [
            Message::default(),
            // The recorded reply: its usage stays.
            assistant("a", "c1"),
            // The recorded text, other calls.
            assistant("b", "c9"),
            // Other text, the recorded calls.
            assistant("z", "c3"),
        ];
        rec.reply(&conversation).unwrap();
        let written: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let replies: Vec<(&str, &str, u64)> = written["replies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["text"].as_str().unwrap(),
                    r["calls"][0]["id"].as_str().unwrap_or(""),
                    r["usage"]["input_tokens"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            replies,
            [
                ("a", "c1", 3),
                ("b", "c9", 0),
                ("z", "c3", 0),
                ("done", "", 9)
            ]
        );
    }
}
