//! The loop's behaviour, one property per test: each resume
//! phase, each rung of the ladder, limits across restarts, the approval
//! marker's order, the refile guard, the key beside the arguments, invalid
//! argument JSON, cancel, and the workspace check.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent::approve::{Answer, Decision};
use agent::model::{Model, ModelError, Reply, ScriptedModel, Transcript};
use agent::observe::{Event, Returned, Rung};
use agent::state::{Attempt, Checkpoint, Message, Phase, Role, State, ToolCall, ToolResult, Usage};
use agent::testing::{Asked, ManualClock, ScriptedApprover};
use agent::tool::{CallContext, Effect, Keys, Tool, ToolError, ToolOutput, Tools};
use agent::{Agent, Error, Limits, RunResult};
use crashpoint::Hit;
use durable::testing::MemDir;
use durable::{Dir, Options, RunId};
use serde_json::Value;
use tracker::{Fault, Mode, Request, Tracker};

const RUN: &str = "test-run-1";

fn run_id() -> RunId {
    RunId::parse(RUN).unwrap()
}

fn transcript(json: &str) -> Arc<Transcript> {
    Arc::new(Transcript::parse(json, "test.json").unwrap())
}

/// Files issues A and B, searches, comments on #1, answers.
const JOB: &str = r#"{"task": "triage A and B", "replies": [
  {"text": "filing", "calls": [
    {"id": "c1", "tool": "issue_file", "args": {"title": "A", "body": "a", "cause": "A"}},
    {"id": "c2", "tool": "issue_file", "args": {"title": "B", "body": "b", "cause": "B"}}],
   "usage": {"input_tokens": 100, "output_tokens": 10, "dollars": 0.25}},
  {"text": "checking", "calls": [
    {"id": "c3", "tool": "search", "args": {"query": "A"}},
    {"id": "c4", "tool": "issue_comment", "args": {"issue": 1, "body": "repro"}}],
   "usage": {"input_tokens": 200, "output_tokens": 20, "dollars": 0.25}},
  {"text": "all filed", "usage": {"input_tokens": 300, "output_tokens": 30, "dollars": 0.25}}]}"#;

fn file_a() -> Request {
    Request::FileIssue {
        title: "A".into(),
        body: "a".into(),
    }
}

/// A model that counts its calls.
struct Counting {
    inner: ScriptedModel,
    calls: Arc<AtomicU64>,
}

impl Model for Counting {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.reply(conversation)
    }
}

/// Everything a crash leaves behind, and the test's own records.
struct World {
    checkpoints: MemDir,
    workspace: MemDir,
    tracker: Tracker,
    clock: ManualClock,
    events: Arc<Mutex<Vec<Event>>>,
    model_calls: Arc<AtomicU64>,
    person: ScriptedApprover,
}

impl World {
    fn new(tracker: Tracker) -> World {
        World {
            checkpoints: MemDir::new(),
            workspace: MemDir::new(),
            tracker,
            clock: ManualClock::new(1),
            events: Arc::default(),
            model_calls: Arc::default(),
            person: ScriptedApprover::new(),
        }
    }

    fn keyed() -> World {
        World::new(Tracker::new(Mode::Keyed))
    }

    fn triage_tools(&self) -> Tools {
        triage_tools::triage(&self.tracker, Arc::new(self.workspace.clone()))
    }

    /// An agent over this world running `t` with `tools`.
    fn agent_with(&self, t: &Arc<Transcript>, tools: Tools) -> Agent {
        let events = Arc::clone(&self.events);
        let model = Counting {
            inner: ScriptedModel::new(Arc::clone(t)),
            calls: Arc::clone(&self.model_calls),
        };
        Agent::new(
            run_id(),
            Arc::new(self.checkpoints.clone()),
            t.task.clone(),
            model,
            tools,
        )
        .with_options(Options {
            sync: false,
            max_resumes: Some(100),
            ..Options::default()
        })
        .with_approver(self.person.clone())
        .with_observer(move |e: &Event| events.lock().unwrap().push(e.clone()))
        .with_workspace(Arc::new(self.workspace.clone()))
        .with_clock(self.clock.clone())
    }

    fn agent(&self, t: &Arc<Transcript>) -> Agent {
        self.agent_with(t, self.triage_tools())
    }

    /// One life that crashes at `hit` (and must reach it).
    fn crash(&self, agent: &Agent, hit: &str) {
        let hit: Hit = hit.parse().unwrap();
        let life = crashpoint::crash_at(hit.clone(), || agent.run());
        assert_eq!(life.outcome.crashed(), Some(&hit), "{:?}", life.outcome);
    }

    fn state(&self) -> durable::checkpoint::Saved<State> {
        Checkpoint::load(&self.checkpoints, &run_id())
            .unwrap()
            .expect("a checkpoint")
    }

    fn events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }

    fn calls(&self) -> u64 {
        self.model_calls.load(Ordering::SeqCst)
    }
}

fn ladder(events: &[Event]) -> Vec<(String, Rung, bool)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Ladder {
                call,
                rung,
                settled,
                ..
            } => Some((call.clone(), *rung, *settled)),
            _ => None,
        })
        .collect()
}

fn lad(call: &str, rung: Rung, settled: bool) -> (String, Rung, bool) {
    (call.to_owned(), rung, settled)
}

fn tool_message(st: &State, call: &str) -> String {
    st.messages
        .iter()
        .find(|m| m.role == Role::Tool && m.call_id.as_deref() == Some(call))
        .map(|m| m.text.clone())
        .unwrap_or_else(|| panic!("no result for {call}"))
}

/// Every effect of [`JOB`] happened exactly once.
fn assert_job_once(tracker: &Tracker) {
    let issues = tracker.issues();
    let titles: Vec<&str> = issues.iter().map(|i| i.title.as_str()).collect();
    assert_eq!(titles, ["A", "B"]);
    assert_eq!(issues[0].comments.len(), 1);
    assert_eq!(issues[1].comments.len(), 0);
}

// ---------------------------------------------------------------------------
// Resume by phase

