//! A support agent of your own, built on `agent`: it searches a ticket
//! service and files a ticket there, over HTTP, in a run that survives a
//! crash without filing twice. The guide `docs/build-your-agent.md` walks
//! through it.
//!
//! The ticket service here is the workspace's fake tracker
//! (`POST /issues` with an `Idempotency-Key` header, `POST /lookup`,
//! `GET /search`); start one, then run the agent against it:
//!
//! ```sh
//! cargo run -p tracker -- serve --dir /tmp/tickets --addr 127.0.0.1:8080
//! cargo run -p agent --example tickets -- --service http://127.0.0.1:8080 --run support-4711
//! cargo run -p agent --example tickets -- --run support-4711 --answer
//! ```
//!
//! Without `OPENAI_API_KEY` the model's replies are scripted (the run needs
//! no key); with it, they come from the model (`OPENAI_MODEL`, default
//! `gpt-4o-mini`).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use agent::approve::{ApproveAll, Approver, TerminalApprover};
use agent::model::{Model, ScriptedModel, Transcript};
use agent::observe::Print;
use agent::provider::{ApiKey, OpenAi};
use agent::tool::{
    http_outcome, CallContext, Effect, HttpEnd, HttpNext, Keys, Lookup, Tool, ToolError,
    ToolOutput, Tools,
};
use agent::{Agent, Limits, RunResult};
use durable::{DiskDir, RunId};
use serde_json::{json, Value};

/// The ticket service's HTTP client: no error for a status (the tool reads
/// every status itself), and a bound on every request.
fn http_client() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into()
}

/// How a request ended, for [`http_outcome`]: a status, or no connection
/// at all (nothing was sent), or an answer lost after sending.
fn send(request: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> (HttpEnd, String) {
    match request {
        Ok(mut response) => {
            let status = response.status().as_u16();
            match response.body_mut().read_to_string() {
                Ok(body) => (HttpEnd::Status(status), body),
                // The status came, the body broke off: the answer is lost.
                Err(e) => (HttpEnd::Lost, e.to_string()),
            }
        }
        Err(e) => {
            let not_sent = match &e {
                ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => true,
                ureq::Error::Timeout(t) => {
                    matches!(t, ureq::Timeout::Connect | ureq::Timeout::Resolve)
                }
                ureq::Error::Io(io) => io.kind() == std::io::ErrorKind::ConnectionRefused,
                _ => false,
            };
            let end = if not_sent {
                HttpEnd::NotSent
            } else {
                HttpEnd::Lost
            };
            (end, e.to_string())
        }
    }
}

/// `file_ticket {title, body}`: files a ticket. It changes the service, so
/// it sends the call's idempotency key, asks a person first, and can look
/// up whether a call already happened.
struct FileTicket {
    service: String,
    http: ureq::Agent,
}

/// How many times `file_ticket` sends a request the service answers `409`.
const TRIES: u32 = 5;

impl FileTicket {
    /// The request's body: the arguments the model wrote, checked.
    fn body(args: &Value) -> Result<Value, ToolError> {
        match (args["title"].as_str(), args["body"].as_str()) {
            (Some(title), Some(body)) => Ok(json!({"title": title, "body": body})),
            _ => Err(ToolError::Failed(format!(
                "file_ticket: give a \"title\" and a \"body\" as strings, not {args}"
            ))),
        }
    }
}

impl Tool for FileTicket {
    fn name(&self) -> &str {
        "file_ticket"
    }
    fn description(&self) -> &str {
        "File a new ticket. Search first: a ticket filed twice is a ticket too many."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "title": {"type": "string"},
            "body": {"type": "string"}},
            "required": ["title", "body"], "additionalProperties": false})
    }
    fn effect(&self) -> Effect {
        Effect::Changes
    }
    fn keys(&self) -> Keys {
        // As long as the service keeps a key (here a day, in seconds of the
        // agent's clock): a crashed call is resent with its key within
        // that time, and looked up after it.
        Keys::Honoured {
            keep_for: Some(24 * 60 * 60),
        }
    }
    fn needs_approval(&self) -> bool {
        true
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let body = FileTicket::body(args)?;
        let key = ctx.key.unwrap_or_default();
        let (mut attempt, mut pause) = (1, Duration::from_millis(50));
        loop {
            let request = self
                .http
                .post(format!("{}/issues", self.service))
                .header("Idempotency-Key", format!("\"{key}\""))
                .content_type("application/json")
                .send(body.to_string());
            let (end, answer) = send(request);
            let message = format!("file_ticket: {answer}");
            match http_outcome(end, attempt == TRIES, message)? {
                HttpNext::Done => return Ok(ToolOutput::ok(answer)),
                // The key's first request is still in flight: wait, resend.
                HttpNext::Retry => std::thread::sleep(pause),
            }
            (attempt, pause) = (attempt + 1, pause * 2);
        }
    }
    fn lookup(&self, ctx: &CallContext<'_>, args: &Value) -> Lookup {
        let Ok(mut query) = FileTicket::body(args) else {
            return Lookup::CantTell("the call's arguments are not a ticket".into());
        };
        query["op"] = json!("file_issue");
        let mut request = self.http.post(format!("{}/lookup", self.service));
        if let Some(key) = ctx.key {
            request = request.header("Idempotency-Key", format!("\"{key}\""));
        }
        let answer = match send(request.send(query.to_string())) {
            (HttpEnd::Status(200), answer) => answer,
            (_, why) => return Lookup::CantTell(format!("the lookup failed: {why}")),
        };
        let answer: Value = serde_json::from_str(&answer).unwrap_or_default();
        match answer["outcome"].as_str() {
            Some("found") => Lookup::Found(ToolOutput::ok(answer["response"].to_string())),
            Some("not_found") => Lookup::NotFound,
            _ => Lookup::CantTell(format!("the service cannot tell: {}", answer["reason"])),
        }
    }
}

