//! The triage job on the real loop, as a sweep subject: its world, one
//! life, and the judge.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use agent::approve::Decision;
use agent::model::{Model, ScriptedModel, Transcript};
use agent::state::{Checkpoint, Phase, Role};
use agent::testing::{ManualClock, ScriptedApprover};
use agent::tool::{Gated, Tools};
use agent::Agent;
use durable::testing::DiskState;
use durable::testing::{MemDir, PersistenceModel, PowerDir};
use durable::{Dir, Options};
use serde_json::Value;
use sweep::{
    power::{Boot, CrashState},
    Counter, Subject, Verdict,
};
use tracker::{Fault, Mode, Tracker};
use triage_tools::{Backend, CodePatch, IssueComment, IssueFile, Search};

use crate::error::SubjectError;
use crate::expected::Expected;
use crate::person::{person_answer, Counted, Witnessed};
use crate::variant::{LoopVariant, Situation};
use crate::world::{run_id, saved_yes, HttpWorld, LoopWorld, PowerWorld};

/// Makes the model of one life: the seam a sweep uses to put a real client
/// (over HTTP, say) where the scripted model would be.
pub type ModelFactory = Arc<dyn Fn() -> Result<Box<dyn Model>, String> + Send + Sync>;

/// The triage job on the real loop, as a sweep subject.
#[derive(Clone)]
pub struct LoopSubject {
    pub(crate) variant: LoopVariant,
    transcript: Arc<Transcript>,
    expected: Expected,
    pub(crate) model: Option<(String, ModelFactory)>,
    /// The tools talk to the world's tracker over HTTP on a loopback socket.
    pub(crate) http: bool,
    /// The checkpoint directory goes through a fault injector armed so.
    pub(crate) faults: Option<Vec<durable::testing::Fault>>,
}

impl std::fmt::Debug for LoopSubject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopSubject")
            .field("variant", &self.variant)
            .field("transcript", &self.transcript.path)
            .field("model", &self.model.as_ref().map(|(name, _)| name))
            .field("http", &self.http)
            .finish_non_exhaustive()
    }
}
impl LoopSubject {
    /// The keyed loop on the default job (the transcript in `sweeps/`) in a
    /// power-loss world that loses what was not synced, its checkpoints
    /// written by `writer`: the loop's rows of the disk table, and its
    /// enumerated-disk sweeps.
    pub fn keyed_power_loss(writer: durable::testing::Writer) -> Result<LoopSubject, SubjectError> {
        let t = Arc::new(crate::transcript(None)?);
        let v = LoopVariant {
            keyed: true,
            situation: crate::Situation::Plain,
            power: Some(crate::Power {
                state: DiskState::LoseUnsynced,
                writer,
            }),
        };
        LoopSubject::new(v, t)
    }

    /// `variant` running `transcript`.
    pub fn new(
        variant: LoopVariant,
        transcript: Arc<Transcript>,
    ) -> Result<LoopSubject, SubjectError> {
        let probe = LoopSubject {
            variant,
            transcript: Arc::clone(&transcript),
            expected: Expected {
                requests: Vec::new(),
                files: BTreeMap::new(),
            },
            model: None,
            http: false,
            faults: None,
        };
        let world = probe.world().map_err(|e| SubjectError::Job {
            path: transcript.path.clone(),
            reason: format!("cannot make a world to check the tools in: {e}"),
        })?;
        transcript.check_tools(&probe.tools(&world))?;
        let expected = Expected::of(&transcript)?;
        Ok(LoopSubject { expected, ..probe })
    }

    /// The variant.
    pub fn variant(&self) -> LoopVariant {
        self.variant
    }

    /// The same subject with each life's model made by `make` instead of
    /// the scripted model; `name` is added to the row title (`loop keyed,
    /// NAME`). The model must answer as the transcript does (a client of a
    /// test provider serving it, say) for the judge's counts to hold.
    pub fn with_model(mut self, name: &str, make: ModelFactory) -> LoopSubject {
        self.model = Some((name.to_owned(), make));
        self
    }

    /// The same subject, but the tracker tools go through the HTTP client
    /// (`triage_tools::Backend::Http`, the key in the `Idempotency-Key`
    /// header) to the world's tracker served by `tracker::http` on a
    /// loopback socket of its own in every scenario: the crash points of
    /// the loop hold across a real socket. The tracker's own point
    /// (`tracker accepted`) then fires on the server's thread, outside the
    /// sweep's scope, so it is not a crash point here: a crash after the
    /// server accepted is the loop's `tool returned`. A sweep refuses such
    /// points by default ([`sweep::Error::Unscoped`]): sweep this subject
    /// with [`Config::refuse_unscoped`](sweep::Config::refuse_unscoped) off.
    pub fn over_http(mut self) -> LoopSubject {
        self.http = true;
        self
    }

