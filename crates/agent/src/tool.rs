//! The tool seam: what a tool declares about itself, so the loop knows which
//! calls need a marker, which carry a key, and how a call with an unknown
//! outcome can be settled after a crash.
//!
//! A tool implements [`Tool`]: its name, description and argument schema
//! (told to the model, through [`Tools::specs`]), its [`Effect`] and
//! [`Keys`], [`call`](Tool::call) (given a [`CallContext`] with the call's
//! idempotency key) and optionally [`lookup`](Tool::lookup). A call returns
//! a [`ToolOutput`] or a [`ToolError`]; a tool on an HTTP service maps each
//! answer with [`http_outcome`]. [`Tools`] holds an agent's tools;
//! [`Gated`] puts one behind a person's yes.

use std::collections::BTreeMap;
use std::fmt;

use crate::state::Message;
use durable::RunId;
use serde_json::Value;

mod http;

pub use http::{http_outcome, HttpEnd, HttpNext};

/// What running a tool does to the world. The loop writes an attempt marker
/// before every call that is not [`Effect::ReadsOnly`], and the ladder's first
/// rung reruns a marked call without asking only if a repeat is harmless.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Looks only: running it twice changes nothing.
    ReadsOnly,
    /// Changes something, but a repeat with the same arguments leaves the
    /// world as one call would (setting a value, not adding one).
    Idempotent,
    /// Changes something, and a repeat may change it again (files an issue,
    /// sends a mail, applies a patch).
    Changes,
}

/// Whether a tool sends the call's idempotency key to its service, and how
/// long that service keeps keys.
///
/// A key only makes a repeat harmless while the service still remembers it
/// (Stripe's v1 API may drop one after 24 hours); an expired key counts as no
/// key, and the ladder moves on to the lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Keys {
    /// The tool sends no key, or its service ignores keys.
    #[default]
    None,
    /// The tool sends the key and the service honours it: a repeat with a
    /// held key gets the first answer and changes nothing.
    Honoured {
        /// How long the service keeps a key, in the units of the agent's
        /// [`Clock`](crate::clock::Clock) (seconds for [`SystemClock`](crate::clock::SystemClock));
        /// `None`: for ever.
        keep_for: Option<u64>,
    },
}

impl Keys {
    /// Whether a call made with this policy carries a key.
    pub fn sends(self) -> bool {
        matches!(self, Keys::Honoured { .. })
    }

    /// Whether the service still holds a key sent at `sent_at`, at `now`.
    pub fn held(self, sent_at: u64, now: u64) -> bool {
        match self {
            Keys::None => false,
            Keys::Honoured { keep_for: None } => true,
            Keys::Honoured {
                keep_for: Some(ttl),
            } => now.saturating_sub(sent_at) < ttl,
        }
    }
}

/// What a tool receives beside its arguments: the harness's channel.
///
/// The idempotency key travels here, like an `Idempotency-Key` header or MCP
/// `_meta`, never inside the arguments the model writes: a model could drop,
/// change or invent a key, and the key's whole value is that every retry of
/// one call carries the same one.
#[derive(Clone, Copy, Debug)]
pub struct CallContext<'a> {
    /// The run making the call.
    pub run: &'a RunId,
    /// The model's ID for the call.
    pub call_id: &'a str,
    /// `durable::key(run, call_id)` if the tool sends keys ([`Keys::sends`]),
    /// the same on every retry in every process.
    pub key: Option<&'a str>,
    /// This process's fencing epoch of the run (the checkpoint's
    /// [`epoch`](durable::Checkpoint::epoch)): it rises every time a process
    /// takes the run over. Send it with the run beside the key (the
    /// tracker's `Crashsweep-Run` and `Crashsweep-Epoch` headers, or MCP
    /// `_meta`), so a receiver that has seen a newer holder refuses a stale
    /// one's request even without keys; that refusal is
    /// [`ToolError::Stale`].
    pub epoch: u64,
    /// The conversation so far, including the results of this reply's
    /// earlier calls: what the run already did (the refile guard reads it).
    pub messages: &'a [Message],
}

/// What a call produced: the text the model sees, and the workspace files
/// it wrote, whose SHA-256 the loop records in the state so a resume can
/// tell whether someone else changed them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// The result text, as the model will see it.
    pub output: String,
    /// Whether the output reports a failure the model should see.
    pub is_error: bool,
    /// Workspace-relative path → SHA-256 (lowercase hex) of what the call
    /// left there.
    pub files: BTreeMap<String, String>,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(output: impl Into<String>) -> ToolOutput {
        ToolOutput {
            output: output.into(),
            ..ToolOutput::default()
        }
    }

    /// A failure the model sees, as `{"error": message}`: tool results are
    /// JSON, so an error stays recognisable in the conversation (which keeps
    /// only the text).
    pub fn error(message: impl fmt::Display) -> ToolOutput {
        ToolOutput {
            output: serde_json::json!({ "error": message.to_string() }).to_string(),
            is_error: true,
            files: BTreeMap::new(),
        }
    }

    /// Record that the call left `bytes` at `path` in the workspace.
    pub fn with_file(mut self, path: &str, bytes: &[u8]) -> ToolOutput {
        self.files
            .insert(path.to_owned(), durable::hash::sha256_hex(bytes));
        self
    }
}

