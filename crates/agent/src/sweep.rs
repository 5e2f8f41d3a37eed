//! The loop's own crash sweep: the real [`Agent`], resuming
//! from a real checkpoint, crashed at every point it has.
//!
//! Six variants, one table row each: the triage job against a tracker that
//! honours keys and one that ignores them, each plain, with a tool that fails
//! after the tracker accepted its request (`FailAfterAccept` on the first
//! record), and with `issue_file` behind an approval gate (the scripted
//! person passes the point `person deciding` while it decides).
//!
//! The world of a scenario is a checkpoint [`MemDir`], a workspace
//! [`MemDir`] and an in-memory [`Tracker`] whose lookups by arguments cannot
//! tell (a search index that lags), so a keyless marked call passes the
//! question up to the person, while `code_patch`'s lookup decides from the
//! workspace. The judge counts:
//!
//! * `dups`: tracker records made more than once, plus `code_patch` calls
//!   that ended in an error (a patch applied twice fails);
//! * `missing`: records the job makes that the tracker never got, and
//!   workspace files that do not hold what the job wrote;
//! * `asks`: ladder questions put to the person;
//! * `calls+`: model calls beyond the clean run's;
//! * `gate`: a gated call that ran without a saved yes, or a yes asked for
//!   again although it was already saved.
//!
//! `dups`, `missing` and `gate` must be zero in every scenario; for keyed
//! variants `asks` too.
//!
//! **Power loss** ([`power_variants`], issue 7 §1 on the real loop): the
//! plain job, keyed and keyless, with the checkpoint directory and the
//! workspace in [`PowerDir`]s of one [`CrashState`]. Each life boots them
//! and shuts them down when it ends without a crash, so the boot after a
//! crash cuts the power first; saves and patches are fsynced. The checkpoint
//! is written by the real writer or through a directory that drops one
//! fsync ([`Writer`]). The judge adds `lost saves` (a restart that resumed
//! from an older checkpoint than the last save that returned, seen by a
//! watch on the checkpoint file) and `stopped` (a run that ended on an
//! error, such as an unreadable checkpoint), both required to be zero; the
//! real writer's rows pass, the mutations' fail (`tests/loop_power.rs`,
//! `snapshots/loop-power.txt`).
//!
//! ```
//! let subject = agent::sweep::subject("loop-keyed", None).unwrap();
//! let config = ::sweep::Config { depth: 1, ..::sweep::Config::default() };
//! let report = ::sweep::run(&subject, &config).unwrap();
//! assert_eq!(report.failures().count(), 0);
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::{Checkpoint, Message, Phase, Role, ToolCall};
use ::sweep::{Counter, Subject, Verdict};
use durable::testing::{CrashState, MemDir, PowerDir};
use durable::{Dir, Options, RunId};
use serde_json::Value;
use tracker::{Fault, Mode, Request, Tracker};

use crate::agent::Agent;
use crate::approver::{Decision, Resolution, ScriptedApprover};
use crate::clock::ManualClock;
use crate::model::{Model, ModelError, Reply, ScriptedModel};
use crate::tool::{CallContext, Effect, Gated, Keys, Lookup, Tool, ToolError, ToolOutput, Tools};
use crate::tools::{comment_output, issue_output, CodePatch, IssueComment, IssueFile, Search};
use crate::transcript::{Transcript, TranscriptError};

/// The run ID every scenario uses (each scenario has its own world).
pub const RUN: &str = "loop-triage-run";

mod power;

pub use power::{Power, Writer};

/// The harder situation a variant adds to the plain job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Situation {
    /// The job as it is.
    Plain,
    /// The tracker records the first request and then drops the connection,
    /// as an MCP server dying mid-call after the service acted.
    FailAfterAccept,
    /// `issue_file` waits for a person's yes.
    ApprovalGate,
}