#[test]
fn a_clean_run_emits_one_event_per_step() {
    let w = World::keyed();
    let t = transcript(JOB);
    let r = w.agent(&t).run().unwrap();
    assert_eq!(r.answer, "all filed");
    assert_eq!(r.turns, 3);
    assert_eq!(r.usage.input_tokens, 600);
    assert_job_once(&w.tracker);
    let kinds: Vec<String> = w
        .events()
        .iter()
        .map(|e| match e {
            Event::Started { .. } => "started".into(),
            Event::ModelCall { turn } => format!("model {turn}"),
            Event::ReplySaved { turn, .. } => format!("reply {turn}"),
            Event::MarkerSaved { call, .. } => format!("marker {call}"),
            Event::ToolCall { call, .. } => format!("call {call}"),
            Event::ToolReturned { call, .. } => format!("returned {call}"),
            Event::ResultSaved { call, .. } => format!("result {call}"),
            Event::Done { .. } => "done".into(),
            other => format!("{other:?}"),
        })
        .collect();
    #[rustfmt::skip]
    let want = [
        "started", "model 1", "reply 1",
        "marker c1", "call c1", "returned c1", "result c1",
        "marker c2", "call c2", "returned c2", "result c2",
        "model 2", "reply 2",
        "call c3", "returned c3", "result c3",
        "marker c4", "call c4", "returned c4", "result c4",
        "model 3", "reply 3", "done",
    ];
    assert_eq!(kinds, want);
}

#[test]
fn done_returns_the_saved_answer_and_calls_nothing() {
    let w = World::keyed();
    let t = transcript(JOB);
    let first = w.agent(&t).run().unwrap();
    let saved = w
        .checkpoints
        .read(&Checkpoint::file_name(&run_id()))
        .unwrap();
    w.events();

    let again = w.agent(&t).run().unwrap();
    assert_eq!(again, first);
    assert_eq!(w.calls(), 3, "no model call on a finished run");
    assert_eq!(
        w.checkpoints
            .read(&Checkpoint::file_name(&run_id()))
            .unwrap(),
        saved,
        "nothing saved"
    );
    let events = w.events();
    assert!(matches!(
        &events[0],
        Event::Resumed {
            phase: Phase::Done,
            ..
        }
    ));
    assert!(matches!(&events[1], Event::Done { answer } if answer == "all filed"));
    assert_eq!(events.len(), 2);
    assert_job_once(&w.tracker);
}

#[test]
fn model_phase_makes_the_model_call_it_was_about_to_make() {
    let w = World::keyed();
    let t = transcript(JOB);
    // The reply for turn 2 arrives and is lost before its save.
    w.crash(&w.agent(&t), "reply arrived#2");
    let st = w.state();
    assert_eq!(st.turns, 1);
    assert_eq!(st.calls.len(), 2, "turn 1's calls, all answered");
    assert_eq!(st.results.len(), 2);
    w.events();

    let r = w.agent(&t).run().unwrap();
    assert_eq!(r.turns, 3);
    // Turn 2 was asked for twice (its reply was never saved), nothing else.
    assert_eq!(w.calls(), 4);
    let events = w.events();
    assert!(matches!(
        &events[0],
        Event::Resumed {
            phase: Phase::Tools,
            resumes: 1,
            turns: 1,
            ..
        }
    ));
    assert!(matches!(&events[1], Event::ModelCall { turn: 2 }));
    assert_job_once(&w.tracker);

    // A checkpoint saved in phase model (here: by a cancel before the first
    // model call) resumes with that call.
    let w = World::keyed();
    let cancel = Arc::new(AtomicBool::new(true));
    let e = w
        .agent(&t)
        .with_cancel(Arc::clone(&cancel))
        .run()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Cancelled {
                phase: Phase::Model
            }
        ),
        "{e}"
    );
    assert_eq!(w.state().phase, Phase::Model);
    assert_eq!(w.calls(), 0);
    cancel.store(false, Ordering::SeqCst);
    w.agent(&t).run().unwrap();
    assert_eq!(w.calls(), 3);
    assert_job_once(&w.tracker);
}

#[test]
fn tools_phase_runs_only_the_unanswered_calls_of_the_saved_reply() {
    let w = World::keyed();
    let t = transcript(JOB);
    w.crash(&w.agent(&t), "result saved#1");
    let st = w.state();
    assert_eq!(st.phase, Phase::Tools);
    assert_eq!(st.results.keys().collect::<Vec<_>>(), ["c1"]);
    assert!(!st.attempts.contains_key("c2"), "c2 never started");
    w.events();

    w.agent(&t).run().unwrap();
    let events = w.events();
    assert!(ladder(&events).is_empty(), "an unmarked call simply runs");
    let ran: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { call, .. } => Some(call.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ran, ["c2", "c3", "c4"], "c1 is not run again");
    assert_eq!(w.calls(), 3, "the saved reply is not asked for again");
    assert_job_once(&w.tracker);
}

#[test]
fn paused_phase_asks_again_on_restart() {
    let mut w = World::keyed();
    let t = transcript(JOB);
    w.person = ScriptedApprover::new().on_approval(|_| Decision::Later);
    let e = w.agent_with(&t, gated_file(&w)).run().unwrap_err();
    assert!(
        matches!(&e, Error::Paused { waiting } if waiting == &["c1"]),
        "{e}"
    );
    let st = w.state();
    assert_eq!(st.phase, Phase::Paused);
    assert_eq!(st.waiting, ["c1"]);
    assert!(st.attempts.is_empty(), "no marker without a yes");
    assert!(w.tracker.issues().is_empty());
    assert!(matches!(w.events().last(), Some(Event::Paused { .. })));

    w.person = ScriptedApprover::new();
    w.agent_with(&t, gated_file(&w)).run().unwrap();
    assert_job_once(&w.tracker);
    let asked: Vec<String> = w
        .person
        .log()
        .into_iter()
        .map(|a| match a {
            Asked::Approval(c, _) => c,
            Asked::Question(c, _) => format!("question {c}"),
        })
        .collect();
    assert_eq!(asked, ["c1", "c2"]);
}

// ---------------------------------------------------------------------------
// The ladder

#[test]
fn rung_one_reruns_a_call_whose_key_the_service_holds() {
    let w = World::keyed();
    let t = transcript(JOB);
    w.crash(&w.agent(&t), "tracker accepted#1");
    assert_eq!(w.tracker.count(&file_a()), 1);
    let st = w.state();
    assert_eq!(
        st.attempts["c1"].key.as_deref(),
        Some(durable::key(RUN, "c1").as_str())
    );
    w.events();

    w.agent(&t).run().unwrap();
    assert_eq!(ladder(&w.events()), [lad("c1", Rung::Rerun, true)]);
    assert_eq!(w.person.questions(), 0);
    assert_job_once(&w.tracker);
}

/// A tool that counts its calls, with a chosen effect.
struct Counter {
    effect: Effect,
    calls: Arc<AtomicU64>,
}