/// Why a call did not produce an output.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The call failed and certainly changed nothing (bad arguments, a
    /// refusal). The model sees the message as an error result.
    #[error("{0}")]
    Failed(String),
    /// The outcome is unknown: the request may have acted (the connection
    /// dropped after it was sent). The loop treats it like a marker without a
    /// result and sends the call up the resolution ladder.
    #[error("outcome unknown: {0}")]
    Unknown(String),
    /// The service refused the call in a way that retrying or showing the
    /// model cannot mend: it means a bug, such as one idempotency key sent
    /// with two different requests (HTTP `422`). The loop stops the run
    /// with [`Error::ToolFatal`](crate::Error::ToolFatal); the call's marker
    /// stays, so a rerun after the fix settles it on the ladder.
    #[error("refused for good: {0}")]
    Fatal(String),
    /// The receiver has seen a newer holder of this run (a higher epoch
    /// than [`CallContext::epoch`]; the tracker answers `412`): another
    /// process took the run over, and this one must stop. The loop stops at
    /// once with [`Error::Stale`](crate::Error::Stale): the model never
    /// sees it, and this process saves nothing more.
    #[error("this process no longer holds the run: {0}")]
    Stale(String),
}

/// The answer to "did this call happen?", the ladder's second rung.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// It happened; this is its result (as the call would have returned it).
    Found(ToolOutput),
    /// It certainly did not happen, so running it now makes no duplicate.
    /// Only a lookup that is sure may say this.
    NotFound,
    /// The service cannot tell (a search index that lags behind writes, no
    /// lookup at all): the question goes up to a person. Says why.
    CantTell(String),
}

/// A tool the model can call.
///
/// Besides running, a tool declares what the loop needs to run it safely
/// across crashes: its [`Effect`], its [`Keys`], whether it needs a person's
/// approval, which workspace files it may write, and optionally a
/// [`lookup`](Tool::lookup) that can tell whether a call already happened.
pub trait Tool: Send {
    /// The name the model calls it by.
    fn name(&self) -> &str;

    /// What the tool does, in words for the model (a provider sends it with
    /// the name and [`parameters`](Tool::parameters); see
    /// [`Tools::specs`]). Default: none, for a tool only a scripted model
    /// calls.
    fn description(&self) -> &str {
        ""
    }

    /// A JSON Schema (an `object` schema) of the arguments, for the model.
    /// Default: any object.
    fn parameters(&self) -> Value {
        serde_json::json!({"type": "object"})
    }

    /// What a call does to the world; decides markers and the ladder's first
    /// rung.
    fn effect(&self) -> Effect;

    /// Whether calls carry an idempotency key the service honours, and for
    /// how long. Default: no key.
    fn keys(&self) -> Keys {
        Keys::None
    }

    /// Whether a person must approve each call before it runs. The marker of
    /// an approved call is written after the yes, so a crash while the person
    /// decides leaves nothing to resolve, and a saved yes is never asked for
    /// again. Default: no.
    fn needs_approval(&self) -> bool {
        false
    }

    /// Workspace files a call with `args` may write. A resume skips these in
    /// its workspace check while the call is marked and unanswered: the
    /// call's own write is the ladder's to settle, not a change by someone
    /// else. Default: none.
    fn touches(&self, _args: &Value) -> Vec<String> {
        Vec::new()
    }

    /// Run the call. `args` is the model's arguments, already parsed as
    /// JSON; the key is in `ctx`, never in `args`.
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError>;

    /// Did the call with this context and these arguments already happen?
    /// Answer [`Lookup::NotFound`] only when certain. Default: no lookup.
    fn lookup(&self, _ctx: &CallContext<'_>, _args: &Value) -> Lookup {
        Lookup::CantTell(format!("{} has no lookup", self.name()))
    }
}

