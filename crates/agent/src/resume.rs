//! Starting or resuming a run: open (and lock) its checkpoint, check the
//! workspace, and hand the state to a [`Driver`].

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::state::{Checkpoint, Message, Phase, Role, State};
use serde_json::Value;

use crate::agent::Agent;
use crate::drive::Driver;
use crate::error::Error;
use crate::observe::Event;
use crate::result::RunResult;

impl Agent {
    /// Run one life: start or resume the run and go on until it has its
    /// answer.
    ///
    /// Resume is by the saved phase: `done` returns the saved answer without
    /// calling anything; `model` makes the model call it was about to make;
    /// `tools` and `paused` run the last reply's unanswered calls in order,
    /// sending a call that has a marker but no result up the ladder. Errors
    /// are typed; whatever the error, the checkpoint holds where the run
    /// stopped.
    pub fn run(&self) -> Result<RunResult, Error> {
        let opened = match &self.store {
            None => Checkpoint::open(Arc::clone(&self.checkpoints), &self.run, self.options)?,
            Some(on) => Checkpoint::open_store(
                Arc::clone(&on.store),
                &self.run,
                &on.owner,
                on.lease,
                self.options,
                State::default,
            )?,
        };
        let mut driver = Driver {
            agent: self,
            checkpoint: opened.checkpoint,
            st: opened.state,
        };
        if opened.resumed {
            self.emit(Event::Resumed {
                run: self.run.to_string(),
                phase: driver.st.phase,
                resumes: driver.checkpoint.resumes(),
                turns: driver.st.turns,
            });
        } else {
            self.emit(Event::Started {
                run: self.run.to_string(),
            });
        }
        if driver.st.phase == Phase::Done {
            self.emit(Event::Done {
                answer: driver.st.answer.clone().unwrap_or_default(),
            });
            return Ok(RunResult::from_state(&driver.checkpoint, &driver.st));
        }
        if opened.resumed {
            self.check_workspace(&driver.st)?;
        }
        if driver.st.mode.is_none() {
            driver.st.mode.clone_from(&self.mode);
        }
        if driver.st.messages.is_empty() {
            // Every field spelled out: the role is also `Message::default()`'s,
            // and a `..Message::default()` base would make deleting it an
            // equivalent mutant.
            driver.st.messages.push(Message {
                role: Role::User,
                text: self.task.clone(),
                calls: Vec::new(),
                call_id: None,
            });
        }
        driver.drive()
    }

    /// Every file the state recorded must still hold what the run wrote,
    /// except files an unanswered marked call may have written since: those
    /// are the ladder's to settle (the lookup records their new hash).
    fn check_workspace(&self, st: &State) -> Result<(), Error> {
        let Some(ws) = &self.workspace else {
            return Ok(());
        };
        let pending: BTreeSet<String> = st
            .calls
            .iter()
            .filter(|c| st.attempts.contains_key(&c.id) && !st.results.contains_key(&c.id))
            .filter_map(|c| {
                let tool = self.tools.get(&c.tool)?;
                let args: Value = serde_json::from_str(&c.args).ok()?;
                Some(tool.touches(&args))
            })
            .flatten()
            .collect();
        for (rel, expected) in &st.files {
            if pending.contains(rel) {
                continue;
            }
            let found = ws
                .read(rel)
                .map_err(|source| durable::Error::Io {
                    path: ws.path_of(rel),
                    op: "read workspace file",
                    source,
                })?
                .map(|bytes| durable::hash::sha256_hex(&bytes));
            if found.as_deref() != Some(expected.as_str()) {
                return Err(durable::Error::WorkspaceChanged {
                    file: ws.path_of(rel),
                    expected: expected.clone(),
                    found,
                }
                .into());
            }
        }
        Ok(())
    }
}