/// One row of the loop's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Variant {
    /// The command-line name (`cargo xtask sweep --variant …`).
    pub slug: &'static str,
    /// The row title.
    pub title: &'static str,
    /// Whether the tracker honours keys.
    pub keyed: bool,
    /// The situation.
    pub situation: Situation,
    /// `None`: crashes are panics, the checkpoint and the workspace are
    /// [`MemDir`]s and saves are unsynced (the loop's table). `Some`: both
    /// are [`PowerDir`]s whose crashes are power cuts, saves are synced, and
    /// the judge also counts lost saves and stopped runs.
    pub power: Option<Power>,
}

/// Every variant, in table order.
pub const VARIANTS: [Variant; 6] = [
    Variant {
        slug: "loop-keyed",
        title: "loop keyed",
        keyed: true,
        situation: Situation::Plain,
        power: None,
    },
    Variant {
        slug: "loop-keyless",
        title: "loop keyless",
        keyed: false,
        situation: Situation::Plain,
        power: None,
    },
    Variant {
        slug: "loop-keyed-fail-after-accept",
        title: "loop keyed, tool fails after accept",
        keyed: true,
        situation: Situation::FailAfterAccept,
        power: None,
    },
    Variant {
        slug: "loop-keyed-approval",
        title: "loop keyed, approval gate",
        keyed: true,
        situation: Situation::ApprovalGate,
        power: None,
    },
    Variant {
        slug: "loop-keyless-fail-after-accept",
        title: "loop keyless, tool fails after accept",
        keyed: false,
        situation: Situation::FailAfterAccept,
        power: None,
    },
    Variant {
        slug: "loop-keyless-approval",
        title: "loop keyless, approval gate",
        keyed: false,
        situation: Situation::ApprovalGate,
        power: None,
    },
];

/// Every variant: the six of the loop's table ([`VARIANTS`]), then the
/// power-loss ones ([`power_variants`]).
pub fn variants() -> &'static [Variant] {
    static ALL: OnceLock<Vec<Variant>> = OnceLock::new();
    ALL.get_or_init(|| VARIANTS.iter().chain(power_variants()).copied().collect())
}

/// The power-loss variants: the plain job, keyed and keyless, for each
/// writer ([`Writer::ALL`]) and each crash state ([`CrashState::ALL`]).
/// The real writer's slugs are `loop-keyed-power-<state>` (titles `loop
/// keyed | power: <state>`); a mutation's add `-<writer>` (` | <writer>`).
pub fn power_variants() -> &'static [Variant] {
    static POWER: OnceLock<Vec<Variant>> = OnceLock::new();
    POWER.get_or_init(|| {
        let mut v = Vec::new();
        for writer in Writer::ALL {
            for keyed in [true, false] {
                for state in CrashState::ALL {
                    v.push(power_variant(keyed, Power { state, writer }));
                }
            }
        }
        v
    })
}

/// The power-loss variant of the plain job with `power`.
fn power_variant(keyed: bool, power: Power) -> Variant {
    let k = if keyed { "keyed" } else { "keyless" };
    let (mut slug, mut title) = (
        format!("loop-{k}-power-{}", power.state.slug()),
        format!("loop {k} | power: {}", power.state.slug()),
    );
    if power.writer != Writer::Real {
        slug.push_str(&format!("-{}", power.writer.slug()));
        title.push_str(&format!(" | {}", power.writer.title()));
    }
    // Built once per process (see power_variants), so the names live as
    // long as the table of variants.
    Variant {
        slug: Box::leak(slug.into_boxed_str()),
        title: Box::leak(title.into_boxed_str()),
        keyed,
        situation: Situation::Plain,
        power: Some(power),
    }
}

/// The sweep's job: `sweeps/loop-triage.json` of this workspace.
pub fn default_transcript_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sweeps/loop-triage.json")
}