impl Tool for Counter {
    fn name(&self) -> &str {
        "set_flag"
    }
    fn effect(&self) -> Effect {
        self.effect
    }
    fn call(&self, _: &CallContext<'_>, _: &Value) -> Result<ToolOutput, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolOutput::ok("{\"flag\": true}"))
    }
}

#[test]
fn rung_one_reruns_an_idempotent_call_and_a_gated_read() {
    let t = transcript(
        r#"{"replies": [{"calls": [{"id": "c1", "tool": "set_flag", "args": {}}]}, {"text": "ok"}]}"#,
    );
    for (effect, gated, why) in [
        (Effect::Idempotent, false, "idempotent"),
        (Effect::ReadsOnly, true, "only reads"),
    ] {
        let w = World::keyed();
        let calls = Arc::new(AtomicU64::new(0));
        let tools = || {
            let c = Counter {
                effect,
                calls: Arc::clone(&calls),
            };
            if gated {
                Tools::new().with(agent::tool::Gated(c))
            } else {
                Tools::new().with(c)
            }
        };
        w.crash(&w.agent_with(&t, tools()), "tool returned#1");
        assert!(
            w.state().attempts.contains_key("c1"),
            "{effect:?} is marked"
        );
        w.events();
        w.agent_with(&t, tools()).run().unwrap();
        let events = w.events();
        assert_eq!(ladder(&events), [lad("c1", Rung::Rerun, true)]);
        assert!(events
            .iter()
            .any(|e| matches!(e, Event::Ladder { why: w, .. } if w.contains(why))));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(
            w.person.log().len(),
            usize::from(gated),
            "a gated call's yes is asked once"
        );
    }
}

