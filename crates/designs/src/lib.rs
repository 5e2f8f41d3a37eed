//! The five simplified durable loops of the seed's comparison table, each a
//! [`sweep::Subject`] built on the real [`durable`] checkpoint store and the
//! [`tracker`] fake.
//!
//! | design | saves | keys | markers |
//! | --- | --- | --- | --- |
//! | `save once per turn` | start, end of each tool turn, done | no | no |
//! | `save after the reply` | also after each reply with calls and after each result | no | no |
//! | `+ idempotency keys` | as above | yes | no |
//! | `+ attempt markers, no keys` | as above, plus a marker before each mutating call | no | yes |
//! | `keys and markers` | as above | yes | yes |
//!
//! ```
//! use designs::{Design, Script, Storage};
//!
//! let script = Script::load(designs::default_script_path()).unwrap();
//! let subject = Design::KeysMarkers.subject(&script, Storage::Memory);
//! let config = sweep::Config { depth: 1, ..sweep::Config::default() };
//! let row = sweep::run(&subject, &config).unwrap().row();
//! assert_eq!(row.depth_counts, vec![43]);
//! // No duplicate, nothing missing, nobody asked.
//! let zero = |t: &str| row.cells.iter().any(|(c, n)| c == t && *n == 0);
//! assert!(zero("dups") && zero("missing") && zero("asks"), "{row:?}");
//! ```

mod script;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crashpoint::point;
use durable::{
    Attempt, Checkpoint, Dir, MemDir, Options, Phase, RunId, State, ToolCall, ToolResult,
};
use sweep::{Counter, Subject, Verdict};
use tracker::{Lookup, Mode, Request, Tracker};

pub use script::{Call, Op, Script, ScriptError};

/// The scripted job the seed's table was measured with.
pub fn default_script_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sweeps/triage.json")
}

/// One version of the loop being compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Design {
    /// Saves only at the end of each turn: a crash mid-turn forgets the reply.
    SaveOncePerTurn,
    /// Saves the reply before running its calls, and each result.
    SaveAfterReply,
    /// As above, and sends an idempotency key the tracker honours.
    Keys,
    /// As above without keys, and writes a marker before each mutating call.
    Markers,
    /// Keys and markers: the design the chapter settles on.
    KeysMarkers,
}

impl Design {
    /// All five, in the table's order.
    pub const ALL: [Design; 5] = [
        Design::SaveOncePerTurn,
        Design::SaveAfterReply,
        Design::Keys,
        Design::Markers,
        Design::KeysMarkers,
    ];

    /// The row title of the seed's table.
    pub fn title(self) -> &'static str {
        match self {
            Design::SaveOncePerTurn => "save once per turn",
            Design::SaveAfterReply => "save after the reply",
            Design::Keys => "+ idempotency keys",
            Design::Markers => "+ attempt markers, no keys",
            Design::KeysMarkers => "keys and markers",
        }
    }

    /// The command-line name (`--variant`).
    pub fn slug(self) -> &'static str {
        match self {
            Design::SaveOncePerTurn => "save-once-per-turn",
            Design::SaveAfterReply => "save-after-reply",
            Design::Keys => "keys",
            Design::Markers => "markers",
            Design::KeysMarkers => "keys-markers",
        }
    }

    /// The design named by `slug`.
    pub fn from_slug(slug: &str) -> Option<Design> {
        Design::ALL.into_iter().find(|d| d.slug() == slug)
    }

    fn saves_each_step(self) -> bool {
        self != Design::SaveOncePerTurn
    }
    fn sends_keys(self) -> bool {
        matches!(self, Design::Keys | Design::KeysMarkers)
    }
    fn marks(self) -> bool {
        matches!(self, Design::Markers | Design::KeysMarkers)
    }

    /// This design as a sweep subject running `script`.
    pub fn subject(self, script: &Script, storage: Storage) -> DesignSubject {
        DesignSubject {
            design: self,
            script: script.clone(),
            storage,
        }
    }
}

/// Where a world keeps its checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// An in-memory directory (fast sweeps).
    Memory,
    /// A real temporary directory per world (syncs off, as in the seed).
    Disk,
}

/// A design running a scripted job, as a sweep subject.
#[derive(Clone, Debug)]
pub struct DesignSubject {
    design: Design,
    script: Script,
    storage: Storage,
}

/// What a crash does not erase: the checkpoint directory, the tracker's
/// records, and the observer's tallies of model calls and questions.
#[derive(Debug)]
pub struct World {
    dir: Arc<dyn Dir>,
    _tmp: Option<tempfile::TempDir>,
    tracker: Tracker,
    model_calls: u64,
    asks: u64,
}

