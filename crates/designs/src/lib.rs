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
//! Beyond the seed's table, [`Modes`] run the same loops in harder worlds,
//! each default to the seed's behaviour: checkpoints in a
//! [`durable::testing::PowerDir`] whose crashes are power cuts, written by the real
//! writer or a mutation of it ([`Power`], [`Writer`]); a person who answers
//! one question wrong ([`Person`]); a model that answers a repeated question
//! differently ([`Model`]); a log-backed tracker that crashes with the loop
//! (`Modes::tracker`). [`beyond`] names every such variant for
//! `cargo xtask sweep --variant`, and [`labels`] records, for every crash,
//! where the call in flight stood and how the restart settled it.
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

pub mod beyond;
pub mod labels;
mod modes;
mod script;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use agent::{Attempt, Checkpoint, Phase, State, ToolCall, ToolResult};
use crashpoint::point;
use durable::testing::{MemDir, PowerDir};
use durable::{Dir, Options, RunId};
use sweep::{Counter, Subject, Verdict};

use labels::{Labels, Rung, Stage};
use tracker::{LogLayout, Lookup, Mode, Request, Tracker};

pub use modes::{Model, Modes, Person, Power, Writer, MID_OVERWRITE};
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
            modes: Modes::default(),
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
    modes: Modes,
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
    /// The checkpoint directory when crashes are power cuts.
    power: Option<PowerDir>,
    /// A life is running: set when it starts, cleared when it returns. A life
    /// that finds it set knows the one before it crashed.
    alive: bool,
    /// Why the last life stopped with an error of the loop's own.
    stopped: Option<String>,
    /// The last state whose save returned (restart count left out).
    saved: Option<State>,
    /// The state being saved, until its save returns.
    saving: Option<State>,
    /// Lives that resumed from something other than the last save that
    /// returned or the one under way: a save the loop relied on was lost.
    lost_saves: u64,
    /// Questions the person answered wrong.
    wrong_answers: u64,
    /// How many times the model was asked for each turn (by index).
    asked: BTreeMap<usize, u32>,
    /// Each scripted call ID → the ID the model gave that call in its latest
    /// reply (they differ once a model that mints new IDs is asked again).
    ids: BTreeMap<String, String>,
    /// Where the call in flight stood at each crash, and how it was settled.
    labels: Labels,
    /// A crashing tracker's directory and layout, to restart it from.
    tracker_files: Option<(MemDir, LogLayout)>,
}

/// A state as the loop's progress (the restart count that
/// `Checkpoint::open` bumps by itself is kept beside it, not in it).
fn progress(st: &State) -> State {
    st.clone()
}

impl World {
    /// A process starts. Returns whether the previous one crashed; in a
    /// power-loss world the crash was a power cut, applied now; with a
    /// crashing tracker, the tracker restarts from its own files.
    fn boot(&mut self) -> Result<bool, String> {
        let crashed = std::mem::replace(&mut self.alive, true);
        if let Some(p) = &self.power {
            let cut = p.boot();
            debug_assert_eq!(cut, crashed, "the directory and the world agree on crashes");
        }
        self.labels.boot(crashed);
        if let (true, Some((files, layout))) = (crashed, &self.tracker_files) {
            let mode = self.tracker.mode();
            self.tracker = Tracker::open_log_with(Arc::new(files.clone()), mode, *layout)
                .map_err(|e| format!("the tracker cannot restart: {e}"))?;
        }
        Ok(crashed)
    }

    /// Save through `cp`, remembering what is under way and what returned.
    fn save(&mut self, cp: &mut Checkpoint, st: &State) -> Result<(), String> {
        self.saving = Some(progress(st));
        cp.save(st).map_err(|e| e.to_string())?;
        self.saved = self.saving.take();
        Ok(())
    }