#[test]
fn an_expired_key_counts_as_none_and_the_lookup_decides() {
    // The tracker keeps keys 10 ticks; its lookup by arguments is certain.
    let w = World::new(Tracker::new(Mode::Keyed).with_key_ttl(10));
    let t = transcript(JOB);
    let tools = || {
        w.triage_tools()
            .with(triage_tools::IssueFile::new(w.tracker.clone()).keep_keys_for(10))
    };
    w.crash(&w.agent_with(&t, tools()), "tracker accepted#1");
    w.events();
    w.clock.advance(10);
    w.tracker.advance(10);
    assert!(!w.tracker.holds_key(&durable::key(RUN, "c1")));

    w.agent_with(&t, tools()).run().unwrap();
    let events = w.events();
    assert_eq!(
        ladder(&events),
        [lad("c1", Rung::Rerun, false), lad("c1", Rung::Lookup, true)]
    );
    assert!(events.iter().any(
        |e| matches!(e, Event::Ladder { rung: Rung::Rerun, why, .. } if why.contains("expired"))
    ));
    assert_eq!(w.person.questions(), 0);
    assert_job_once(&w.tracker);
    assert_eq!(tool_message(&w.state(), "c1"), r#"{"issue":1}"#);
}

#[test]
fn a_certain_lookup_answers_found_or_not_found() {
    let t = transcript(JOB);
    // Keyless tracker, certain lookup. Crashed after the tracker took c1:
    // found. Crashed after the marker, before the call went out: certainly
    // not, so it runs.
    for (hit, settled_by) in [
        ("tracker accepted#1", "the lookup found it"),
        ("marker saved#1", "certain it did not happen"),
    ] {
        let w = World::new(Tracker::new(Mode::Keyless));
        w.crash(&w.agent(&t), hit);
        w.events();
        w.agent(&t).run().unwrap();
        let events = w.events();
        assert_eq!(
            ladder(&events),
            [lad("c1", Rung::Rerun, false), lad("c1", Rung::Lookup, true)],
            "{hit}"
        );
        assert!(events.iter().any(
            |e| matches!(e, Event::Ladder { rung: Rung::Lookup, why, .. } if why.contains(settled_by))
        ));
        assert_eq!(w.person.questions(), 0);
        assert_job_once(&w.tracker);
    }
}

#[test]
fn a_lookup_that_cannot_tell_passes_the_question_to_the_person() {
    let t = transcript(JOB);
    // The call reached the tracker: the person says done, with the result.
    let mut w = World::new(Tracker::new(Mode::Keyless).with_uncertain_lookup());
    w.crash(&w.agent(&t), "tracker accepted#1");
    w.events();
    let why = Arc::new(Mutex::new(String::new()));
    let seen = Arc::clone(&why);
    w.person = ScriptedApprover::new().on_question(move |q| {
        *seen.lock().unwrap() = q.why.to_owned();
        Answer::Done(ToolResult {
            output: triage_tools::issue_output(1),
            is_error: false,
        })
    });
    w.agent(&t).run().unwrap();
    assert_eq!(
        ladder(&w.events()),
        [
            lad("c1", Rung::Rerun, false),
            lad("c1", Rung::Lookup, false),
            lad("c1", Rung::Person, true)
        ]
    );
    assert!(why.lock().unwrap().contains("sent no key"), "{why:?}");
    assert!(why.lock().unwrap().contains("lag behind"), "{why:?}");
    assert_eq!(w.person.questions(), 1);
    assert_job_once(&w.tracker);
    assert_eq!(tool_message(&w.state(), "c1"), r#"{"issue":1}"#);

    // The call never went out: the person says rerun.
    let w = World::new(Tracker::new(Mode::Keyless).with_uncertain_lookup());
    w.crash(&w.agent(&t), "marker saved#1");
    w.agent(&t).run().unwrap();
    assert_eq!(
        w.person.log(),
        [Asked::Question("c1".into(), Answer::Rerun)]
    );
    assert_job_once(&w.tracker);

    // Nobody answers: the run pauses, and asks again on restart.
    let mut w = World::new(Tracker::new(Mode::Keyless).with_uncertain_lookup());
    w.crash(&w.agent(&t), "marker saved#1");
    w.person = ScriptedApprover::new().on_question(|_| Answer::Later);
    let e = w.agent(&t).run().unwrap_err();
    assert!(
        matches!(&e, Error::Paused { waiting } if waiting == &["c1"]),
        "{e}"
    );
    assert_eq!(w.state().phase, Phase::Paused);
    assert!(w.state().attempts.contains_key("c1"), "the marker stays");
    w.person = ScriptedApprover::new();
    w.agent(&t).run().unwrap();
    assert_job_once(&w.tracker);
}

#[test]
fn a_call_that_fails_after_the_tracker_accepted_goes_up_the_ladder() {
    let t = transcript(JOB);
    // Keyed: rerun with the same key gets the first answer. No question.
    let w = World::new(Tracker::new(Mode::Keyed).with_fault(Fault::FailAfterAccept { nth: 1 }));
    w.agent(&t).run().unwrap();
    let events = w.events();
    assert!(events.iter().any(|e| matches!(e,
        Event::ToolReturned { call, returned: Returned::Unknown(_), .. } if call == "c1")));
    assert_eq!(ladder(&events), [lad("c1", Rung::Rerun, true)]);
    assert_eq!(w.person.questions(), 0);
    assert_job_once(&w.tracker);
    assert_eq!(tool_message(&w.state(), "c1"), r#"{"issue":1}"#);

    // Keyless with a lagging lookup: the person settles it.
    let mut w = World::new(
        Tracker::new(Mode::Keyless)
            .with_uncertain_lookup()
            .with_fault(Fault::FailAfterAccept { nth: 1 }),
    );
    w.person = ScriptedApprover::new().on_question(|_| {
        Answer::Done(ToolResult {
            output: triage_tools::issue_output(1),
            is_error: false,
        })
    });
    w.agent(&t).run().unwrap();
    assert_eq!(w.person.questions(), 1);
    assert_job_once(&w.tracker);
}

// ---------------------------------------------------------------------------
// Limits

/// Run lives that each crash right after their first saved result, until
/// one stops with an error; return it.
fn crash_every_life(w: &World, t: &Arc<Transcript>, limits: Limits) -> Error {
    for _ in 0..20 {
        let agent = w.agent(t).with_limits(limits);
        let life = crashpoint::crash_at(Hit::new("result saved", 1), || agent.run());
        match life.outcome {
            crashpoint::Outcome::Crashed(_) => continue,
            crashpoint::Outcome::Finished(Err(e)) => return e,
            other => panic!("{other:?}"),
        }
    }
    panic!("no limit reached in 20 lives");
}

#[test]
fn limits_hold_across_restarts() {
    let t = transcript(JOB);
    type IsIt = fn(&Error) -> bool;
    let cases: [(Limits, IsIt); 3] = [
        (
            Limits {
                max_turns: Some(2),
                ..Limits::NONE
            },
            |e| matches!(e, Error::TurnLimit { turns: 2, limit: 2 }),
        ),
        (
            Limits {
                max_tokens: Some(330),
                ..Limits::NONE
            },
            |e| {
                matches!(
                    e,
                    Error::TokenLimit {
                        tokens: 330,
                        limit: 330
                    }
                )
            },
        ),
        (
            Limits {
                max_dollars: Some(0.5),
                ..Limits::NONE
            },
            |e| matches!(e, Error::DollarLimit { .. }),
        ),
    ];
    for (limits, is_it) in cases {
        let w = World::keyed();
        let e = crash_every_life(&w, &t, limits);
        assert!(is_it(&e), "{limits:?}: {e}");
        let st = w.state();
        assert_eq!(st.turns, 2, "{limits:?}");
        assert!(st.resumes > 1, "{limits:?}: the run crashed and resumed");
        assert_eq!(w.calls(), 2, "{limits:?}: two replies, each paid once");
        // A new process gets the same error at once, calling nothing.
        let again = w.agent(&t).with_limits(limits).run().unwrap_err();
        assert!(is_it(&again), "{again}");
        assert_eq!(w.calls(), 2);
    }
}

#[test]
fn restarts_are_limited_even_when_every_restart_dies() {
    let w = World::keyed();
    let t = transcript(JOB);
    let opts = Options {
        sync: false,
        max_resumes: Some(2),
        ..Options::default()
    };
    for _ in 0..3 {
        w.crash(&w.agent(&t).with_options(opts), "reply arrived#1");
    }
    let e = w.agent(&t).with_options(opts).run().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Checkpoint(durable::Error::MaxResumes {
                resumes: 3,
                limit: 2,
                ..
            })
        ),
        "{e}"
    );
}

// ---------------------------------------------------------------------------
// Approvals

fn gated_file(w: &World) -> Tools {
    let mut tools = w.triage_tools();
    tools.insert(agent::tool::Gated(triage_tools::IssueFile::new(
        w.tracker.clone(),
    )));
    tools
}

#[test]
fn the_marker_of_a_gated_call_is_written_after_the_yes() {
    let w = World::keyed();
    let t = transcript(JOB);
    w.agent_with(&t, gated_file(&w)).run().unwrap();
    let events = w.events();
    let pos = |f: &dyn Fn(&Event) -> bool| events.iter().position(f).unwrap();
    let yes = pos(
        &|e| matches!(e, Event::Decided { call, decision: Decision::Approve, .. } if call == "c1"),
    );
    let marker =
        pos(&|e| matches!(e, Event::MarkerSaved { call, approved: true, .. } if call == "c1"));
    let sent = pos(&|e| matches!(e, Event::ToolCall { call, .. } if call == "c1"));
    assert!(yes < marker && marker < sent, "{yes} {marker} {sent}");

    // A crash while the person decides leaves nothing to resolve: the
    // restart asks again and runs the call, with no ladder.
    let w = World::keyed();
    w.crash(&w.agent_with(&t, gated_file(&w)), "person deciding#1");
    assert!(w.state().attempts.is_empty());
    w.events();
    w.agent_with(&t, gated_file(&w)).run().unwrap();
    assert!(ladder(&w.events()).is_empty());
    let approvals = |w: &World, id: &str| {
        w.person
            .log()
            .iter()
            .filter(|a| matches!(a, Asked::Approval(c, _) if c == id))
            .count()
    };
    assert_eq!(
        approvals(&w, "c1"),
        1,
        "the crashed decision was never answered"
    );
    assert_job_once(&w.tracker);

    // A crash after the yes was saved: the yes is not asked for again.
    let w = World::keyed();
    w.crash(&w.agent_with(&t, gated_file(&w)), "marker saved#1");
    assert!(w.state().attempts["c1"].approved);
    w.events();
    w.agent_with(&t, gated_file(&w)).run().unwrap();
    assert_eq!(approvals(&w, "c1"), 1);
    assert_eq!(ladder(&w.events()), [lad("c1", Rung::Rerun, true)]);
    assert_job_once(&w.tracker);
}

#[test]
fn a_denied_call_gets_an_error_result_and_no_marker() {
    let mut w = World::keyed();
    let t = transcript(JOB);
    w.person = ScriptedApprover::new().on_approval(|a| {
        if a.call.id == "c2" {
            Decision::Deny("B is a duplicate".into())
        } else {
            Decision::Approve
        }
    });
    w.agent_with(&t, gated_file(&w)).run().unwrap();
    let st = w.state();
    let out = tool_message(&st, "c2");
    assert!(
        out.contains("denied") && out.contains("B is a duplicate"),
        "{out}"
    );
    assert_eq!(w.tracker.issues().len(), 1);
}

// ---------------------------------------------------------------------------
// The refile guard, the key, arguments

#[test]
fn the_refile_guard_refuses_a_second_filing_of_a_cause() {
    let w = World::keyed();
    let t = transcript(
        r#"{"replies": [
          {"calls": [{"id": "c1", "tool": "issue_file", "args": {"title": "A", "body": "a", "cause": "parser"}}]},
          {"calls": [{"id": "c2", "tool": "issue_file", "args": {"title": "A again", "body": "a2", "cause": "parser"}},
                     {"id": "c3", "tool": "issue_file", "args": {"title": "B", "body": "b", "cause": "sched"}}]},
          {"text": "ok"}]}"#,
    );
    w.agent(&t).run().unwrap();
    let st = w.state();
    let refused: Value = serde_json::from_str(&tool_message(&st, "c2")).unwrap();
    assert_eq!(refused["issue"], 1);
    assert!(
        refused["error"].as_str().unwrap().contains("already filed"),
        "{refused}"
    );
    assert_eq!(tool_message(&st, "c3"), r#"{"issue":2}"#);
    let titles: Vec<String> = w.tracker.issues().into_iter().map(|i| i.title).collect();
    assert_eq!(titles, ["A", "B"]);
}