impl<T: Tool + ?Sized> Tool for Box<T> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn description(&self) -> &str {
        (**self).description()
    }
    fn parameters(&self) -> Value {
        (**self).parameters()
    }
    fn effect(&self) -> Effect {
        (**self).effect()
    }
    fn keys(&self) -> Keys {
        (**self).keys()
    }
    fn needs_approval(&self) -> bool {
        (**self).needs_approval()
    }
    fn touches(&self, args: &Value) -> Vec<String> {
        (**self).touches(args)
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        (**self).call(ctx, args)
    }
    fn lookup(&self, ctx: &CallContext<'_>, args: &Value) -> Lookup {
        (**self).lookup(ctx, args)
    }
}

/// A tool behind an approval gate: the same tool, but every call waits for a
/// person's yes. Lets one tool be gated in one run and not in another.
#[derive(Debug)]
pub struct Gated<T>(pub T);

impl<T: Tool> Tool for Gated<T> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn description(&self) -> &str {
        self.0.description()
    }
    fn parameters(&self) -> Value {
        self.0.parameters()
    }
    fn effect(&self) -> Effect {
        self.0.effect()
    }
    fn keys(&self) -> Keys {
        self.0.keys()
    }
    fn needs_approval(&self) -> bool {
        true
    }
    fn touches(&self, args: &Value) -> Vec<String> {
        self.0.touches(args)
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        self.0.call(ctx, args)
    }
    fn lookup(&self, ctx: &CallContext<'_>, args: &Value) -> Lookup {
        self.0.lookup(ctx, args)
    }
}

/// The tools of one agent, by name.
#[derive(Default)]
pub struct Tools {
    by_name: BTreeMap<String, Box<dyn Tool>>,
}

impl fmt::Debug for Tools {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl Tools {
    /// No tools.
    pub fn new() -> Tools {
        Tools::default()
    }

    /// Add `tool`, replacing any tool of the same name.
    pub fn with(mut self, tool: impl Tool + 'static) -> Tools {
        self.insert(tool);
        self
    }

    /// Add `tool`, replacing (and returning) any tool of the same name.
    pub fn insert(&mut self, tool: impl Tool + 'static) -> Option<Box<dyn Tool>> {
        self.by_name.insert(tool.name().to_owned(), Box::new(tool))
    }

    /// The tool called `name`.
    pub fn get(&self, name: &str) -> Option<&dyn Tool> {
        self.by_name.get(name).map(|t| &**t as &dyn Tool)
    }

    /// Every tool's name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }

    /// What the model is told about each tool, in name order: give it to a
    /// provider's client (`OpenAi::with_tools`), so each tool's name,
    /// description and schema are written once, in the tool.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.by_name.values().map(|t| ToolSpec::of(&**t)).collect()
    }
}

/// What the model is told about one tool: its name, what it does, and a
/// JSON Schema of its arguments. [`ToolSpec::of`] reads them from the tool;
/// [`Tools::specs`] does so for every tool of an agent.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by ([`Tool::name`]).
    pub name: String,
    /// What it does, for the model ([`Tool::description`]).
    pub description: String,
    /// A JSON Schema (an `object` schema) of its arguments
    /// ([`Tool::parameters`]).
    pub parameters: Value,
}

