//! The run's hooks besides printing: the first-save mark a fresh run's
//! world gets once the loop's start save is done, and the test hooks that
//! kill the process (`--die-after`, `--die-after-reply`) or signal it
//! (`--signal-after`) in the window no checkpoint can close.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent::model::{Model, ModelError, Reply};
use agent::observe::Event;
use agent::state::Message;
use durable::RunId;
use serde_json::{json, Value};

use super::Shared;
use crate::adopt;
use crate::exit::Failure;
use crate::output::{self, Printer};

/// `--die-after-reply N`: SIGKILL as soon as reply N arrives, before the
/// loop saves it (the reply is paid for, and lost).
pub(crate) struct DieAfterReply {
    pub(crate) inner: Box<dyn Model>,
    pub(crate) turn: u32,
    pub(crate) printer: Shared,
}

impl Model for DieAfterReply {
    fn reply(&self, conversation: &[Message]) -> Result<Reply, ModelError> {
        let reply = self.inner.reply(conversation)?;
        let turn = conversation
            .iter()
            .filter(|m| m.role == agent::state::Role::Assistant)
            .count()
            + 1;
        if u32::try_from(turn).is_ok_and(|t| t == self.turn) {
            let p = output::lock(&self.printer);
            kill_self(
                &p,
                &format!("--die-after-reply {turn}: reply {turn} arrived"),
                "it",
                json!({"event": "die_after_reply", "turn": turn}),
            );
        }
        Ok(reply)
    }
}

/// What the observer does besides printing: the first-save mark, the test
/// hooks, and the cancel flag `--signal-after` waits on.
pub(crate) struct Hooks {
    pub(crate) die_after: Option<String>,
    pub(crate) signal_after: Option<String>,
    pub(crate) cancel: Arc<AtomicBool>,
    /// A run without a checkpoint yet: mark its world once the loop's
    /// start save is done.
    pub(crate) first_save: Option<FirstSave>,
    /// On a store: run once the loop holds the run (started or resumed),
    /// before it calls anything; a failure is kept in the slot and the loop
    /// cancelled at its next step.
    pub(crate) on_claimed: Option<(super::OnClaimed, Arc<Mutex<Option<Failure>>>)>,
}

/// Where to write the first-save mark ([`adopt::SAVED_MARK`]), and where to
/// leave the failure if it cannot be written.
pub(crate) struct FirstSave {
    pub(crate) world: PathBuf,
    pub(crate) run: RunId,
    pub(crate) failed: Arc<Mutex<Option<Failure>>>,
}

/// The loop's observer: print each event; once a fresh run's start save is
/// done, mark it in the world before the loop calls anything (if that
/// fails, the failure is kept and the loop cancelled at its next step, so
/// no call is made unmarked); with `--die-after TOOL` die as soon as a call
/// of TOOL returns; with `--signal-after TOOL` send SIGTERM to this process
/// once, as soon as a call of TOOL returns.
pub(crate) fn observer(printer: Shared, hooks: Hooks) -> impl Fn(&Event) + Send {
    let signalled = AtomicBool::new(false);
    move |e: &Event| {
        let mut p = output::lock(&printer);
        p.event(e);
        if let (Event::Started { .. }, Some(first)) = (e, &hooks.first_save) {
            if let Err(failure) = adopt::mark_saved(&first.world, &first.run) {
                let failure = failure.hint(format!(
                    "the run's first checkpoint is saved and it called nothing; fix the cause \
                     and rerun to continue it (the rerun writes the mark {} first)",
                    adopt::SAVED_MARK
                ));
                *first.failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
                hooks.cancel.store(true, Ordering::SeqCst);
            }
        }
        if let (Event::Started { .. } | Event::Resumed { .. }, Some((hook, failed))) =
            (e, &hooks.on_claimed)
        {
            // The hook prints (what it cleaned up): not while we hold the
            // printer.
            drop(p);
            if let Err(failure) = hook() {
                let mut slot = failed.lock().unwrap_or_else(|e| e.into_inner());
                if slot.is_none() {
                    *slot = Some(failure);
                }
                hooks.cancel.store(true, Ordering::SeqCst);
            }
            p = output::lock(&printer);
        }
        let Event::ToolReturned { tool, call, .. } = e else {
            return;
        };
        if hooks.die_after.as_ref() == Some(tool) {
            die_now(&p, tool, call);
        }
        if hooks.signal_after.as_ref() == Some(tool) && !signalled.swap(true, Ordering::SeqCst) {
            signal_now(&p, tool, call, &hooks.cancel);
        }
    }
}

/// Send SIGTERM to this process, a real signal to our own pid, in the same
/// window `--die-after` dies in: the tool has returned, its result is not
/// saved. The handler sets the cancel flag; the loop then saves the result
/// and stops at its next step.
fn signal_now(p: &Printer, tool: &str, call: &str, cancel: &AtomicBool) {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    p.step(
        "signal",
        &format!("--signal-after {tool}: {call} returned; sending SIGTERM to myself (pid {pid}) before its result is saved"),
        json!({"event": "signal_after", "tool": tool, "call": call, "pid": pid, "signal": "SIGTERM"}),
    );
    // SAFETY: sending a signal to our own pid has no memory-safety
    // preconditions; the handler installed by `Shutdown::install` only
    // stores to atomics.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
    // POSIX delivers a signal a single-threaded process sends itself before
    // kill returns, so the flag is already set; should the handler run on
    // another thread, wait for it rather than let the loop race past.
    while !cancel.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
}

/// Die in the window no checkpoint can close: the tool has returned, its
/// result is not saved. A real SIGKILL, not a panic: no unwinding, no
/// destructors, no flushing by anyone but us.
fn die_now(p: &Printer, tool: &str, call: &str) -> ! {
    kill_self(
        p,
        &format!("--die-after {tool}: {call} returned"),
        "its result",
        json!({"event": "die_after", "tool": tool, "call": call}),
    )
}

/// Print what happened (`what`, and `value` with the pid added), then send
/// this process SIGKILL before `unsaved` is saved.
fn kill_self(p: &Printer, what: &str, unsaved: &str, mut value: Value) -> ! {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    value["pid"] = json!(pid);
    p.step(
        "kill",
        &format!("{what}; sending SIGKILL to myself (pid {pid}) before {unsaved} is saved"),
        value,
    );
    let _ = io::stdout().flush();
    let _ = io::stderr().flush();
    // SAFETY: sending a signal to our own pid has no memory-safety
    // preconditions; SIGKILL cannot be caught, so this does not return.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
    // POSIX delivers a signal sent to oneself before kill returns; never
    // run on past this point regardless.
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}