/// What a [`Spy`] received: the key in the context, and the arguments.
type Seen = Arc<Mutex<Vec<(Option<String>, Value)>>>;

/// A keyed tool that records what it received.
struct Spy {
    seen: Seen,
    cancel: Option<Arc<AtomicBool>>,
}

impl Tool for Spy {
    fn name(&self) -> &str {
        "spy"
    }
    fn effect(&self) -> Effect {
        Effect::Changes
    }
    fn keys(&self) -> Keys {
        Keys::Honoured { keep_for: None }
    }
    fn call(&self, ctx: &CallContext<'_>, args: &Value) -> Result<ToolOutput, ToolError> {
        self.seen
            .lock()
            .unwrap()
            .push((ctx.key.map(str::to_owned), args.clone()));
        if let Some(c) = &self.cancel {
            c.store(true, Ordering::SeqCst);
        }
        Ok(ToolOutput::ok("{\"spied\": true}"))
    }
}

const SPY_JOB: &str = r#"{"replies": [
  {"calls": [{"id": "c1", "tool": "spy", "args": {"x": 1}},
             {"id": "c2", "tool": "spy", "args": {"x": 2}}]},
  {"text": "ok"}]}"#;

#[test]
fn the_key_travels_beside_the_arguments_never_in_them() {
    let w = World::keyed();
    let t = transcript(SPY_JOB);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let tools = Tools::new().with(Spy {
        seen: Arc::clone(&seen),
        cancel: None,
    });
    w.agent_with(&t, tools).run().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for ((key, args), (id, x)) in seen.iter().zip([("c1", 1), ("c2", 2)]) {
        let want = durable::key(RUN, id);
        assert_eq!(key.as_deref(), Some(want.as_str()));
        assert_eq!(
            args,
            &serde_json::json!({ "x": x }),
            "the arguments are the model's, untouched"
        );
        assert!(!args.to_string().contains(&want));
    }
    let events = w.events();
    assert!(events.iter().any(|e| matches!(e,
        Event::ToolCall { call, key: Some(k), .. } if call == "c1" && *k == durable::key(RUN, "c1"))));
}

#[test]
fn invalid_argument_json_still_saves_and_resumes() {
    let w = World::keyed();
    let t = transcript(
        r#"{"replies": [
          {"calls": [{"id": "c1", "tool": "issue_file", "args": "{\"title\": \"A\", \"body\": "},
                     {"id": "c2", "tool": "issue_file", "args": {"title": "A", "body": "a"}}]},
          {"text": "ok"}]}"#,
    );
    w.crash(&w.agent(&t), "result saved#1");
    let st = w.state();
    assert_eq!(st.calls[0].args, "{\"title\": \"A\", \"body\": ");
    assert!(st.results["c1"].is_error);
    assert!(st.results["c1"].output.contains("not valid JSON"));
    let r = w.agent(&t).run().unwrap();
    assert_eq!(r.answer, "ok");
    assert_eq!(w.tracker.issues().len(), 1);
    assert!(tool_message(&w.state(), "c1").contains("nothing was run"));
}

#[test]
fn an_unknown_tool_and_a_reused_call_id_are_handled() {
    // The model calls a tool the agent lacks: an error result it can read.
    let w = World::keyed();
    let t =
        transcript(r#"{"replies": [{"calls": [{"id": "c1", "tool": "nope"}]}, {"text": "ok"}]}"#);
    let model = ScriptedModel::new(Arc::clone(&t));
    let a = Agent::new(
        run_id(),
        Arc::new(w.checkpoints.clone()),
        "t",
        model,
        w.triage_tools(),
    )
    .with_options(Options {
        sync: false,
        ..Options::default()
    });
    a.run().unwrap();
    let out: Value = serde_json::from_str(&tool_message(&w.state(), "c1")).unwrap();
    assert!(
        out["error"]
            .as_str()
            .unwrap()
            .starts_with("unknown tool \"nope\""),
        "{out}"
    );
    // Agent::scripted refuses the transcript up front, naming it.
    let e = Agent::scripted(run_id(), Arc::new(MemDir::new()), t, w.triage_tools()).unwrap_err();
    assert!(e.to_string().starts_with("test.json: call \"c1\""), "{e}");

    // A reply reusing an earlier call's ID is refused before it is saved.
    struct Repeat;
    impl Model for Repeat {
        fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
            let n = conversation
                .iter()
                .filter(|m| m.role == Role::Assistant)
                .count();
            Ok(Reply {
                text: String::new(),
                calls: vec![ToolCall {
                    id: "same".into(),
                    tool: "search".into(),
                    args: format!("{{\"query\": \"{n}\"}}"),
                }],
                usage: Usage::default(),
            })
        }
    }
    let w = World::keyed();
    let a = Agent::new(
        run_id(),
        Arc::new(w.checkpoints.clone()),
        "t",
        Repeat,
        w.triage_tools(),
    )
    .with_options(Options {
        sync: false,
        ..Options::default()
    });
    let e = a.run().unwrap_err();
    assert!(
        matches!(&e, Error::BadCallId { turn: 2, call, .. } if call == "same"),
        "{e}"
    );
    assert_eq!(w.state().turns, 1);
}