    /// The checkpoint a life opened must hold the last save that returned,
    /// or the one that was under way when the previous life died: a
    /// returned save is the loop's promise that it may act on it.
    fn opened(&mut self, st: &State) {
        let now = progress(st);
        if let Some(saved) = &self.saved {
            if *saved != now && self.saving.as_ref() != Some(&now) {
                self.lost_saves += 1;
            }
        }
        self.saved = Some(now);
        self.saving = None;
        self.labels.opened(st);
    }

    /// The process ends without a crash (finished, or stopped by an error).
    fn shutdown(&mut self, result: &Result<(), String>) {
        self.alive = false;
        self.stopped = result.as_ref().err().cloned();
        if let Some(p) = &self.power {
            p.shutdown();
        }
    }
}

const RUN: &str = "triage-job";

/// The result a loop records when a person wrongly says a call took effect.
const WRONG_YES: &str = "done, a person said so (no answer on record)";

impl DesignSubject {
    /// The same design run with `modes`.
    pub fn with_modes(mut self, modes: Modes) -> Self {
        self.modes = modes;
        self
    }

    /// The modes this subject runs with.
    pub fn modes(&self) -> &Modes {
        &self.modes
    }

    /// The design.
    pub fn design(&self) -> Design {
        self.design
    }

    fn open(&self, w: &World) -> Result<(Checkpoint, State), String> {
        let run = RunId::parse(RUN).map_err(|e| e.to_string())?;
        let opts = Options {
            // The seed's sweep saves unsynced; a power-loss world syncs as
            // its writer says.
            sync: self.modes.power.is_some_and(|p| p.writer.syncs()),
            max_resumes: Some(u32::MAX),
        };
        let opened = Checkpoint::open(w.dir.clone(), &run, opts).map_err(|e| e.to_string())?;
        Ok((opened.checkpoint, opened.state))
    }

    fn sends_keys(&self) -> bool {
        self.design.sends_keys() || self.modes.keys
    }

    fn key(&self, call: &Call) -> Option<String> {
        self.sends_keys().then(|| durable::key(RUN, &call.id))
    }

