//! The loop every design runs, one life at a time: open the checkpoint, ask
//! the model, make the calls, save as the design says, and settle a call a
//! crash left in doubt (on file, rerun if harmless, or ask the person).

use std::collections::BTreeMap;

use agent::observe::Rung;
use agent::state::{Attempt, Checkpoint, Phase, State, ToolCall, ToolResult};
use crashpoint::point;
use durable::{Options, RunId};
use tracker::{LookupAnswer, Request};

use crate::design::Design;
use crate::labels::{Settlement, Stage};
use crate::modes::{ModelBehaviour, Modes, Person};
use crate::script::{Call, Op, Script};
use crate::world::{World, RUN};

/// A design's loop running a script with modes: what one life needs of a
/// [`DesignSubject`](crate::DesignSubject).
pub(crate) struct Loop<'a> {
    pub(crate) design: Design,
    pub(crate) script: &'a Script,
    pub(crate) modes: &'a Modes,
}

/// The result a loop records when a person wrongly says a call took effect.
const WRONG_YES: &str = "done, a person said so (no answer on record)";

impl Loop<'_> {
    fn open(&self, w: &World) -> Result<(Checkpoint, State), String> {
        let run = RunId::parse(RUN).map_err(|e| e.to_string())?;
        let opts = Options {
            // The book chapter's sweep saves unsynced; a power-loss world
            // syncs as its writer says.
            sync: self.modes.power.is_some_and(|p| p.writer.syncs()),
            max_resumes: Some(u32::MAX),
            // Nobody reads the model's checkpoints but the loop, and a
            // sweep writes thousands: one line each, not indented — except
            // under power cuts, whose disks tear a save by 512-byte blocks,
            // so the reviewed disk table counts the indented layout's.
            compact: self.modes.power.is_none(),
            ..Options::default()
        };
        let opened = Checkpoint::open(w.dir.clone(), &run, opts).map_err(|e| e.to_string())?;
        Ok((opened.checkpoint, opened.state))
    }

    fn sends_keys(&self) -> bool {
        self.design.sends_keys_with(self.modes)
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
        let n = {
            let mut notes = w.notes();
            let asked = notes.asked.entry(turn).or_insert(0);
            *asked += 1;
            *asked
        };
        let model = self.modes.model.unwrap_or_default();
        if model == ModelBehaviour::Scripted {
            return Ok(scripted.clone());
        }
        let mut calls = Vec::with_capacity(scripted.len());
        for c in scripted {
            let id = if n > 1 {
                format!("{}~{n}", c.id)
            } else {
                c.id.clone()
            };
            w.notes().ids.insert(c.id.clone(), id.clone());
            let mut op = c.op.clone();
            if let Op::Comment { issue_call, .. } = &mut op {
                // The model refers to the issue by the call that filed it,
                // as the transcript it was given names that call.
                if let Some(now) = w.notes().ids.get(issue_call.as_str()) {
                    *issue_call = now.clone();
                }
            }
            if n > 1 && model == ModelBehaviour::NewCalls {
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
        if n > 1 && model == ModelBehaviour::NewCalls {
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
                w.notes().labels.reach(Stage::Sent);
                w.tracker_changing();
                let applied = w.tracker.apply(&req, self.key(call).as_deref());
                w.tracker_changing();
                let resp = applied.map_err(|e| format!("call {}: {e}", call.id))?;
                w.notes().labels.reach(Stage::Acknowledged);
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
        // The world's tracker honours keys exactly when the design sends
        // them (`Design::sends_keys_with`).
        let harmless = !call.op.mutates() || self.sends_keys();
        if harmless {
            w.notes()
                .labels
                .settle(&call.id, Settlement::Rung(Rung::Rerun));
            return self.run_tool(w, st, call);
        }
        w.notes()
            .labels
            .settle(&call.id, Settlement::Rung(Rung::Person));
        w.notes().asks += 1;
        let req = self
            .request(st, call)?
            .ok_or_else(|| format!("call {}: nothing to ask about", call.id))?;
        // The person looks at the tracker and answers; the lookup is the
        // truth they see.
        let truth = match w.tracker.lookup(&req, None) {
            LookupAnswer::Found(resp) => Some(resp),
            LookupAnswer::NotFound | LookupAnswer::CantTell => None,
        };
        let wrong = self.modes.person == Person::WrongAt(w.notes().asks);
        if wrong {
            w.notes().wrong_answers += 1;
        }
        match (truth, wrong) {
            (Some(resp), false) => {
                w.notes().labels.reach(Stage::Acknowledged);
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
    pub(crate) fn run_life(&self, w: &mut World) -> Result<(), String> {
        let (mut cp, mut st) = self.open(w)?;
        w.opened(&st);
        loop {
            match st.phase {
                Phase::Done => return Ok(()),
                Phase::Model | Phase::Paused => {
                    if self.model_turn(w, &mut cp, &mut st)? {
                        return Ok(());
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
                            w.notes().labels.start(&id, st.turns as usize);
                        }
                        let result = if self.design.marks() && st.attempts.contains_key(&id) {
                            self.resolve(w, &st, call)?
                        } else {
                            w.notes().labels.settle(&id, Settlement::Blind);
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
                            w.notes().labels.reach(Stage::Recorded);
                            point!("result saved");
                        }
                    }
                    st.turns += 1;
                    st.phase = Phase::Model;
                    st.calls = Vec::new();
                    st.attempts = BTreeMap::new();
                    w.save(&mut cp, &st)?;
                    w.notes().labels.reach(Stage::Recorded);
                }
            }
        }
    }

    /// One turn of the model phase: asks the model for the reply of turn
    /// `st.turns`, saves the final answer (`true`: the run is done) or the
    /// reply's calls for the tools phase.
    fn model_turn(
        &self,
        w: &mut World,
        cp: &mut Checkpoint,
        st: &mut State,
    ) -> Result<bool, String> {
        let turn = st.turns as usize;
        w.notes().labels.asking(turn);
        let reply = self.reply(w, turn)?;
        w.notes().model_calls += 1;
        point!("reply arrived");
        if reply.is_empty() {
            st.phase = Phase::Done;
            st.answer = Some(format!("{} done", self.script.name));
            w.save(cp, st)?;
            return Ok(true);
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
            w.save(cp, st)?;
        }
        Ok(false)
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