// ---------------------------------------------------------------------------
// Cancel, workspace, lock, result

#[test]
fn a_cancelled_run_still_saves_where_it_stopped() {
    let w = World::keyed();
    let t = transcript(SPY_JOB);
    let cancel = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let spy = |cancel: Option<Arc<AtomicBool>>| {
        Tools::new().with(Spy {
            seen: Arc::clone(&seen),
            cancel,
        })
    };
    // The flag is set while c1 runs (a shutdown signal arriving mid-call).
    let e = w
        .agent_with(&t, spy(Some(Arc::clone(&cancel))))
        .with_cancel(Arc::clone(&cancel))
        .run()
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Cancelled {
                phase: Phase::Tools
            }
        ),
        "{e}"
    );
    let st = w.state();
    assert_eq!(
        st.results.keys().collect::<Vec<_>>(),
        ["c1"],
        "c1's result is saved"
    );
    assert!(matches!(
        w.events().last(),
        Some(Event::Cancelled {
            phase: Phase::Tools
        })
    ));

    cancel.store(false, Ordering::SeqCst);
    w.agent_with(&t, spy(None))
        .with_cancel(cancel)
        .run()
        .unwrap();
    let ids: Vec<Value> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, a)| a["x"].clone())
        .collect();
    assert_eq!(ids, [1, 2], "c1 ran once");
}

const PATCH_JOB: &str = r#"{"replies": [
  {"calls": [{"id": "c1", "tool": "code_patch", "args": {"path": "p.rs", "old": "", "new": "fn p() { x.unwrap() }"}}]},
  {"calls": [{"id": "c2", "tool": "code_patch", "args": {"path": "p.rs", "old": "unwrap()", "new": "unwrap_or(0)"}}]},
  {"calls": [{"id": "c3", "tool": "search", "args": {"query": "p"}}]},
  {"text": "patched"}]}"#;

#[test]
fn a_workspace_file_changed_by_someone_else_stops_the_resume() {
    let w = World::keyed();
    let t = transcript(PATCH_JOB);
    w.crash(&w.agent(&t), "tool returned#3");
    let st = w.state();
    assert_eq!(st.files.len(), 1);
    w.workspace
        .write("p.rs", b"fn p() { edited by hand }")
        .unwrap();
    let e = w.agent(&t).run().unwrap_err();
    match e {
        Error::Checkpoint(durable::Error::WorkspaceChanged {
            file,
            expected,
            found,
        }) => {
            assert_eq!(file.to_str(), Some("mem:/p.rs"));
            assert_eq!(expected, st.files["p.rs"]);
            assert!(found.is_some());
        }
        other => panic!("{other}"),
    }
    // A deleted file too.
    w.workspace.remove("p.rs").unwrap();
    let e = w.agent(&t).run().unwrap_err();
    assert!(matches!(
        e,
        Error::Checkpoint(durable::Error::WorkspaceChanged { found: None, .. })
    ));
}

#[test]
fn the_runs_own_unsaved_write_is_the_ladders_not_a_change() {
    // The second patch of p.rs returned, its result unsaved: the file no
    // longer matches the recorded hash, but the marked call explains it.
    let w = World::keyed();
    let t = transcript(PATCH_JOB);
    w.crash(&w.agent(&t), "tool returned#2");
    let before = w.state().files["p.rs"].clone();
    w.events();
    let r = w.agent(&t).run().unwrap();
    assert_eq!(
        ladder(&w.events()),
        [lad("c2", Rung::Rerun, false), lad("c2", Rung::Lookup, true)]
    );
    assert_ne!(r.files["p.rs"], before, "the lookup recorded the new hash");
    assert_eq!(
        w.workspace.read("p.rs").unwrap().unwrap(),
        b"fn p() { x.unwrap_or(0) }"
    );
    assert!(!tool_message(&w.state(), "c2").contains("error"));
}

/// Only a marked call that has no result may explain a changed file: one
/// whose result is saved (its write is recorded) and one that never started
/// (no marker: a gated call still waiting on its yes) wrote nothing since,
/// so a change to a file they touch is someone else's.
#[test]
fn a_change_to_a_file_an_answered_or_unstarted_call_touches_stops_the_resume() {
    let changed = |e: Error| match e {
        Error::Checkpoint(durable::Error::WorkspaceChanged { file, .. }) => {
            assert_eq!(file.to_str(), Some("mem:/p.rs"));
        }
        other => panic!("expected WorkspaceChanged, got {other}"),
    };
    let t = transcript(PATCH_JOB);

    // c1 (create p.rs) answered, the run still in phase tools for it.
    let w = World::keyed();
    w.crash(&w.agent(&t), "result saved#1");
    let st = w.state();
    assert_eq!(st.phase, Phase::Tools);
    assert!(st.attempts.contains_key("c1") && st.results.contains_key("c1"));
    w.workspace.write("p.rs", b"edited by hand").unwrap();
    changed(w.agent(&t).run().unwrap_err());

    // c2 (patch p.rs) waiting on a person, never marked.
    let mut w = World::keyed();
    w.person = ScriptedApprover::new().on_approval(|a| {
        if a.call.id == "c2" {
            Decision::Later
        } else {
            Decision::Approve
        }
    });
    let gated_patch = |w: &World| {
        let mut tools = w.triage_tools();
        tools.insert(agent::tool::Gated(
            triage_tools::CodePatch::new(Arc::new(w.workspace.clone())).sync(false),
        ));
        tools
    };
    let e = w.agent_with(&t, gated_patch(&w)).run().unwrap_err();
    assert!(matches!(e, Error::Paused { .. }), "{e}");
    let st = w.state();
    assert_eq!(st.calls[0].id, "c2");
    assert!(st.attempts.is_empty() && st.files.contains_key("p.rs"));
    w.workspace.write("p.rs", b"edited by hand").unwrap();
    changed(w.agent_with(&t, gated_patch(&w)).run().unwrap_err());
}

#[test]
fn a_second_process_on_the_run_is_refused() {
    let w = World::keyed();
    let t = transcript(JOB);
    let _held = Checkpoint::open(
        Arc::new(w.checkpoints.clone()),
        &run_id(),
        Options::default(),
    )
    .unwrap();
    let e = w.agent(&t).run().unwrap_err();
    assert!(
        matches!(e, Error::Checkpoint(durable::Error::Locked { .. })),
        "{e}"
    );
}