/// `search_tickets {query}`: tickets whose title or body holds the query.
/// It only reads, so it needs no key, no marker, no lookup: a repeat is
/// harmless, and an unknown outcome is simply asked again.
struct SearchTickets {
    service: String,
    http: ureq::Agent,
}

impl Tool for SearchTickets {
    fn name(&self) -> &str {
        "search_tickets"
    }
    fn description(&self) -> &str {
        "Search the tickets by words in their titles and bodies."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"query": {"type": "string"}},
               "required": ["query"], "additionalProperties": false})
    }
    fn effect(&self) -> Effect {
        Effect::ReadsOnly
    }
    fn call(&self, _ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let Some(query) = args["query"].as_str() else {
            return Err(ToolError::Failed("search_tickets: give a \"query\"".into()));
        };
        let request = self
            .http
            .get(format!("{}/search", self.service))
            .query("q", query)
            .call();
        let (end, answer) = send(request);
        // One try: a read that fails is simply asked again by the loop.
        http_outcome(end, true, format!("search_tickets: {answer}"))?;
        Ok(ToolOutput::ok(answer))
    }
}

/// The model's replies when no API key is set: a recorded run.
const SCRIPT: &str = r#"{
  "name": "support", "task": "Customer 4711: exports crash on empty input. Make sure there is one ticket for it.",
  "replies": [
    {"text": "Searching first.", "calls": [{"id": "c1", "tool": "search_tickets", "args": {"query": "export"}}]},
    {"text": "None yet; filing.", "calls": [{"id": "c2", "tool": "file_ticket",
      "args": {"title": "Export crashes on empty input", "body": "Reported by customer 4711."}}]},
    {"text": "Filed a ticket for the export crash."}]}"#;

/// The model and the task: a live model when there is an API key, told
/// about the tools in their own words (`tools.specs()`); else the script.
fn model(
    tools: &Tools,
    api_key: Option<String>,
) -> Result<(Box<dyn Model>, String), Box<dyn std::error::Error>> {
    let script = Transcript::parse(SCRIPT, "SCRIPT")?;
    let Some(key) = api_key else {
        return Ok((Box::new(ScriptedModel::new(script.clone())), script.task));
    };
    let name = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".into());
    let live = OpenAi::new(OpenAi::DEFAULT_BASE_URL, ApiKey::new(key)?, &name)?
        .with_system("You file support tickets. Search before you file.")
        .with_tools(tools.specs());
    Ok((Box::new(live), script.task))
}

