//! A scripted person: answers with closures and keeps a log.

use std::sync::{Arc, Mutex};

use crate::approve::{Answer, Approval, Approver, Decision, Question};

/// What a [`ScriptedApprover`] was asked, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Asked {
    /// An approval for this call ID, and the answer.
    Approval(String, Decision),
    /// A ladder question for this call ID, and the answer.
    Question(String, Answer),
}

type ApproveFn = dyn Fn(&Approval<'_>) -> Decision + Send + Sync;
type ResolveFn = dyn Fn(&Question<'_>) -> Answer + Send + Sync;

/// A scripted person for tests and sweeps: answers with closures and keeps a
/// log of what it was asked.
///
/// While it decides an approval it passes the crash point
/// `person deciding`, so a sweep can crash the run in the middle of a
/// decision (and check that the restart asks again rather than run the call
/// without a yes).
#[derive(Clone)]
pub struct ScriptedApprover {
    on_approval: Arc<ApproveFn>,
    on_question: Arc<ResolveFn>,
    log: Arc<Mutex<Vec<Asked>>>,
}

impl std::fmt::Debug for ScriptedApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedApprover")
            .field("log", &self.log())
            .finish_non_exhaustive()
    }
}

impl Default for ScriptedApprover {
    fn default() -> Self {
        ScriptedApprover::new()
    }
}

impl ScriptedApprover {
    /// Approves every call; answers every question with "rerun".
    pub fn new() -> ScriptedApprover {
        ScriptedApprover {
            on_approval: Arc::new(|_| Decision::Approve),
            on_question: Arc::new(|_| Answer::Rerun),
            log: Arc::default(),
        }
    }

    /// Decide approvals with `f`.
    pub fn on_approval(
        mut self,
        f: impl Fn(&Approval<'_>) -> Decision + Send + Sync + 'static,
    ) -> Self {
        self.on_approval = Arc::new(f);
        self
    }

    /// Answer ladder questions with `f`.
    pub fn on_question(
        mut self,
        f: impl Fn(&Question<'_>) -> Answer + Send + Sync + 'static,
    ) -> Self {
        self.on_question = Arc::new(f);
        self
    }

    /// Everything asked so far (shared by clones), in order.
    pub fn log(&self) -> Vec<Asked> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// How many ladder questions it answered.
    pub fn questions(&self) -> usize {
        self.log()
            .iter()
            .filter(|a| matches!(a, Asked::Question(..)))
            .count()
    }

    fn push(&self, asked: Asked) {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(asked);
    }
}

impl Approver for ScriptedApprover {
    fn approve(&self, request: &Approval<'_>) -> Decision {
        crashpoint::point!("person deciding");
        let d = (self.on_approval)(request);
        self.push(Asked::Approval(request.call.id.clone(), d.clone()));
        d
    }

    fn answer(&self, question: &Question<'_>) -> Answer {
        let r = (self.on_question)(question);
        self.push(Asked::Question(question.call.id.clone(), r.clone()));
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted person shows what it was asked (its log), not its
    /// closures.
    #[test]
    fn a_scripted_person_shows_its_log() {
        let person = ScriptedApprover::default();
        person.push(Asked::Question("c1".into(), Answer::Rerun));
        assert_eq!(
            format!("{person:?}"),
            r#"ScriptedApprover { log: [Question("c1", Rerun)], .. }"#
        );
    }
}