/// Why a loop subject cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum SubjectError {
    /// No variant has this slug.
    #[error("unknown loop variant {slug:?}; known: {}, and loop-keyed-power-STATE, loop-keyless-power-STATE (STATE: {}; add -no-file-fsync or -no-dir-fsync for a mutated writer)", VARIANTS.iter().map(|v| v.slug).collect::<Vec<_>>().join(", "), CrashState::ALL.iter().map(|s| s.slug()).collect::<Vec<_>>().join(", "))]
    UnknownVariant {
        /// The slug asked for.
        slug: String,
    },
    /// The transcript cannot be used.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// The transcript is a valid transcript but not a job the judge can
    /// check (arguments it cannot read, a patch that cannot apply).
    #[error("{}: {reason}", path.display())]
    Job {
        /// The transcript file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

/// The subject for `slug`, running `transcript` (default:
/// [`default_transcript_path`]).
pub fn subject(slug: &str, transcript: Option<&Path>) -> Result<LoopSubject, SubjectError> {
    let variant = variants()
        .iter()
        .find(|v| v.slug == slug)
        .copied()
        .ok_or_else(|| SubjectError::UnknownVariant {
            slug: slug.to_owned(),
        })?;
    let path = transcript.map_or_else(default_transcript_path, Path::to_path_buf);
    LoopSubject::new(variant, Arc::new(Transcript::load(path)?))
}

/// Every variant's subject, in table order, sharing one transcript.
pub fn subjects(transcript: Option<&Path>) -> Result<Vec<LoopSubject>, SubjectError> {
    let path = transcript.map_or_else(default_transcript_path, Path::to_path_buf);
    let t = Arc::new(Transcript::load(path)?);
    VARIANTS
        .iter()
        .map(|v| LoopSubject::new(*v, Arc::clone(&t)))
        .collect()
}

/// The power-loss subjects whose writer is `writer`, keyed then keyless,
/// each in [`CrashState::ALL`] order, sharing one transcript.
pub fn power_subjects(
    writer: Writer,
    transcript: Option<&Path>,
) -> Result<Vec<LoopSubject>, SubjectError> {
    let path = transcript.map_or_else(default_transcript_path, Path::to_path_buf);
    let t = Arc::new(Transcript::load(path)?);
    power_variants()
        .iter()
        .filter(|v| v.power.is_some_and(|p| p.writer == writer))
        .map(|v| LoopSubject::new(*v, Arc::clone(&t)))
        .collect()
}

/// What the job must leave in the world, worked out from the transcript.
#[derive(Clone, Debug)]
struct Expected {
    /// Each tracker request of the job, with its call ID.
    requests: Vec<(String, Request)>,
    /// Each workspace file's content once every patch applied once.
    files: BTreeMap<String, String>,
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
    fn of(t: &Transcript) -> Result<Expected, SubjectError> {
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

/// The triage job on the real loop, as a sweep subject.
#[derive(Clone, Debug)]
pub struct LoopSubject {
    variant: Variant,
    transcript: Arc<Transcript>,
    expected: Expected,
}

/// Tallies the world keeps across lives (a person's and an observer's
/// memory, not the program's).
#[derive(Debug, Default)]
struct Tally {
    model_calls: AtomicU64,
    asks: AtomicU64,
    gate: AtomicU64,
    /// Calls the person said yes to, in any life.
    yes: Mutex<BTreeSet<String>>,
    notes: Mutex<Vec<String>>,
}

impl Tally {
    fn said_yes(&self, call: &str) -> bool {
        self.yes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(call)
    }

    fn note(&self, note: String) {
        self.notes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(note);
    }
}

/// What a crash does not erase: the checkpoint directory, the workspace,
/// the tracker's records, and the tallies.
#[derive(Debug)]
pub struct LoopWorld {
    /// The checkpoint directory as the agent writes it (in a power-loss
    /// world: watched, and through the writer's mutation if any).
    checkpoints: Arc<dyn Dir>,
    /// The same files as observers read them (the judge, the person, the
    /// gate's witness), past any watch or mutation.
    files: Arc<dyn Dir>,
    workspace: Arc<dyn Dir>,
    tracker: Tracker,
    tally: Arc<Tally>,
    /// A life is running: set when it starts, cleared when it returns. A life
    /// that finds it set knows the one before it crashed.
    alive: bool,
    /// Why the last life stopped with an error.
    stopped: Option<String>,
    /// The power-loss directories, when crashes are power cuts.
    power: Option<PowerWorld>,
}

/// The parts of a power-loss world a life boots and shuts down.
#[derive(Debug)]
struct PowerWorld {
    checkpoints: PowerDir,
    workspace: PowerDir,
    saves: Arc<Mutex<power::Saves>>,
}

impl LoopWorld {
    /// A process starts. In a power-loss world, if the previous one crashed
    /// the power is cut now (both directories, in the world's state), before
    /// anything is read.
    fn boot(&mut self) {
        let crashed = std::mem::replace(&mut self.alive, true);
        if let Some(p) = &self.power {
            let cut = p.checkpoints.boot();
            let ws_cut = p.workspace.boot();
            debug_assert!(
                cut == crashed && ws_cut == crashed,
                "the directories and the world agree on crashes"
            );
            p.saves.lock().unwrap_or_else(|e| e.into_inner()).boot();
        }
    }

    /// The process ends without a crash (finished, or stopped by an error).
    fn shutdown(&mut self, result: &Result<(), String>) {
        self.alive = false;
        self.stopped = result.as_ref().err().cloned();
        if let Some(p) = &self.power {
            p.checkpoints.shutdown();
            p.workspace.shutdown();
        }
    }

    fn lost_saves(&self) -> (u64, Vec<String>) {
        self.power.as_ref().map_or((0, Vec::new()), |p| {
            let s = p.saves.lock().unwrap_or_else(|e| e.into_inner());
            (s.lost, s.notes.clone())
        })
    }
}

fn run_id() -> Result<RunId, String> {
    RunId::parse(RUN).map_err(|e| e.to_string())
}

/// Whether the saved checkpoint holds a yes for `call`.
fn saved_yes(checkpoints: &dyn Dir, call: &str) -> bool {
    let Ok(run) = RunId::parse(RUN) else {
        return false;
    };
    matches!(Checkpoint::load(checkpoints, &run),
        Ok(Some(st)) if st.attempts.get(call).is_some_and(|a| a.approved))
}

/// A model that counts its calls in the world.
struct Counted {
    inner: ScriptedModel,
    tally: Arc<Tally>,
}

impl Model for Counted {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        self.tally.model_calls.fetch_add(1, Ordering::SeqCst);
        self.inner.reply(conversation)
    }
}

/// The gated `issue_file`, watched: a call that runs unless the person said
/// yes to it *and* the yes is saved counts against the gate. (The saved
/// marker alone would not do: a loop that wrote it before asking would
/// vouch for itself.)
struct Witnessed {
    inner: Gated<IssueFile>,
    checkpoints: Arc<dyn Dir>,
    tally: Arc<Tally>,
}

impl Tool for Witnessed {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn effect(&self) -> Effect {
        self.inner.effect()
    }
    fn keys(&self) -> Keys {
        self.inner.keys()
    }
    fn needs_approval(&self) -> bool {
        self.inner.needs_approval()
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        let said = self.tally.said_yes(ctx.call_id);
        if !(said && saved_yes(self.checkpoints.as_ref(), ctx.call_id)) {
            self.tally.gate.fetch_add(1, Ordering::SeqCst);
            self.tally.note(format!(
                "gated call {} ran without {}",
                ctx.call_id,
                if said { "a saved yes" } else { "a yes" }
            ));
        }
        self.inner.call(ctx, args)
    }
    fn lookup(&self, ctx: &CallContext<'_>, args: &Value) -> Lookup {
        self.inner.lookup(ctx, args)
    }
}

/// The scripted person's answer to a ladder question: they look at the
/// tracker's records and the workspace themselves (not through the lagging
/// search) and always answer right.
fn person_answer(w_tracker: &Tracker, workspace: &Arc<dyn Dir>, call: &ToolCall) -> Resolution {
    let args: Value = serde_json::from_str(&call.args).unwrap_or(Value::Null);
    let s = |name: &str| args.get(name).and_then(Value::as_str).unwrap_or_default();
    let found = match call.tool.as_str() {
        "issue_file" => w_tracker
            .issues()
            .iter()
            .find(|i| i.title == s("title") && i.body == s("body"))
            .map(|i| issue_output(i.number)),
        "issue_comment" => {
            let issue = args.get("issue").and_then(Value::as_u64).unwrap_or(0);
            w_tracker
                .issues()
                .iter()
                .filter(|i| i.number == issue)
                .flat_map(|i| &i.comments)
                .find(|c| c.body == s("body"))
                .map(|c| comment_output(issue, c.id))
        }
        "code_patch" => {
            let run = RunId::parse(RUN).ok();
            let tool = CodePatch::new(Arc::clone(workspace));
            run.and_then(|run| {
                let ctx = CallContext {
                    run: &run,
                    call_id: &call.id,
                    key: None,
                    messages: &[],
                };
                match tool.lookup(&ctx, &args) {
                    Lookup::Found(out) => Some(out.output),
                    _ => None,
                }
            })
        }
        _ => None,
    };
    match found {
        Some(output) => Resolution::Done(crate::ToolResult {
            output,
            is_error: false,
        }),
        None => Resolution::Rerun,
    }
}

impl LoopSubject {
    /// `variant` running `transcript`.
    pub fn new(variant: Variant, transcript: Arc<Transcript>) -> Result<LoopSubject, SubjectError> {
        let probe = LoopSubject {
            variant,
            transcript: Arc::clone(&transcript),
            expected: Expected {
                requests: Vec::new(),
                files: BTreeMap::new(),
            },
        };
        transcript.check_tools(&probe.tools(&probe.world()))?;
        let expected = Expected::of(&transcript)?;
        Ok(LoopSubject { expected, ..probe })
    }

    /// The variant.
    pub fn variant(&self) -> Variant {
        self.variant
    }

    /// Saves and patches are fsynced in a power-loss world (syncs are what
    /// a power cut tests), and not in the loop's table (a panic cannot tell).
    fn syncs(&self) -> bool {
        self.variant.power.is_some()
    }

    fn tools(&self, w: &LoopWorld) -> Tools {
        let mut tools = Tools::new()
            .with(IssueComment::new(w.tracker.clone()))
            .with(Search::new(w.tracker.clone()))
            .with(CodePatch::new(Arc::clone(&w.workspace)).sync(self.syncs()));
        let file = IssueFile::new(w.tracker.clone());
        match self.variant.situation {
            Situation::ApprovalGate => tools.insert(Witnessed {
                inner: Gated(file),
                checkpoints: Arc::clone(&w.files),
                tally: Arc::clone(&w.tally),
            }),
            Situation::Plain | Situation::FailAfterAccept => tools.insert(file),
        };
        tools
    }

    fn agent(&self, w: &LoopWorld) -> Result<Agent, String> {
        let model = Counted {
            inner: ScriptedModel::new(Arc::clone(&self.transcript)),
            tally: Arc::clone(&w.tally),
        };
        let (gate_tally, gate_dir) = (Arc::clone(&w.tally), Arc::clone(&w.files));
        let (ask_tally, tracker, workspace) = (
            Arc::clone(&w.tally),
            w.tracker.clone(),
            Arc::clone(&w.workspace),
        );
        let person = ScriptedApprover::new()
            .on_approval(move |a| {
                if saved_yes(gate_dir.as_ref(), &a.call.id) {
                    gate_tally.gate.fetch_add(1, Ordering::SeqCst);
                    gate_tally.note(format!(
                        "asked again for a yes on {} although the yes was saved",
                        a.call.id
                    ));
                }
                gate_tally
                    .yes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(a.call.id.clone());
                Decision::Approve
            })
            .on_question(move |q| {
                ask_tally.asks.fetch_add(1, Ordering::SeqCst);
                person_answer(&tracker, &workspace, q.call)
            });
        Ok(Agent::new(
            run_id()?,
            Arc::clone(&w.checkpoints),
            self.transcript.task.clone(),
            model,
            self.tools(w),
        )
        .with_options(Options {
            sync: self.syncs(),
            max_resumes: Some(u32::MAX),
        })
        .with_approver(person)
        .with_workspace(Arc::clone(&w.workspace))
        .with_clock(ManualClock::new(1)))
    }
}

impl Subject for LoopSubject {
    type World = LoopWorld;

    fn name(&self) -> String {
        self.variant.title.to_owned()
    }

    fn counters(&self) -> Vec<Counter> {
        let asks = Counter::new("asks");
        let mut c = vec![
            Counter::new("dups").with_scenarios("with dups").required(),
            Counter::new("missing").required(),
            if self.variant.keyed {
                asks.required()
            } else {
                asks
            },
            Counter::new("model calls").titled("calls+").over_clean(),
        ];
        if self.variant.power.is_none() || self.variant.situation == Situation::ApprovalGate {
            c.push(Counter::new("gate").required());
        }
        if self.variant.power.is_some() {
            // A correct writer loses no save that returned, and leaves no
            // checkpoint the restart cannot read.
            c.push(Counter::new("lost saves").required());
            c.push(Counter::new("stopped").required());
        }
        c
    }

    fn world(&self) -> LoopWorld {
        let mode = if self.variant.keyed {
            Mode::Keyed
        } else {
            Mode::Keyless
        };
        let mut tracker = Tracker::new(mode).with_uncertain_lookup();
        if self.variant.situation == Situation::FailAfterAccept {
            tracker = tracker.with_fault(Fault::FailAfterAccept { nth: 1 });
        }
        let world = |checkpoints: Arc<dyn Dir>, files, workspace, power| LoopWorld {
            checkpoints,
            files,
            workspace,
            tracker,
            tally: Arc::default(),
            alive: false,
            stopped: None,
            power,
        };
        let Some(p) = self.variant.power else {
            let cp = Arc::new(MemDir::new());
            return world(cp.clone(), cp, Arc::new(MemDir::new()), None);
        };
        let (cp, ws) = (PowerDir::new(p.state), PowerDir::new(p.state));
        let saves = Arc::new(Mutex::new(power::Saves::default()));
        let file =
            run_id().map_or_else(|_| format!("{RUN}.json"), |run| Checkpoint::file_name(&run));
        let watch = power::Watch {
            inner: p.writer.wrap(cp.clone()),
            saves: Arc::clone(&saves),
            file,
        };
        world(
            Arc::new(watch),
            Arc::new(cp.clone()),
            Arc::new(ws.clone()),
            Some(PowerWorld {
                checkpoints: cp,
                workspace: ws,
                saves,
            }),
        )
    }

    fn life(&self, w: &mut LoopWorld) -> Result<(), sweep::LifeError> {
        w.boot();
        let result = self
            .agent(w)
            .and_then(|agent| agent.run().map(drop).map_err(|e| e.to_string()));
        w.shutdown(&result);
        Ok(result?)
    }

    fn judge(&self, w: &LoopWorld) -> Verdict {
        let (mut dups, mut missing) = (0u64, 0u64);
        let mut v = Verdict::new();
        for (call, req) in &self.expected.requests {
            match w.tracker.count(req) {
                0 => {
                    missing += 1;
                    v = v.note(format!("{call}: {req:?} never reached the tracker"));
                }
                1 => {}
                n => {
                    dups += n as u64 - 1;
                    v = v.note(format!("{call}: {req:?} made {n} times"));
                }
            }
        }
        for (path, want) in &self.expected.files {
            let got = w.workspace.read(path).ok().flatten();
            if got.as_deref() != Some(want.as_bytes()) {
                missing += 1;
                v = v.note(format!(
                    "workspace file {path} does not hold what the job wrote"
                ));
            }
        }
        let state = run_id()
            .ok()
            .and_then(|run| Checkpoint::load(w.files.as_ref(), &run).ok().flatten());
        match &state {
            Some(st) if st.phase == Phase::Done => {
                let tools: BTreeMap<&str, &str> = st
                    .messages
                    .iter()
                    .flat_map(|m| &m.calls)
                    .map(|c| (c.id.as_str(), c.tool.as_str()))
                    .collect();
                for m in st.messages.iter().filter(|m| m.role == Role::Tool) {
                    let id = m.call_id.as_deref().unwrap_or_default();
                    let is_error = serde_json::from_str::<Value>(&m.text)
                        .ok()
                        .is_some_and(|r| r.get("error").is_some());
                    if !is_error {
                        continue;
                    }
                    if tools.get(id) == Some(&"code_patch") {
                        dups += 1;
                        v = v.note(format!(
                            "code_patch {id} was applied again and failed: {}",
                            m.text
                        ));
                    } else {
                        v = v.note(format!("call {id} ended in an error: {}", m.text));
                    }
                }
            }
            _ => v = v.note("the run did not finish"),
        }
        let t = &w.tally;
        for note in t.notes.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            v = v.note(note.clone());
        }
        if self.variant.power.is_some() {
            let (lost, notes) = w.lost_saves();
            for note in notes {
                v = v.note(note);
            }
            if let Some(e) = &w.stopped {
                v = v.note(format!("the run stopped: {e}"));
            }
            v = v
                .count("lost saves", lost)
                .count("stopped", u64::from(w.stopped.is_some()));
        }
        v.count("dups", dups)
            .count("missing", missing)
            .count("asks", t.asks.load(Ordering::SeqCst))
            .count("model calls", t.model_calls.load(Ordering::SeqCst))
            .count("gate", t.gate.load(Ordering::SeqCst))
    }

    fn describe(&self, w: &LoopWorld) -> String {
        let mut out = String::new();
        for i in w.tracker.issues() {
            let _ = writeln!(out, "issue #{} {:?}", i.number, i.title);
            for c in &i.comments {
                let _ = writeln!(out, "    comment #{} {:?}", c.id, c.body);
            }
        }
        for name in w.workspace.list().unwrap_or_default() {
            let len = w
                .workspace
                .read(&name)
                .ok()
                .flatten()
                .map_or(0, |b| b.len());
            let _ = writeln!(out, "workspace {name} ({len} bytes)");
        }
        let t = &w.tally;
        let _ = writeln!(
            out,
            "model calls: {}, questions to a person: {}, gate: {}",
            t.model_calls.load(Ordering::SeqCst),
            t.asks.load(Ordering::SeqCst),
            t.gate.load(Ordering::SeqCst)
        );
        if let Some(p) = &w.power {
            let _ = writeln!(
                out,
                "power cuts: {} ({})",
                p.checkpoints.cuts(),
                p.checkpoints.state().title()
            );
            let (lost, _) = w.lost_saves();
            let _ = writeln!(out, "lost saves: {lost}");
        }
        if let Some(e) = &w.stopped {
            let _ = writeln!(out, "stopped: {e}");
        }
        if let Ok(run) = run_id() {
            match Checkpoint::load(w.files.as_ref(), &run) {
                Ok(Some(st)) => {
                    let _ = writeln!(
                        out,
                        "checkpoint: phase {}, turns {}, resumes {}",
                        st.phase, st.turns, st.resumes
                    );
                }
                Ok(None) => out.push_str("checkpoint: none\n"),
                Err(e) => {
                    let _ = writeln!(out, "checkpoint: {e}");
                }
            }
        }
        out
    }
}
