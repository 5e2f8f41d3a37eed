//! The agent: a run's model, tools, person, limits and checkpoint store, as
//! built before its first life (which [`Agent::run`] starts).

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use crate::state::ToolCall;
use durable::store::RunStore;
use durable::{Dir, Options, RunId};

use crate::approve::{Approver, Unattended};
use crate::clock::{Clock, SystemClock};
use crate::limits::Limits;
use crate::model::{Model, ScriptedModel, Transcript, TranscriptError};
use crate::observe::{Event, Observer, Quiet};
use crate::tool::{Tool, Tools};

/// A durable agent run: a model, tools, a person, and a checkpoint.
///
/// [`Agent::run`] is one *life*: it opens (and locks) the run's checkpoint,
/// starts or resumes it from its saved phase, and runs until the answer, a
/// pause, a limit, a cancel or an error. Call it again, in this process or a
/// new one, to resume; a finished run returns its saved answer and calls
/// nothing.
///
/// The state is saved at five moments, each with the store's crash-safe
/// write: at start (the restart count, before anything else, done by
/// [`Checkpoint::open`](durable::Checkpoint::open)); after each model reply, before any of its calls
/// runs; as an attempt marker before each call that can change something
/// (for a gated call, after the yes); after each call's result; and when the
/// phase becomes paused or done. The loop's own crash points sit right after
/// the moments a crash matters most: `reply arrived` (the reply is in memory
/// only), `marker saved`, `tool returned` (the window no checkpoint can
/// close) and `result saved`.
pub struct Agent {
    pub(crate) run: RunId,
    pub(crate) checkpoints: Arc<dyn Dir>,
    pub(crate) options: Options,
    pub(crate) task: String,
    pub(crate) model: Box<dyn Model>,
    pub(crate) tools: Tools,
    pub(crate) approver: Box<dyn Approver>,
    pub(crate) observer: Box<dyn Observer>,
    pub(crate) limits: Limits,
    pub(crate) clock: Box<dyn Clock>,
    pub(crate) cancel: Arc<AtomicBool>,
    pub(crate) workspace: Option<Arc<dyn Dir>>,
    pub(crate) mode: Option<String>,
    pub(crate) store: Option<OnStore>,
}

/// [`Agent::on_store`]: the run store, who this process is, and its lease.
#[derive(Clone, Debug)]
pub(crate) struct OnStore {
    pub(crate) store: Arc<dyn RunStore>,
    pub(crate) owner: String,
    pub(crate) lease: Duration,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("run", &self.run)
            .field("checkpoints", &self.checkpoints)
            .field("options", &self.options)
            .field("tools", &self.tools)
            .field("limits", &self.limits)
            .field("workspace", &self.workspace)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// How often one life sends a call whose outcome stays unknown before
    /// it gives up with [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown)
    /// (the marker stays, so a restart tries again). Every loop is bounded.
    pub const UNKNOWN_TRIES: u32 = 3;

    /// An agent for run `run`, checkpointed in `checkpoints`, that gives a
    /// fresh run `task` as its first message.
    ///
    /// Defaults: synced saves and ten restarts ([`Options::default`]),
    /// [`Limits::default`], nobody to approve ([`Unattended`]: gated calls
    /// and ladder questions pause the run), no observer, the system clock,
    /// no workspace check.
    pub fn new(
        run: RunId,
        checkpoints: Arc<dyn Dir>,
        task: impl Into<String>,
        model: impl Model + 'static,
        tools: Tools,
    ) -> Agent {
        Agent {
            run,
            checkpoints,
            options: Options::default(),
            task: task.into(),
            model: Box::new(model),
            tools,
            approver: Box::new(Unattended),
            observer: Box::new(Quiet),
            limits: Limits::default(),
            clock: Box::new(SystemClock),
            cancel: Arc::default(),
            workspace: None,
            mode: None,
            store: None,
        }
    }

