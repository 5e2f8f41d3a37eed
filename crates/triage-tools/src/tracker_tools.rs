//! `issue_file`, `issue_comment` and `search` against the fake tracker, in
//! process or over HTTP ([`Backend`]).

use serde_json::{json, Value};
use tracker::{Mode, Request, Response};

use crate::backend::{Answer, Backend};
use crate::str_arg;
use agent::state::Role;
use agent::tool::{CallContext, Effect, Keys, Lookup, Tool, ToolError, ToolOutput};

/// What `issue_file` answers: `{"issue": N}`. Public so a scripted person
/// can answer the ladder's question in the tool's own words.
pub fn issue_output(number: u64) -> String {
    json!({ "issue": number }).to_string()
}

/// What `issue_comment` answers: `{"issue": N, "comment": ID}`.
pub fn comment_output(issue: u64, id: u64) -> String {
    json!({ "issue": issue, "comment": id }).to_string()
}

fn output(response: &Response) -> String {
    match response {
        Response::Issue { number } => issue_output(*number),
        Response::Comment { issue, id } => comment_output(*issue, *id),
    }
}

/// The key policy of a tool on `tracker`: a keyed tracker honours keys (for
/// `keep_for`, or for as long as the service publishes), a keyless one
/// ignores them, so sending one would promise a safety that is not there.
fn keys_of(tracker: &Backend, keep_for: Option<u64>) -> Keys {
    match tracker.mode() {
        Mode::Keyed => Keys::Honoured {
            keep_for: keep_for.or_else(|| tracker.published_key_ttl()),
        },
        Mode::Keyless => Keys::None,
    }
}

fn lookup(tracker: &Backend, req: &Request, key: Option<&str>) -> Lookup {
    match tracker.lookup(req, key) {
        Answer::Found(r) => Lookup::Found(ToolOutput::ok(output(&r))),
        Answer::NotFound => Lookup::NotFound,
        Answer::CantTell(why) => Lookup::CantTell(why),
    }
}

/// `issue_file {title, body, cause?}`: files an issue. Changes the tracker;
/// sends the call's key when the tracker honours keys.
///
/// Refile guard: a filing for a `cause` (default: the title) this run
/// already filed is refused with the existing issue's number. Keys cannot
/// catch that case, since the model's second filing is a fresh call with a
/// fresh key.
#[derive(Clone, Debug)]
pub struct IssueFile {
    tracker: Backend,
    keep_keys_for: Option<u64>,
    send_epoch: bool,
}

impl IssueFile {
    /// `issue_file` on `tracker`; keys never expire (in process) or expire
    /// when the service says (over HTTP).
    pub fn new(tracker: impl Into<Backend>) -> IssueFile {
        IssueFile {
            tracker: tracker.into(),
            keep_keys_for: None,
            send_epoch: true,
        }
    }

    /// The tracker keeps keys for `ttl` clock units (match
    /// [`tracker::Tracker::with_key_ttl`] and the agent's clock).
    pub fn keep_keys_for(mut self, ttl: u64) -> IssueFile {
        self.keep_keys_for = Some(ttl);
        self
    }

    /// Send requests without the run and its fencing epoch, as a client
    /// that knows nothing of fencing would: a tracker cannot tell a process
    /// paused past its lease from the run's holder (the zombie sweep's
    /// "epoch not sent" rows). Sent by default.
    pub fn without_epoch(mut self) -> IssueFile {
        self.send_epoch = false;
        self
    }

    fn request(args: &Value) -> Result<Request, ToolError> {
        Ok(Request::FileIssue {
            title: str_arg("issue_file", args, "title")?.to_owned(),
            body: str_arg("issue_file", args, "body")?.to_owned(),
        })
    }

    fn cause(args: &Value) -> Option<&str> {
        match args.get("cause") {
            Some(Value::String(c)) => Some(c),
            _ => args.get("title").and_then(Value::as_str),
        }
    }

    /// The issue an earlier, answered `issue_file` call of this run filed
    /// for `cause`, with that call's ID.
    fn filed_before(ctx: &CallContext<'_>, cause: &str) -> Option<(u64, String)> {
        let same_cause: Vec<&str> = ctx
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .flat_map(|m| &m.calls)
            .filter(|c| c.tool == "issue_file" && c.id != ctx.call_id)
            .filter(|c| {
                serde_json::from_str::<Value>(&c.args)
                    .ok()
                    .is_some_and(|a| IssueFile::cause(&a) == Some(cause))
            })
            .map(|c| c.id.as_str())
            .collect();
        ctx.messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .filter_map(|m| {
                let id = m.call_id.as_deref()?;
                if !same_cause.contains(&id) {
                    return None;
                }
                let v: Value = serde_json::from_str(&m.text).ok()?;
                if v.get("error").is_some() {
                    return None;
                }
                Some((v.get("issue")?.as_u64()?, id.to_owned()))
            })
            .next()
    }
}