    /// Each world's checkpoint directory, as the agent writes it, goes
    /// through a [`FaultDir`](durable::testing::FaultDir) armed with
    /// `faults` ([`LoopWorld::faults`]); an empty list counts the calls.
    pub fn with_faults(mut self, faults: Vec<durable::testing::Fault>) -> LoopSubject {
        self.faults = Some(faults);
        self
    }

    /// Saves and patches are fsynced in a power-loss world (syncs are what
    /// a power cut tests), and not in the loop's table (a panic cannot tell).
    fn syncs(&self) -> bool {
        self.variant.power.is_some()
    }

    fn tools(&self, w: &LoopWorld) -> Tools {
        let tracker = match &w.http {
            Some(h) => Backend::Http(Arc::clone(&h.client)),
            None => Backend::Local(w.tracker.clone()),
        };
        let mut tools = Tools::new()
            .with(IssueComment::new(tracker.clone()))
            .with(Search::new(tracker.clone()))
            .with(CodePatch::new(Arc::clone(&w.workspace)).sync(self.syncs()));
        let file = IssueFile::new(tracker);
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
        let inner: Box<dyn Model> = match &self.model {
            None => Box::new(ScriptedModel::new(Arc::clone(&self.transcript))),
            Some((_, make)) => make()?,
        };
        let model = Counted {
            inner,
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
            ..Options::default()
        })
        .with_approver(person)
        .with_workspace(Arc::clone(&w.workspace))
        .with_clock(ManualClock::new(1)))
    }
}

impl LoopSubject {
    /// The row title of `variant` with this subject's model and transport.
    fn title_of(&self, variant: LoopVariant) -> String {
        let title = match &self.model {
            None => variant.title(),
            Some((name, _)) => format!("{}, {name}", variant.title()),
        };
        if self.http {
            format!("{title} over HTTP")
        } else {
            title
        }
    }
}

pub use durable::testing::ENUMERATED;

impl Subject for LoopSubject {
    type World = LoopWorld;