    /// An agent that replays `transcript` (its task, a [`ScriptedModel`]),
    /// after checking that every call names one of `tools`.
    pub fn scripted(
        run: RunId,
        checkpoints: Arc<dyn Dir>,
        transcript: impl Into<Arc<Transcript>>,
        tools: Tools,
    ) -> Result<Agent, TranscriptError> {
        let transcript = transcript.into();
        transcript.check_tools(&tools)?;
        let task = transcript.task.clone();
        Ok(Agent::new(
            run,
            checkpoints,
            task,
            ScriptedModel::new(transcript),
            tools,
        ))
    }

    /// Keep the run in a [`RunStore`] (SQLite, Postgres, or files) under a
    /// lease, instead of in `checkpoints` under an `flock`: for runs that
    /// several processes, on several machines, may pick up.
    ///
    /// [`Agent::run`] claims the run for `owner` for `lease`
    /// ([`Checkpoint::open_store`](durable::Checkpoint::open_store)):
    /// another holder's unexpired lease is
    /// [`durable::Error::Leased`] (as [`durable::Error::Locked`] is for a
    /// directory), and once the lease has expired another process may claim
    /// the run with a higher fencing epoch. From then on this process's
    /// saves are refused ([`durable::Error::Fenced`], nothing written), and
    /// so are its tool calls to a receiver that knows the newer epoch
    /// ([`CallContext::epoch`](crate::tool::CallContext::epoch),
    /// [`Error::Stale`](crate::Error::Stale)): a process paused past its
    /// lease does nothing twice. `checkpoints` is then unused.
    pub fn on_store(
        mut self,
        store: Arc<dyn RunStore>,
        owner: impl Into<String>,
        lease: Duration,
    ) -> Agent {
        self.store = Some(OnStore {
            store,
            owner: owner.into(),
            lease,
        });
        self
    }

    /// Save and restart options of the checkpoint store.
    pub fn with_options(mut self, options: Options) -> Agent {
        self.options = options;
        self
    }

    /// The person who approves gated calls and answers ladder questions.
    pub fn with_approver(mut self, approver: impl Approver + 'static) -> Agent {
        self.approver = Box::new(approver);
        self
    }

    /// Receive one [`Event`] per step.
    pub fn with_observer(mut self, observer: impl Observer + 'static) -> Agent {
        self.observer = Box::new(observer);
        self
    }

    /// Turn, token and dollar limits over the run's whole life.
    pub fn with_limits(mut self, limits: Limits) -> Agent {
        self.limits = limits;
        self
    }

    /// The clock markers record, to expire keys (see
    /// [`Keys`](crate::tool::Keys)).
    pub fn with_clock(mut self, clock: impl Clock + 'static) -> Agent {
        self.clock = Box::new(clock);
        self
    }

    /// A cancel flag: once set (by a signal handler, another thread), the
    /// loop stops at the next step, still making the save that records where
    /// it stopped, and returns [`Error::Cancelled`](crate::Error::Cancelled).
    pub fn with_cancel(mut self, cancel: Arc<AtomicBool>) -> Agent {
        self.cancel = cancel;
        self
    }

    /// The run's workspace: checked on every resume against the SHA-256s
    /// the state recorded for the files the run wrote
    /// ([`durable::Error::WorkspaceChanged`]).
    pub fn with_workspace(mut self, workspace: Arc<dyn Dir>) -> Agent {
        self.workspace = Some(workspace);
        self
    }

    /// Record `mode` (where the replies come from, e.g. `replay` or
    /// `live openai gpt-4o-mini https://api.openai.com/v1`) in the state of
    /// a run that has none yet. It is saved with the first reply, so a
    /// checkpoint without a mode holds no reply of either kind.
    pub fn with_mode(mut self, mode: impl Into<String>) -> Agent {
        self.mode = Some(mode.into());
        self
    }

    /// The run's ID.
    pub fn run_id(&self) -> &RunId {
        &self.run
    }

    /// The cancel flag (set it to stop the run at its next step).
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// The run's tools.
    pub fn tools(&self) -> &Tools {
        &self.tools
    }

    pub(crate) fn emit(&self, event: Event) {
        self.observer.event(&event);
    }

    pub(crate) fn key_for(&self, tool: &dyn Tool, call: &ToolCall) -> Option<String> {
        tool.keys()
            .sends()
            .then(|| durable::key(self.run.as_str(), &call.id))
    }
}