    /// The model's reply for `turn` (0-based). The scripted model repeats
    /// itself; the others answer a repeated question differently.
    fn reply(&self, w: &mut World, turn: usize) -> Result<Vec<Call>, String> {
        let scripted = self
            .script
            .replies
            .get(turn)
            .ok_or_else(|| format!("the job has no reply for turn {}", turn + 1))?;
        let asked = w.asked.entry(turn).or_insert(0);
        *asked += 1;
        let n = *asked;
        let model = self.modes.model.unwrap_or_default();
        if model == Model::Scripted {
            return Ok(scripted.clone());
        }
        let mut calls = Vec::with_capacity(scripted.len());
        for c in scripted {
            let id = if n > 1 {
                format!("{}~{n}", c.id)
            } else {
                c.id.clone()
            };
            w.ids.insert(c.id.clone(), id.clone());
            let mut op = c.op.clone();
            if let Op::Comment { issue_call, .. } = &mut op {
                // The model refers to the issue by the call that filed it,
                // as the transcript it was given names that call.
                if let Some(now) = w.ids.get(issue_call.as_str()) {
                    *issue_call = now.clone();
                }
            }
            if n > 1 && model == Model::NewCalls {
                let take = format!(" (take {n})");
                match &mut op {
                    Op::FileIssue { title, body } => {
                        title.push_str(&take);
                        body.push_str(&take);
                    }
                    Op::Comment { body, .. } => body.push_str(&take),
                    Op::Search { .. } => {}
                }
            }
            calls.push(Call::new(&id, op));
        }
        if n > 1 && model == Model::NewCalls {
            calls.reverse();
        }
        Ok(calls)
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

    fn run_tool(&self, w: &mut World, st: &State, call: &Call) -> Result<ToolResult, String> {
        let output = match (&call.op, self.request(st, call)?) {
            (Op::Search { query }, _) => {
                let found = w.tracker.search(query);
                format!("{} issues", found.len())
            }
            (_, Some(req)) => {
                w.labels.reach(Stage::Sent);
                let resp = w
                    .tracker
                    .apply(&req, self.key(call).as_deref())
                    .map_err(|e| format!("call {}: {e}", call.id))?;
                w.labels.reach(Stage::Acknowledged);
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
    /// person, who answers right unless [`Person::WrongAt`] says otherwise.
    fn resolve(&self, w: &mut World, st: &State, call: &Call) -> Result<ToolResult, String> {
        let harmless = !call.op.mutates() || (self.sends_keys() && w.tracker.mode() == Mode::Keyed);
        if harmless {
            w.labels.settle(&call.id, Rung::Rerun);
            return self.run_tool(w, st, call);
        }
        w.labels.settle(&call.id, Rung::Person);
        w.asks += 1;
        let req = self
            .request(st, call)?
            .ok_or_else(|| format!("call {}: nothing to ask about", call.id))?;
        // The person looks at the tracker and answers; the lookup is the
        // truth they see.
        let truth = match w.tracker.lookup(&req, None) {
            Lookup::Found(resp) => Some(resp),
            Lookup::NotFound | Lookup::CantTell => None,
        };
        let wrong = self.modes.person == Person::WrongAt(w.asks);
        if wrong {
            w.wrong_answers += 1;
        }
        match (truth, wrong) {
            (Some(resp), false) => {
                w.labels.reach(Stage::Acknowledged);
                Ok(ToolResult {
                    output: response_output(&resp),
                    is_error: false,
                })
            }
            // "It did not happen": right, or wrong (then it goes out twice).
            (None, false) | (Some(_), true) => self.run_tool(w, st, call),
            // "It happened" when it did not: the loop takes the person's
            // word, and has no issue number or comment ID to record.
            (None, true) => Ok(ToolResult {
                output: WRONG_YES.to_owned(),
                is_error: false,
            }),
        }
    }

    /// One life of the loop: open the checkpoint and run to the end.
    fn run_life(&self, w: &mut World) -> Result<(), String> {
        let (mut cp, mut st) = self.open(w)?;
        w.opened(&st);
        loop {
            match st.phase {
                Phase::Done => return Ok(()),
                Phase::Model | Phase::Paused => {
                    let turn = st.turns as usize;
                    w.labels.asking(turn);
                    let reply = self.reply(w, turn)?;
                    w.model_calls += 1;
                    point!("reply arrived");
                    if reply.is_empty() {
                        st.phase = Phase::Done;
                        st.answer = Some(format!("{} done", self.script.name));
                        w.save(&mut cp, &st)?;
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
                        w.save(&mut cp, &st)?;
                    }
                }
                Phase::Tools => {
                    let ids: Vec<String> = st.calls.iter().map(|c| c.id.clone()).collect();
                    for id in ids {
                        if st.results.contains_key(&id) {
                            continue;
                        }
                        let call = &self.call_of(&st, &id)?;
                        if call.op.mutates() {
                            w.labels.start(&id, st.turns as usize);
                        }
                        let result = if self.design.marks() && st.attempts.contains_key(&id) {
                            self.resolve(w, &st, call)?
                        } else {
                            w.labels.settle(&id, Rung::Blind);
                            if self.design.marks() && call.op.mutates() {
                                st.attempts.insert(
                                    id.clone(),
                                    Attempt {
                                        key: self.key(call),
                                        ..Attempt::default()
                                    },
                                );
                                w.save(&mut cp, &st)?;
                                point!("marker saved");
                            }
                            self.run_tool(w, &st, call)?
                        };
                        st.results.insert(id, result);
                        if self.design.saves_each_step() {
                            w.save(&mut cp, &st)?;
                            w.labels.reach(Stage::Recorded);
                            point!("result saved");
                        }
                    }
                    st.turns += 1;
                    st.phase = Phase::Model;
                    st.calls = Vec::new();
                    st.attempts = BTreeMap::new();
                    w.save(&mut cp, &st)?;
                    w.labels.reach(Stage::Recorded);
                }
            }
        }
    }

    /// The call `id` as the checkpoint holds it: the reply's ID, tool and
    /// arguments, saved before the call ran.
    fn call_of(&self, st: &State, id: &str) -> Result<Call, String> {
        let saved = st
            .calls
            .iter()
            .find(|c| c.id == id)
            .ok_or_else(|| format!("the checkpoint names call {id:?} but not its tool"))?;
        Call::parse(&saved.id, &saved.tool, &saved.args)
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
        let mut name = self.design.title().to_owned();
        if let Some(p) = self.modes.power {
            name.push_str(&format!(" | {} | {}", p.writer.title(), p.state.slug()));
        }
        if self.modes.keys && !self.design.sends_keys() {
            name.push_str(" + keys");
        }
        if let Person::WrongAt(k) = self.modes.person {
            name.push_str(&format!(" | person wrong at question {k}"));
        }
        if let Some(m) = self.modes.model {
            name.push_str(&format!(" | {}", m.title()));
        }
        match self.modes.tracker {
            Some(LogLayout::KeysInLog) => name.push_str(" | tracker crashes"),
            Some(LogLayout::KeysInIndexOnly) => {
                name.push_str(" | tracker crashes, keys in its index only")
            }
            None => {}
        }
        name
    }

    fn counters(&self) -> Vec<Counter> {
        if self.modes == Modes::default() {
            // The seed's columns, exactly.
            return vec![
                Counter::new("dups").with_scenarios("with dups"),
                Counter::new("missing"),
                Counter::new("asks"),
                Counter::new("model calls").titled("calls+").over_clean(),
            ];
        }
        // A power-loss row tests the writer: whatever the design, a correct
        // writer loses nothing, so every scenario must count zero.
        // So does a crashing-tracker row of a design that claims to do
        // nothing twice (keys or markers): the tracker's restart must not
        // change that.
        let strict = self.modes.power.is_some()
            || (self.modes.tracker.is_some() && (self.sends_keys() || self.design.marks()));
        let must = |c: Counter| if strict { c.required() } else { c };
        let mut c = vec![
            must(Counter::new("dups").with_scenarios("with dups")),
            must(Counter::new("missing")),
            Counter::new("asks"),
        ];
        if self.modes.person != Person::Right {
            c.push(Counter::new("wrong answers"));
        }
        c.push(Counter::new("model calls").titled("calls+").over_clean());
        if self.modes.model.is_some() {
            c.push(Counter::new("reworded"));
        }
        if self.modes.power.is_some() {
            c.push(must(Counter::new("lost saves")));
        }
        c.push(must(Counter::new("stopped")));
        c
    }

    fn world(&self) -> World {
        let mut power = None;
        let (dir, tmp): (Arc<dyn Dir>, _) = match (self.modes.power, self.storage) {
            (Some(p), _) => {
                let d = PowerDir::new(p.state);
                power = Some(d.clone());
                (p.writer.wrap(d), None)
            }
            (None, Storage::Memory) => (Arc::new(MemDir::new()), None),
            (None, Storage::Disk) => match tempfile::tempdir()
                .and_then(|t| durable::DiskDir::new(t.path()).map(|d| (d, t)))
            {
                Ok((d, t)) => (Arc::new(d), Some(t)),
                // A world must exist; without a temp dir, fall back to memory
                // rather than abort a whole sweep.
                Err(_) => (Arc::new(MemDir::new()), None),
            },
        };
        let mode = if self.sends_keys() {
            Mode::Keyed
        } else {
            Mode::Keyless
        };
        let tracker_files = self.modes.tracker.map(|layout| (MemDir::new(), layout));
        let tracker = match &tracker_files {
            // A new directory always opens; if it did not, the first life
            // would report it (an empty in-memory tracker stands in).
            Some((files, layout)) => Tracker::open_log_with(Arc::new(files.clone()), mode, *layout)
                .unwrap_or_else(|_| Tracker::new(mode)),
            None => Tracker::new(mode),
        };
        World {
            dir,
            _tmp: tmp,
            tracker,
            model_calls: 0,
            asks: 0,
            power,
            alive: false,
            stopped: None,
            saved: None,
            saving: None,
            lost_saves: 0,
            wrong_answers: 0,
            asked: BTreeMap::new(),
            ids: BTreeMap::new(),
            labels: Labels::default(),
            tracker_files,
        }
    }

    fn life(&self, w: &mut World) -> Result<(), sweep::LifeError> {
        let result = w.boot().and_then(|_| self.run_life(w));
        w.shutdown(&result);
        Ok(result?)
    }

    fn judge(&self, w: &World) -> Verdict {
        let issues = w.tracker.issues();
        let (mut dups, mut missing) = (0u64, 0u64);
        let mut v = Verdict::new();
        // A record stands for a scripted effect when its text is the
        // script's, or (judging by intent) the script's reworded by a model
        // that was asked again.
        let by_intent = self.modes.model.is_some();
        let same = |text: &str, scripted: &str| {
            text == scripted
                || (by_intent
                    && text
                        .strip_prefix(scripted)
                        .is_some_and(|rest| rest.starts_with(" (take ")))
        };
        let comments = || issues.iter().flat_map(|i| &i.comments);
        for call in self.script.effects() {
            let (what, n) = match &call.op {
                Op::FileIssue { title, body } => (
                    format!("issue {title:?}"),
                    issues
                        .iter()
                        .filter(|i| same(&i.title, title) && same(&i.body, body))
                        .count(),
                ),
                Op::Comment { body, .. } => (
                    format!("comment {body:?}"),
                    comments().filter(|c| same(&c.body, body)).count(),
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
        let mut reworded = None;
        if by_intent {
            let scripted: Vec<&str> = self
                .script
                .effects()
                .flat_map(|c| match &c.op {
                    Op::FileIssue { title, body } => vec![title.as_str(), body.as_str()],
                    Op::Comment { body, .. } => vec![body.as_str()],
                    Op::Search { .. } => Vec::new(),
                })
                .collect();
            let n = issues
                .iter()
                .filter(|i| !scripted.contains(&i.title.as_str()))
                .count()
                + comments()
                    .filter(|c| !scripted.contains(&c.body.as_str()))
                    .count();
            if n > 0 {
                v = v.note(format!(
                    "{n} record(s) worded as a model asked again worded them: a lookup by \
                     the first wording cannot find them"
                ));
            }
            reworded = Some(n as u64);
        }
        if let Some(e) = &w.stopped {
            v = v.note(format!("the run stopped: {e}"));
        }
        if w.lost_saves > 0 {
            v = v.note(format!(
                "{} restart(s) resumed from an older checkpoint than the last save that returned",
                w.lost_saves
            ));
        }
        v = v
            .count("dups", dups)
            .count("missing", missing)
            .count("asks", w.asks)
            .count("model calls", w.model_calls);
        if self.modes != Modes::default() {
            v = v
                .count("lost saves", w.lost_saves)
                .count("stopped", u64::from(w.stopped.is_some()))
                .count("wrong answers", w.wrong_answers);
        }
        if let Some(n) = reworded {
            v = v.count("reworded", n);
        }
        for (i, (stage, rung, call)) in w.labels.crashes().enumerate() {
            let name = labels::count_name(stage, rung);
            let n = v.get(&name);
            v = v.count(&name, n + 1).note(format!(
                "crash {}: {}{} -> {}",
                i + 1,
                call.map(|c| format!("{c} ")).unwrap_or_default(),
                stage.title(),
                rung.title()
            ));
        }
        v
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
        if let Some(p) = &w.power {
            out.push_str(&format!(
                "power cuts: {} ({})\n",
                p.cuts(),
                p.state().title()
            ));
        }
        if let Some(e) = &w.stopped {
            out.push_str(&format!("stopped: {e}\n"));
        }
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