#[test]
fn every_field_of_the_run_result_is_in_the_state() {
    // A state with every field set, so none is left out when serialised.
    let mut st = State {
        phase: Phase::Done,
        ..State::default()
    };
    st.messages = vec![Message {
        role: Role::User,
        text: "t".into(),
        ..Message::default()
    }];
    st.usage = Usage {
        input_tokens: 1,
        output_tokens: 2,
        dollars: 0.5,
    };
    st.turns = 3;
    st.summary = Some("s".into());
    st.waiting = vec!["c0".into()];
    st.calls = vec![ToolCall::default()];
    st.results.insert("c1".into(), ToolResult::default());
    st.attempts.insert("c1".into(), Attempt::default());
    st.files.insert("f".into(), "0".repeat(64));
    st.answer = Some("a".into());

    // Saved with a restart counted, so the envelope's count is not zero.
    let world = durable::testing::MemDir::new();
    let opts = Options {
        sync: false,
        ..Options::default()
    };
    drop(Checkpoint::open(Arc::new(world.clone()), &run_id(), opts).unwrap());
    let mut opened = Checkpoint::open(Arc::new(world.clone()), &run_id(), opts).unwrap();
    opened.checkpoint.save(&st).unwrap();
    let result = serde_json::to_value(RunResult::from_state(&opened.checkpoint, &st)).unwrap();
    // The checkpoint file: durable's envelope (run, resumes) around the state.
    let file: Value = serde_json::from_slice(
        &world
            .read(&Checkpoint::file_name(&run_id()))
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let mut state = file["state"].clone();
    state["run"] = file["run"].clone();
    state["resumes"] = file["resumes"].clone();
    assert_eq!(state["resumes"], 1);
    let (Value::Object(result), Value::Object(state)) = (result, state) else {
        panic!("not objects");
    };
    for (field, value) in &result {
        assert_eq!(
            state.get(field),
            Some(value),
            "RunResult::{field} is not a field of the checkpoint with the same value"
        );
    }
}

#[test]
fn a_run_on_disk_resumes_after_a_crash() {
    // What the triage command wires: checkpoints, tracker and workspace in
    // real directories.
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| -> Arc<dyn Dir> {
        Arc::new(durable::DiskDir::new(tmp.path().join(name)).unwrap())
    };
    let t = transcript(PATCH_JOB);
    let life = || {
        let tracker = Tracker::open_dir(dir("tracker"), Mode::Keyed).unwrap();
        let tools = triage_tools::triage(&tracker, dir("workspace"));
        Agent::scripted(run_id(), dir("state"), Arc::clone(&t), tools)
            .unwrap()
            .with_workspace(dir("workspace"))
    };
    let first = life();
    let crashed = crashpoint::crash_at(Hit::new("tool returned", 1), || first.run());
    assert!(crashed.outcome.crashed().is_some());
    drop(first);
    let r = life().run().unwrap();
    assert_eq!(r.answer, "patched");
    assert_eq!(r.resumes, 1);
    assert_eq!(
        std::fs::read_to_string(tmp.path().join("workspace/p.rs")).unwrap(),
        "fn p() { x.unwrap_or(0) }"
    );
    agent::state::Checkpoint::load(&*dir("state"), &run_id())
        .unwrap()
        .unwrap()
        .check_workspace(&tmp.path().join("workspace"))
        .unwrap();
}

#[test]
fn an_agent_can_move_to_another_thread() {
    fn is_send<T: Send>() {}
    is_send::<Agent>();
    is_send::<agent::approve::TerminalApprover<std::io::BufReader<std::io::Stdin>, std::io::Stderr>>(
    );
}

/// A person's "done" that reports a failure is saved as a failure.
#[test]
fn a_persons_failed_answer_is_saved_as_an_error_result() {
    let t = transcript(JOB);
    let mut w = World::new(Tracker::new(Mode::Keyless).with_uncertain_lookup());
    w.crash(&w.agent(&t), "tracker accepted#1");
    w.events();
    w.person = ScriptedApprover::new().on_question(|_| {
        Answer::Done(ToolResult {
            output: "it failed on their side".into(),
            is_error: true,
        })
    });
    w.agent(&t).run().unwrap();
    let saved: Vec<(String, bool)> = w
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::ResultSaved {
                call,
                output,
                is_error,
                ..
            } if call == "c1" => Some((output.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(saved, [("it failed on their side".to_owned(), true)]);
}

/// A read-only tool whose outcome is unknown twice, then known.
struct Flaky {
    calls: Arc<AtomicU64>,
}

impl Tool for Flaky {
    fn name(&self) -> &str {
        "peek"
    }
    fn effect(&self) -> Effect {
        Effect::ReadsOnly
    }
    fn call(&self, _: &CallContext<'_>, _: &Value) -> Result<ToolOutput, ToolError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) < 2 {
            Err(ToolError::Unknown("no answer".into()))
        } else {
            Ok(ToolOutput::ok("seen"))
        }
    }
}

/// An unknown outcome of a read is retried at once; each retry is a rerun.
#[test]
fn a_read_with_an_unknown_outcome_is_retried_as_a_rerun() {
    let t = transcript(
        r#"{"replies": [{"calls": [{"id": "c1", "tool": "peek", "args": {}}]}, {"text": "ok"}]}"#,
    );
    let w = World::keyed();
    let calls = Arc::new(AtomicU64::new(0));
    let tools = Tools::new().with(Flaky {
        calls: Arc::clone(&calls),
    });
    w.agent_with(&t, tools).run().unwrap();
    let reruns: Vec<bool> = w
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall { rerun, .. } => Some(*rerun),
            _ => None,
        })
        .collect();
    assert_eq!(reruns, [false, true, true]);
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(tool_message(&w.state(), "c1"), "seen");
}

/// The flag `cancel_flag` hands out is the one the run watches; `tools`
/// are the tools it was given; its Debug names its parts.
#[test]
fn an_agent_hands_out_its_own_cancel_flag_and_tools() {
    let w = World::keyed();
    let t = transcript(JOB);
    let agent = w.agent(&t);
    let mut names: Vec<&str> = agent.tools().names().collect();
    names.sort_unstable();
    let mut want: Vec<String> = w.triage_tools().names().map(str::to_owned).collect();
    want.sort_unstable();
    assert_eq!(names, want);
    assert!(names.contains(&"issue_file"));
    let text = format!("{agent:?}");
    for field in [
        "Agent {",
        "run:",
        "checkpoints:",
        "options:",
        "tools:",
        "limits:",
    ] {
        assert!(text.contains(field), "{field} in {text}");
    }
    agent.cancel_flag().store(true, Ordering::SeqCst);
    let e = agent.run().unwrap_err();
    assert!(matches!(e, Error::Cancelled { .. }), "{e}");
    assert_eq!(w.calls(), 0, "cancelled before the first model call");
}