/// What a stop means to whoever runs the program: an exit code each.
pub(crate) fn exit_code(e: &agent::Error) -> u8 {
    use agent::Error as E;
    match e {
        // Another process is running this run, or took it over: leave it be.
        E::Checkpoint(durable::Error::Locked { .. }) | E::Stale { .. } => 3,
        // Waiting on a person (a "later", or nobody at the terminal): run
        // the same command again to be asked again.
        E::Paused { .. } => 4,
        // The budget is spent: raise a limit to go on.
        E::TurnLimit { .. } | E::TokenLimit { .. } | E::DollarLimit { .. } => 5,
        // The service could not be reached, or kept its answer: try later.
        E::OutcomeUnknown { .. } => 6,
        // A bug (the service refused a key for good, a call names a tool
        // this program no longer has): fix it, then run again.
        E::ToolFatal { .. } | E::UnknownTool { .. } | E::BadCallId { .. } => 7,
        E::Cancelled { .. } => 130,
        // The model failed, or the checkpoint cannot be read or written.
        E::Model { .. } | E::Checkpoint(_) => 1,
    }
}

/// The command line: where the service is, where the checkpoints go, which
/// run, and whether to approve every call or ask at the terminal.
/// (`pub(crate)`: the example's test, `tests/it/guide.rs`, runs it.)
#[derive(Debug)]
pub(crate) struct Args {
    pub(crate) service: String,
    pub(crate) state: String,
    pub(crate) run: String,
    pub(crate) yes: bool,
    pub(crate) answer: bool,
}

impl Args {
    pub(crate) fn parse(mut args: impl Iterator<Item = String>) -> Result<Args, String> {
        let mut parsed = Args {
            service: "http://127.0.0.1:8080".into(),
            state: "tickets-state".into(),
            run: String::new(),
            yes: false,
            answer: false,
        };
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or(format!("{arg} needs a value"));
            match arg.as_str() {
                "--service" => parsed.service = value()?,
                "--state" => parsed.state = value()?,
                "--run" => parsed.run = value()?,
                "--yes" => parsed.yes = true,
                "--answer" => parsed.answer = true,
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if parsed.run.is_empty() {
            return Err("--run ID is required: one ID per job, never reused".into());
        }
        Ok(parsed)
    }
}

/// One life of the run named on the command line; its answer, or the exit
/// code of its stop.
pub(crate) fn run(args: &Args, api_key: Option<String>) -> Result<String, u8> {
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        eprintln!("tickets: {what}: {e}");
        1
    };
    // The run ID is yours: the same ID resumes the same run, and it is half
    // of every idempotency key, so never reuse one for another job.
    let run = RunId::parse(&args.run).map_err(|e| fail("bad --run", &e))?;
    let checkpoints = DiskDir::new(&args.state).map_err(|e| fail("bad --state", &e))?;

    if args.answer {
        // A finished run's answer, with no model, no tools, no API key.
        return match RunResult::load(&checkpoints, &run) {
            Ok(Some(result)) => Ok(result.answer),
            Ok(None) => Err(fail("no answer", &format!("run {run} has not finished"))),
            Err(e) => Err(fail("cannot read the run", &e)),
        };
    }

    let http = http_client();
    let tools = Tools::new()
        .with(FileTicket {
            service: args.service.clone(),
            http: http.clone(),
        })
        .with(SearchTickets {
            service: args.service.clone(),
            http,
        });
    let (model, task) = model(&tools, api_key).map_err(|e| fail("no model", &e))?;
    let approver: Box<dyn Approver> = if args.yes {
        Box::new(ApproveAll)
    } else {
        Box::new(TerminalApprover::stdio())
    };
    let agent = Agent::new(run, Arc::new(checkpoints), task, model, tools)
        .with_approver(approver)
        .with_observer(Print::stderr().with_prefix("tickets: "))
        .with_limits(Limits {
            max_turns: Some(20),
            max_dollars: Some(0.50),
            ..Limits::NONE
        });
    match agent.run() {
        Ok(result) => Ok(result.answer),
        Err(e) => {
            eprintln!("tickets: {e}");
            Err(exit_code(&e))
        }
    }
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("tickets: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&args, std::env::var("OPENAI_API_KEY").ok()) {
        Ok(answer) => {
            println!("{answer}");
            ExitCode::SUCCESS
        }
        Err(code) => ExitCode::from(code),
    }
}