impl Tool for IssueFile {
    fn name(&self) -> &str {
        "issue_file"
    }
    fn description(&self) -> &str {
        "File a new issue in the tracker. Refused if this run already filed one for the same cause. Returns the issue's number."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "title": {"type": "string"},
            "body": {"type": "string"},
            "cause": {"type": "string", "description": "a short name of the crash group or cause (default: the title); a second filing for the same cause is refused"}},
            "required": ["title", "body"], "additionalProperties": false})
    }
    fn effect(&self) -> Effect {
        Effect::Changes
    }
    fn keys(&self) -> Keys {
        keys_of(&self.tracker, self.keep_keys_for)
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let req = IssueFile::request(args)?;
        if let Some(cause) = IssueFile::cause(args) {
            if let Some((number, call)) = IssueFile::filed_before(ctx, cause) {
                return Ok(ToolOutput {
                    output: json!({
                        "error": format!("refile refused: cause {cause:?} was already filed by this run as issue #{number} (call {call})"),
                        "issue": number,
                    })
                    .to_string(),
                    is_error: true,
                    ..ToolOutput::default()
                });
            }
        }
        self.tracker
            .apply("issue_file", &req, ctx, self.send_epoch)
            .map(|r| ToolOutput::ok(output(&r)))
    }
    fn lookup(&self, ctx: &CallContext<'_>, args: &Value) -> Lookup {
        match IssueFile::request(args) {
            Ok(req) => lookup(&self.tracker, &req, ctx.key),
            Err(e) => Lookup::CantTell(e.to_string()),
        }
    }
}

/// `issue_comment {issue, body}`: comments on an issue. Changes the
/// tracker; keyed like `issue_file`.
#[derive(Clone, Debug)]
pub struct IssueComment {
    tracker: Backend,
    keep_keys_for: Option<u64>,
    send_epoch: bool,
}

impl IssueComment {
    /// `issue_comment` on `tracker`; keys as for [`IssueFile::new`].
    pub fn new(tracker: impl Into<Backend>) -> IssueComment {
        IssueComment {
            tracker: tracker.into(),
            keep_keys_for: None,
            send_epoch: true,
        }
    }

    /// The tracker keeps keys for `ttl` clock units.
    pub fn keep_keys_for(mut self, ttl: u64) -> IssueComment {
        self.keep_keys_for = Some(ttl);
        self
    }

    /// Send requests without the run and its fencing epoch, as a client
    /// that knows nothing of fencing would: a tracker cannot tell a process
    /// paused past its lease from the run's holder (the zombie sweep's
    /// "epoch not sent" rows). Sent by default.
    pub fn without_epoch(mut self) -> IssueComment {
        self.send_epoch = false;
        self
    }

    fn request(args: &Value) -> Result<Request, ToolError> {
        let issue = match args.get("issue") {
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) => s.trim_start_matches('#').parse().ok(),
            _ => None,
        }
        .ok_or_else(|| {
            ToolError::Failed(format!(
                "issue_comment: argument \"issue\" must be an issue number (arguments: {args})"
            ))
        })?;
        Ok(Request::Comment {
            issue,
            body: str_arg("issue_comment", args, "body")?.to_owned(),
        })
    }
}

impl Tool for IssueComment {
    fn name(&self) -> &str {
        "issue_comment"
    }
    fn description(&self) -> &str {
        "Add a comment to an existing issue."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "issue": {"type": "integer", "description": "the issue's number"},
            "body": {"type": "string"}},
            "required": ["issue", "body"], "additionalProperties": false})
    }
    fn effect(&self) -> Effect {
        Effect::Changes
    }
    fn keys(&self) -> Keys {
        keys_of(&self.tracker, self.keep_keys_for)
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let req = IssueComment::request(args)?;
        self.tracker
            .apply("issue_comment", &req, ctx, self.send_epoch)
            .map(|r| ToolOutput::ok(output(&r)))
    }
    fn lookup(&self, ctx: &CallContext<'_>, args: &Value) -> Lookup {
        match IssueComment::request(args) {
            Ok(req) => lookup(&self.tracker, &req, ctx.key),
            Err(e) => Lookup::CantTell(e.to_string()),
        }
    }
}

/// `search {query}`: issues whose title or body contains the query. Reads
/// only, so it needs no marker and a repeat is harmless.
#[derive(Clone, Debug)]
pub struct Search {
    tracker: Backend,
}

impl Search {
    /// `search` on `tracker`.
    pub fn new(tracker: impl Into<Backend>) -> Search {
        Search {
            tracker: tracker.into(),
        }
    }
}

impl Tool for Search {
    fn name(&self) -> &str {
        "search"
    }
    fn description(&self) -> &str {
        "Search the tracker's issues by words in their titles and bodies. Returns {\"issues\": [{\"number\", \"title\"}]}."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "query": {"type": "string", "description": "words to look for"}},
            "required": ["query"], "additionalProperties": false})
    }
    fn effect(&self) -> Effect {
        Effect::ReadsOnly
    }
    fn call(&self, _ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let query = str_arg("search", args, "query")?;
        let issues: Vec<Value> = self
            .tracker
            .search("search", query)?
            .into_iter()
            .map(|(number, title)| json!({ "number": number, "title": title }))
            .collect();
        Ok(ToolOutput::ok(json!({ "issues": issues }).to_string()))
    }
}