const RUN: &str = "triage-job";

impl DesignSubject {
    fn open(&self, w: &World) -> Result<(Checkpoint, State), String> {
        let run = RunId::parse(RUN).map_err(|e| e.to_string())?;
        let opts = Options {
            sync: false,
            max_resumes: u32::MAX,
        };
        let opened = Checkpoint::open(w.dir.clone(), &run, opts).map_err(|e| e.to_string())?;
        Ok((opened.checkpoint, opened.state))
    }

    fn key(&self, call: &Call) -> Option<String> {
        self.design
            .sends_keys()
            .then(|| durable::key(RUN, &call.id))
    }

    /// The tracker request a mutating call makes, given the results so far.
    fn request(&self, st: &State, call: &Call) -> Result<Option<Request>, String> {
        Ok(match &call.op {
            Op::FileIssue { title, body } => Some(Request::FileIssue {
                title: title.clone(),
                body: body.clone(),
            }),
            Op::Comment { issue_call, body } => {
                let issue = st
                    .results
                    .get(issue_call)
                    .and_then(|r| r.output.parse::<u64>().ok())
                    .ok_or_else(|| {
                        format!("call {}: no issue number from {issue_call}", call.id)
                    })?;
                Some(Request::Comment {
                    issue,
                    body: body.clone(),
                })
            }
            Op::Search { .. } => None,
        })
    }

    fn run_tool(&self, w: &World, st: &State, call: &Call) -> Result<ToolResult, String> {
        let output = match (&call.op, self.request(st, call)?) {
            (Op::Search { query }, _) => {
                let found = w.tracker.search(query);
                format!("{} issues", found.len())
            }
            (_, Some(req)) => {
                let resp = w
                    .tracker
                    .apply(&req, self.key(call).as_deref())
                    .map_err(|e| format!("call {}: {e}", call.id))?;
                response_output(&resp)
            }
            (_, None) => return Err(format!("call {}: nothing to send", call.id)),
        };
        point!("tool returned");
        Ok(ToolResult {
            output,
            is_error: false,
        })
    }

    /// A marked call with no result: rerun it if a repeat is harmless (it
    /// reads only, or it carries a key the tracker honours), else ask the
    /// person, who always answers right.
    fn resolve(&self, w: &mut World, st: &State, call: &Call) -> Result<ToolResult, String> {
        let harmless =
            !call.op.mutates() || (self.design.sends_keys() && w.tracker.mode() == Mode::Keyed);
        if harmless {
            return self.run_tool(w, st, call);
        }
        w.asks += 1;
        let req = self
            .request(st, call)?
            .ok_or_else(|| format!("call {}: nothing to ask about", call.id))?;
        match w.tracker.lookup(&req, None) {
            Lookup::Found(resp) => Ok(ToolResult {
                output: response_output(&resp),
                is_error: false,
            }),
            Lookup::NotFound | Lookup::CantTell => self.run_tool(w, st, call),
        }
    }

    fn script_call(&self, id: &str) -> Result<&Call, String> {
        self.script
            .call(id)
            .ok_or_else(|| format!("the checkpoint names call {id:?}, which the job does not have"))
    }
}

fn response_output(resp: &tracker::Response) -> String {
    match resp {
        tracker::Response::Issue { number } => number.to_string(),
        tracker::Response::Comment { id, .. } => id.to_string(),
    }
}

impl Subject for DesignSubject {
    type World = World;

    fn name(&self) -> String {
        self.design.title().to_owned()
    }

    fn counters(&self) -> Vec<Counter> {
        vec![
            Counter::new("dups").with_scenarios("with dups"),
            Counter::new("missing"),
            Counter::new("asks"),
            Counter::new("model calls").titled("calls+").over_clean(),
        ]
    }

    fn world(&self) -> World {
        let (dir, tmp): (Arc<dyn Dir>, _) = match self.storage {
            Storage::Memory => (Arc::new(MemDir::new()), None),
            Storage::Disk => match tempfile::tempdir()
                .and_then(|t| durable::DiskDir::new(t.path()).map(|d| (d, t)))
            {
                Ok((d, t)) => (Arc::new(d), Some(t)),
                // A world must exist; without a temp dir, fall back to memory
                // rather than abort a whole sweep.
                Err(_) => (Arc::new(MemDir::new()), None),
            },
        };
        let mode = if self.design.sends_keys() {
            Mode::Keyed
        } else {
            Mode::Keyless
        };
        World {
            dir,
            _tmp: tmp,
            tracker: Tracker::new(mode),
            model_calls: 0,
            asks: 0,
        }
    }