    fn name(&self) -> String {
        self.title_of(self.variant)
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
        } else {
            // Counted by the judge, not a column of the power-loss table.
            c.push(Counter::new("gate").hidden());
        }
        if self.variant.power.is_some() {
            // A correct writer loses no save that returned, and leaves no
            // checkpoint the restart cannot read.
            c.push(Counter::new("lost saves").required());
            c.push(Counter::new("stopped").required());
        }
        c
    }

    fn world(&self) -> Result<LoopWorld, sweep::LifeError> {
        let mode = if self.variant.keyed {
            Mode::Keyed
        } else {
            Mode::Keyless
        };
        let mut tracker = Tracker::new(mode).with_uncertain_lookup();
        if self.variant.situation == Situation::FailAfterAccept {
            tracker = tracker.with_fault(Fault::FailAfterAccept { nth: 1 });
        }
        let http = if self.http {
            Some(serve(&tracker)?)
        } else {
            None
        };
        let armed = self.faults.clone();
        let world = |checkpoints: Arc<dyn Dir>, files, workspace, power, mem| {
            let faults = armed.map(|faults| {
                let fd = durable::testing::FaultDir::new(Arc::clone(&checkpoints));
                fd.fail_all(&faults);
                fd
            });
            let checkpoints: Arc<dyn Dir> = match &faults {
                Some(fd) => Arc::new(fd.clone()),
                None => checkpoints,
            };
            LoopWorld {
                faults,
                checkpoints,
                files,
                workspace,
                tracker,
                tally: Arc::default(),
                stopped: None,
                power,
                http,
                mem,
            }
        };
        let Some(p) = self.variant.power else {
            let (cp, ws) = (MemDir::new(), MemDir::new());
            let mem = Some((cp.clone(), ws.clone()));
            let cp = Arc::new(cp);
            return Ok(world(cp.clone(), cp, Arc::new(ws), None, mem));
        };
        let (cp, ws) = (PowerDir::new(p.state), PowerDir::new(p.state));
        let watch = crate::power::watch(p.writer.wrap(cp.clone()), run_id().ok().as_ref());
        Ok(world(
            Arc::new(watch.clone()),
            Arc::new(cp.clone()),
            Arc::new(ws.clone()),
            Some(PowerWorld {
                checkpoints: cp,
                workspace: ws,
                watch,
                last_cut: None,
                sampled: 0,
            }),
            None,
        ))
    }

    fn life(&self, w: &mut LoopWorld) -> Result<(), sweep::LifeError> {
        let result = self
            .agent(w)
            .and_then(|agent| agent.run().map(drop).map_err(|e| e.to_string()));
        w.shutdown(&result);
        Ok(result?)
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<LoopWorld>> {
        Some(self)
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
        v = final_state_notes(w, v, &mut dups);
        let t = &w.tally;
        for note in t.notes.lock().unwrap_or_else(|e| e.into_inner()).iter() {
            v = v.note(note.clone());
        }
        if self.variant.power.is_some() {
            v = power_notes(w, v);
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

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<LoopWorld>> {
        Some(self)
    }
}

/// The notes on the run's saved state after the sweep's life: whether it
/// finished, and each tool call that ended in an error (a `code_patch`
/// applied again counts in `dups`).
fn final_state_notes(w: &LoopWorld, mut v: Verdict, dups: &mut u64) -> Verdict {
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
                    *dups += 1;
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
    v
}

/// The notes and counters of a power-cut life: saves lost, a stopped run,
/// sampled disks.
fn power_notes(w: &LoopWorld, mut v: Verdict) -> Verdict {
    let (lost, notes) = w.lost_saves();
    for note in notes {
        v = v.note(note);
    }
    if let Some(e) = &w.stopped {
        v = v.note(format!("the run stopped: {e}"));
    }
    if w.sampled_cuts() > 0 {
        v = v.note(format!(
            "{} power cut(s) chose from a sample of their disks",
            w.sampled_cuts()
        ));
    }
    v.count("lost saves", lost)
        .count("stopped", u64::from(w.stopped.is_some()))
}

impl sweep::power::PowerCuts<LoopWorld> for LoopSubject {
    /// A power-loss variant runs in every named disk state and in
    /// [`ENUMERATED`]; the others in the process state alone.
    fn crash_states(&self) -> Vec<CrashState> {
        durable::testing::Power::crash_states(self.variant.power)
    }

    fn enumerates(&self, state: &CrashState) -> bool {
        durable::testing::Power::enumerates(self.variant.power, state)
    }

    fn crash_disks(&self, w: &LoopWorld) -> Option<u32> {
        w.last_cut()
    }

    /// The variant's own state.
    fn default_crash_states(&self) -> Vec<CrashState> {
        durable::testing::Power::default_crash_states(self.variant.power)
    }

    /// The variant's title with `state` in place of its own
    /// (`loop keyed | power: torn | no dir fsync`).
    fn row_title(&self, _subject: &str, state: &CrashState) -> String {
        let mut v = self.variant;
        if let (Some(p), Some(s)) = (&mut v.power, DiskState::try_from(state).ok()) {
            p.state = s;
        }
        self.title_of(v)
    }

    fn boot(&self, w: &mut LoopWorld, ctx: &Boot) -> Result<(), sweep::LifeError> {
        if self.enumerates(ctx.state()) {
            w.power_boot_enumerated(PersistenceModel::default(), ctx.disk().unwrap_or(0));
            return Ok(());
        }
        w.power_boot(ctx.state().try_into()?);
        Ok(())
    }

    fn shutdown(&self, w: &mut LoopWorld, _ctx: &Boot) {
        w.power_shutdown();
    }
}

/// Serve `tracker` on 127.0.0.1 (a port of its own) and connect to it. A
/// world must exist, so a server that cannot start is a broken machine, not
/// a scenario's result: it panics with the reason, and the sweep names the
/// scenario.
fn serve(tracker: &Tracker) -> Result<HttpWorld, String> {
    let mut opts = tracker::service::Options::keyed();
    // A fixed clock: the world's tracker keeps keys for ever, and a sweep
    // must not depend on the time of day.
    opts.clock = Arc::new(|| 0);
    let svc = tracker::service::Service::over(tracker.clone(), opts);
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    let server = tracker::http::spawn(svc, loopback)
        .map_err(|e| format!("cannot serve the world's tracker on 127.0.0.1: {e}"))?;
    let client = tracker::client::HttpTracker::connect(&server.url())
        .map_err(|e| format!("cannot reach the world's tracker at {}: {e}", server.url()))?;
    Ok(HttpWorld {
        client: Arc::new(client),
        _server: server,
    })
}