impl ToolSpec {
    /// A tool described by `name`, `description` and the schema
    /// `parameters` (for a tool the loop does not run, such as one served
    /// elsewhere; a [`Tool`] describes itself, see [`ToolSpec::of`]).
    pub fn new(name: &str, description: &str, parameters: Value) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters,
        }
    }

    /// What `tool` says about itself.
    pub fn of(tool: &dyn Tool) -> ToolSpec {
        ToolSpec {
            name: tool.name().to_owned(),
            description: tool.description().to_owned(),
            parameters: tool.parameters(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tool that declares everything a tool can, each answer its own.
    struct Declaring;

    impl Tool for Declaring {
        fn name(&self) -> &str {
            "declaring"
        }
        fn description(&self) -> &str {
            "Declares everything."
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {"path": {"type": "string"}}})
        }
        fn effect(&self) -> Effect {
            Effect::Idempotent
        }
        fn keys(&self) -> Keys {
            Keys::Honoured { keep_for: Some(60) }
        }
        fn needs_approval(&self) -> bool {
            true
        }
        fn touches(&self, args: &Value) -> Vec<String> {
            vec![args["path"].as_str().unwrap_or("?").to_owned()]
        }
        fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
            match args["fail"].as_bool() {
                Some(true) => Err(ToolError::Unknown(format!("{} dropped", ctx.call_id))),
                _ => Ok(ToolOutput::ok(format!("{} {:?}", ctx.call_id, ctx.key))
                    .with_file("p.rs", b"p")),
            }
        }
        fn lookup(&self, ctx: &CallContext<'_>, _args: &Value) -> Lookup {
            Lookup::Found(ToolOutput::ok(format!("found {}", ctx.call_id)))
        }
    }

    /// A tool that declares only what it must.
    struct Plain;

    impl Tool for Plain {
        fn name(&self) -> &str {
            "plain"
        }
        fn effect(&self) -> Effect {
            Effect::Changes
        }
        fn call(&self, _ctx: &CallContext<'_>, _args: &Value) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::ok("ran"))
        }
    }

    /// Everything a tool says about one call, to compare two tools.
    fn answers(t: &dyn Tool) -> Vec<String> {
        let run = RunId::parse("r").unwrap();
        let ctx = CallContext {
            run: &run,
            call_id: "c1",
            key: Some("k1"),
            epoch: 1,
            messages: &[],
        };
        let args = json!({"path": "src/a.rs"});
        let failing = json!({"fail": true});
        vec![
            t.name().to_owned(),
            t.description().to_owned(),
            t.parameters().to_string(),
            format!("{:?}", t.effect()),
            format!("{:?}", t.keys()),
            t.needs_approval().to_string(),
            format!("{:?}", t.touches(&args)),
            format!("{:?}", t.call(&ctx, &args)),
            format!("{:?}", t.call(&ctx, &failing)),
            format!("{:?}", t.lookup(&ctx, &args)),
        ]
    }

    /// A boxed tool is the tool it holds, in every answer.
    #[test]
    fn a_boxed_tool_answers_as_the_tool_it_holds() {
        let direct = answers(&Declaring);
        assert_eq!(direct[0], "declaring");
        assert_eq!(direct[1], "Declares everything.");
        assert_eq!(direct[6], r#"["src/a.rs"]"#);
        let boxed: Box<dyn Tool> = Box::new(Declaring);
        assert_eq!(answers(&boxed), direct);
        let plain: Box<dyn Tool> = Box::new(Plain);
        assert_eq!(answers(&plain), answers(&Plain));
    }

    /// A gated tool is the tool it holds, except that every call needs a
    /// person's yes.
    #[test]
    fn a_gated_tool_answers_as_its_tool_but_needs_approval() {
        let mut expected = answers(&Plain);
        assert_eq!(expected[5], "false");
        expected[5] = "true".into();
        assert_eq!(answers(&Gated(Plain)), expected);
        assert_eq!(answers(&Gated(Declaring)), answers(&Declaring));
    }

    /// The defaults: no description, any object as arguments, no key, no
    /// approval, no files touched, and a lookup that cannot tell, naming
    /// the tool.
    #[test]
    fn a_tool_that_declares_nothing_gets_the_defaults() {
        assert_eq!(
            answers(&Plain)[1..],
            [
                String::new(),
                r#"{"type":"object"}"#.into(),
                "Changes".into(),
                "None".to_owned(),
                "false".into(),
                "[]".into(),
                r#"Ok(ToolOutput { output: "ran", is_error: false, files: {} })"#.into(),
                r#"Ok(ToolOutput { output: "ran", is_error: false, files: {} })"#.into(),
                r#"CantTell("plain has no lookup")"#.into(),
            ]
        );
    }

    /// A key is held for `keep_for` clock units after it was sent and not
    /// from then on; without a limit for ever; without keys never.
    #[test]
    fn a_key_is_held_for_its_keep_for_and_no_longer() {
        let ttl = Keys::Honoured { keep_for: Some(10) };
        assert!(ttl.held(100, 100));
        assert!(ttl.held(100, 109));
        assert!(!ttl.held(100, 110));
        assert!(!ttl.held(100, 1_000));
        // A clock behind the send (another machine's) counts as no time.
        assert!(ttl.held(100, 50));
        assert!(Keys::Honoured { keep_for: None }.held(0, u64::MAX));
        assert!(!Keys::None.held(100, 100));
        assert!(ttl.sends() && !Keys::None.sends());
    }

    /// A tool set tells the model about each tool in the tool's own words,
    /// in name order; a spec can also be written by hand.
    #[test]
    fn tools_describe_themselves_in_name_order() {
        let tools = Tools::new().with(Plain).with(Gated(Declaring));
        assert_eq!(
            tools.specs(),
            [
                ToolSpec::new(
                    "declaring",
                    "Declares everything.",
                    json!({"type": "object", "properties": {"path": {"type": "string"}}})
                ),
                ToolSpec::new("plain", "", json!({"type": "object"})),
            ]
        );
        assert_eq!(ToolSpec::of(&Declaring), tools.specs()[0]);
    }

    /// A tool set shows as the list of its tools' names, sorted.
    #[test]
    fn tools_show_as_their_names() {
        let tools = Tools::new().with(Plain).with(Declaring);
        assert_eq!(format!("{tools:?}"), r#"["declaring", "plain"]"#);
        assert_eq!(format!("{:?}", Tools::new()), "[]");
    }
}