    fn life(&self, w: &mut World) -> Result<(), String> {
        let (mut cp, mut st) = self.open(w)?;
        let save = |cp: &mut Checkpoint, st: &State| cp.save(st).map_err(|e| e.to_string());
        loop {
            match st.phase {
                Phase::Done => return Ok(()),
                Phase::Model | Phase::Paused => {
                    let turn = st.turns as usize;
                    let reply = self
                        .script
                        .replies
                        .get(turn)
                        .ok_or_else(|| format!("the job has no reply for turn {}", turn + 1))?;
                    w.model_calls += 1;
                    point!("reply arrived");
                    if reply.is_empty() {
                        st.phase = Phase::Done;
                        st.answer = Some(format!("{} done", self.script.name));
                        save(&mut cp, &st)?;
                        return Ok(());
                    }
                    st.calls = reply
                        .iter()
                        .map(|c| ToolCall {
                            id: c.id.clone(),
                            tool: c.op.tool().to_owned(),
                            args: c.args.clone(),
                        })
                        .collect();
                    st.attempts = BTreeMap::new();
                    st.phase = Phase::Tools;
                    if self.design.saves_each_step() {
                        save(&mut cp, &st)?;
                    }
                }
                Phase::Tools => {
                    let ids: Vec<String> = st.calls.iter().map(|c| c.id.clone()).collect();
                    for id in ids {
                        if st.results.contains_key(&id) {
                            continue;
                        }
                        let call = self.script_call(&id)?;
                        let result = if self.design.marks() && st.attempts.contains_key(&id) {
                            self.resolve(w, &st, call)?
                        } else {
                            if self.design.marks() && call.op.mutates() {
                                st.attempts.insert(
                                    id.clone(),
                                    Attempt {
                                        key: self.key(call),
                                        ..Attempt::default()
                                    },
                                );
                                save(&mut cp, &st)?;
                                point!("marker saved");
                            }
                            self.run_tool(w, &st, call)?
                        };
                        st.results.insert(id, result);
                        if self.design.saves_each_step() {
                            save(&mut cp, &st)?;
                            point!("result saved");
                        }
                    }
                    st.turns += 1;
                    st.phase = Phase::Model;
                    st.calls = Vec::new();
                    st.attempts = BTreeMap::new();
                    save(&mut cp, &st)?;
                }
            }
        }
    }

    fn judge(&self, w: &World) -> Verdict {
        let issues = w.tracker.issues();
        let (mut dups, mut missing) = (0u64, 0u64);
        let mut v = Verdict::new();
        for call in self.script.effects() {
            let (what, n) = match &call.op {
                Op::FileIssue { title, body } => (
                    format!("issue {title:?}"),
                    issues
                        .iter()
                        .filter(|i| &i.title == title && &i.body == body)
                        .count(),
                ),
                Op::Comment { body, .. } => (
                    format!("comment {body:?}"),
                    issues
                        .iter()
                        .flat_map(|i| &i.comments)
                        .filter(|c| &c.body == body)
                        .count(),
                ),
                Op::Search { .. } => continue,
            };
            match n {
                0 => {
                    missing += 1;
                    v = v.note(format!("{what} never made it to the tracker"));
                }
                1 => {}
                n => {
                    dups += n as u64 - 1;
                    v = v.note(format!("{what} made {n} times"));
                }
            }
        }
        v.count("dups", dups)
            .count("missing", missing)
            .count("asks", w.asks)
            .count("model calls", w.model_calls)
    }

    fn describe(&self, w: &World) -> String {
        let mut out = String::new();
        for i in w.tracker.issues() {
            out.push_str(&format!("issue #{} {:?}\n", i.number, i.title));
            for c in &i.comments {
                out.push_str(&format!("    comment #{} {:?}\n", c.id, c.body));
            }
        }
        out.push_str(&format!(
            "model calls: {}, questions to a person: {}\n",
            w.model_calls, w.asks
        ));
        if let Ok(run) = RunId::parse(RUN) {
            match Checkpoint::load(w.dir.as_ref(), &run) {
                Ok(Some(st)) => out.push_str(&format!(
                    "checkpoint: phase {:?}, turns {}, resumes {}\n",
                    st.phase, st.turns, st.resumes
                )),
                Ok(None) => out.push_str("checkpoint: none\n"),
                Err(e) => out.push_str(&format!("checkpoint: {e}\n")),
            }
        }
        out
    }
}