/// Answers with one reply that costs `dollars`.
struct Costing {
    dollars: f64,
}

impl Model for Costing {
    fn reply(&self, _: &[Message]) -> Result<Reply, ModelError> {
        Ok(Reply {
            text: "done".into(),
            calls: Vec::new(),
            usage: Usage {
                dollars: self.dollars,
                ..Usage::default()
            },
        })
    }
}

/// A reply whose cost is negative, infinite or not a number is refused
/// (it would break the budget's sums); a finite cost is counted.
#[test]
fn a_reply_with_an_impossible_cost_is_refused() {
    for dollars in [-1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.5] {
        let dir = MemDir::new();
        let agent = Agent::new(
            run_id(),
            Arc::new(dir.clone()),
            "task",
            Costing { dollars },
            Tools::new(),
        )
        .with_options(Options {
            sync: false,
            ..Options::default()
        });
        let r = agent.run();
        if dollars == 0.5 {
            assert!(r.is_ok(), "{r:?}");
        } else {
            let e = r.unwrap_err();
            assert!(
                matches!(&e, Error::Model { turn: 1, .. })
                    && e.to_string().contains("the reply reports a cost of"),
                "{dollars}: {e}"
            );
        }
    }
}

/// A paused run that resumes is back in phase tools, waiting on nobody,
/// from its first save on (a crash there must not find it still paused).
#[test]
fn a_resumed_pause_saves_phase_tools_and_no_one_waiting() {
    let mut w = World::keyed();
    let t = transcript(JOB);
    w.person = ScriptedApprover::new().on_approval(|_| Decision::Later);
    let _ = w.agent_with(&t, gated_file(&w)).run().unwrap_err();
    assert_eq!(w.state().phase, Phase::Paused);
    w.person = ScriptedApprover::new();
    w.crash(&w.agent_with(&t, gated_file(&w)), "result saved#1");
    let st = w.state();
    assert_eq!(st.phase, Phase::Tools);
    assert!(st.waiting.is_empty(), "{:?}", st.waiting);
    assert!(st.results.contains_key("c1"));
}

/// A model that keeps every conversation it is asked about and answers.
#[derive(Clone, Default)]
struct Listening {
    asked: Arc<Mutex<Vec<Vec<Message>>>>,
}

impl Model for Listening {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        self.asked.lock().unwrap().push(conversation.to_vec());
        Ok(Reply {
            text: "done".into(),
            ..Reply::default()
        })
    }
}

/// A new run's conversation starts with the task, as the user's message;
/// that is what the model is first asked about, and what the state keeps.
#[test]
fn a_new_run_asks_the_model_about_the_task() {
    let dir = MemDir::new();
    let model = Listening::default();
    let agent = Agent::new(
        run_id(),
        Arc::new(dir.clone()),
        "triage the crashes",
        model.clone(),
        Tools::new(),
    )
    .with_options(Options {
        sync: false,
        ..Options::default()
    });
    agent.run().unwrap();
    let task = Message {
        role: Role::User,
        text: "triage the crashes".into(),
        ..Message::default()
    };
    assert_eq!(*model.asked.lock().unwrap(), [vec![task.clone()]]);
    let st = Checkpoint::load(&dir, &run_id()).unwrap().unwrap();
    assert_eq!(st.messages[0], task);
}

/// A finished run's answer is read from its checkpoint with no model and
/// no tools: the result the run returned, read without a lock, counting no
/// restart and writing nothing. A run that is not finished, or not there,
/// has none.
#[test]
fn a_finished_run_is_read_without_a_model() {
    let w = World::keyed();
    let t = transcript(JOB);
    assert_eq!(RunResult::load(&w.checkpoints, &run_id()).unwrap(), None);
    w.crash(&w.agent(&t), "tool returned#1");
    let unfinished = w.state();
    assert_eq!(RunResult::load(&w.checkpoints, &run_id()).unwrap(), None);
    assert_eq!(w.state(), unfinished, "loading wrote nothing");

    let result = w.agent(&t).run().unwrap();
    let before = w.state();
    let loaded = RunResult::load(&w.checkpoints, &run_id()).unwrap();
    assert_eq!(loaded.as_ref(), Some(&result));
    assert_eq!(w.state(), before, "loading counted no restart");
    // While another life holds the run's lock, it still reads.
    let opened = Checkpoint::open(
        Arc::new(w.checkpoints.clone()),
        &run_id(),
        Options::default(),
    )
    .unwrap();
    assert_eq!(RunResult::load(&w.checkpoints, &run_id()).unwrap(), loaded);
    drop(opened);
    // A checkpoint that is not a run's is an error, not "no answer".
    w.checkpoints
        .write(&Checkpoint::file_name(&run_id()), b"{not json")
        .unwrap();
    assert!(RunResult::load(&w.checkpoints, &run_id()).is_err());
}

// ---------------------------------------------------------------------------
// The fence

#[test]
fn a_receiver_that_saw_a_newer_holder_stops_the_run_and_the_model_never_hears_of_it() {
    // A keyless tracker: keys cannot stop this process, only its epoch.
    let w = World::new(Tracker::new(Mode::Keyless));
    // Another process took the run over and acted with a newer epoch.
    let newer = tracker::Fence {
        run: RUN.into(),
        epoch: 1_000,
    };
    w.tracker
        .apply_fenced(&file_a(), None, Some(&newer))
        .unwrap();
    let t = transcript(JOB);
    let e = w.agent(&t).run().unwrap_err();
    match &e {
        Error::Stale { call, tool, reason } => {
            assert_eq!((call.as_str(), tool.as_str()), ("c1", "issue_file"));
            assert!(reason.contains("stale"), "{reason}");
        }
        other => panic!("not stopped as stale: {other:?}"),
    }
    // Nothing more: one model call, the other holder's issue only, no
    // result of c1 in the conversation, no event of a returned call.
    assert_eq!(w.calls(), 1);
    assert_eq!(w.tracker.issues().len(), 1);
    let st = w.state();
    assert!(
        !st.messages.iter().any(|m| m.role == Role::Tool),
        "{:?}",
        st.messages
    );
    assert!(!w
        .events()
        .iter()
        .any(|e| matches!(e, Event::ToolReturned { .. })));
}
