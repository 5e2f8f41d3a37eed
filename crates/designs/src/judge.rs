//! The judge: the columns a design's row has, and how a world is counted —
//! each scripted effect found once, twice or never, by exact text or (for a
//! model that rewords) by intent — with a label for every crash.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sweep::{Counter, Verdict};

use crate::design::Design;
use crate::labels;
use crate::modes::{Modes, Person};
use crate::script::{Op, Script};
use crate::world::World;

/// The columns of a design's row: the book chapter's four when run without
/// modes, else those the modes add, required to be zero where a correct
/// design must count zero.
pub(crate) fn counters(design: Design, modes: &Modes) -> Vec<Counter> {
    let mut c = columns(design, modes);
    // Declared without a column: what the judge counts beyond the row's
    // columns (the crash labels, read by the labels table).
    for name in ["lost saves", "stopped", "wrong answers"] {
        if *modes != Modes::default() && !c.iter().any(|x| x.name == name) {
            c.push(Counter::new(name).hidden());
        }
    }
    for stage in labels::Stage::ALL {
        for rung in labels::Settlement::ALL {
            c.push(Counter::new(&labels::count_name(stage, rung)).hidden());
        }
    }
    c
}

/// The counters that are columns of the row.
fn columns(design: Design, modes: &Modes) -> Vec<Counter> {
    if *modes == Modes::default() {
        // The book chapter's columns, exactly.
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
    let strict = modes.power.is_some()
        || (modes.tracker.is_some() && (design.sends_keys_with(modes) || design.marks()));
    let must = |c: Counter| if strict { c.required() } else { c };
    let mut c = vec![
        must(Counter::new("dups").with_scenarios("with dups")),
        must(Counter::new("missing")),
        Counter::new("asks"),
    ];
    if modes.person != Person::Right {
        c.push(Counter::new("wrong answers"));
    }
    c.push(Counter::new("model calls").titled("calls+").over_clean());
    if modes.model.is_some() {
        c.push(Counter::new("reworded"));
    }
    if modes.power.is_some() {
        c.push(must(Counter::new("lost saves")));
    }
    c.push(must(Counter::new("stopped")));
    c
}

/// Count what went wrong in the world `w` a scenario of `script`, run with
/// `modes`, left behind: duplicated and missing effects, questions, model
/// calls, and what the modes add; every crash's label; notes in words.
pub(crate) fn judge(script: &Script, modes: &Modes, w: &World, memo: &RecordsMemo) -> Verdict {
    let by_intent = modes.model.is_some();
    // The tracker's fingerprint, if the world holds it already (a shared
    // sweep's worlds do): the records' count is remembered by it.
    let key = w.notes().fresh_tracker_key().map(|k| (k, by_intent));
    let remembered = key.and_then(|k| lock(memo).get(&k).cloned());
    let recs = match remembered {
        Some(r) => r,
        None => {
            let r = Arc::new(records(script, by_intent, &w.tracker.issues_shared()));
            if let Some(k) = key {
                let mut m = lock(memo);
                if m.len() < RECORDS_MEMO_CAP {
                    m.insert(k, Arc::clone(&r));
                }
            }
            r
        }
    };
    let notes = w.notes();
    let mut v = Verdict::new();
    for n in &recs.notes {
        v = v.note(n.clone());
    }
    let (dups, missing, reworded) = (recs.dups, recs.missing, recs.reworded);
    if let Some(e) = &notes.stopped {
        v = v.note(format!("the run stopped: {e}"));
    }
    if notes.lost_saves > 0 {
        v = v.note(format!(
            "{} restart(s) resumed from an older checkpoint than the last save that returned",
            notes.lost_saves
        ));
    }
    v = v
        .count("dups", dups)
        .count("missing", missing)
        .count("asks", notes.asks)
        .count("model calls", notes.model_calls);
    if *modes != Modes::default() {
        v = v
            .count("lost saves", notes.lost_saves)
            .count("stopped", u64::from(notes.stopped.is_some()))
            .count("wrong answers", notes.wrong_answers);
    }
    if let Some(n) = reworded {
        v = v.count("reworded", n);
    }
    for (i, (stage, rung, call)) in notes.labels.crashes().enumerate() {
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

/// What the tracker's records say of a script's effects: duplicated and
/// missing ones, records worded as a model asked again worded them (judging
/// by intent), and notes in words.
#[derive(Debug)]
pub(crate) struct Records {
    dups: u64,
    missing: u64,
    reworded: Option<u64>,
    notes: Vec<String>,
}

impl Records {
    /// Counts the scripted effect `what`, found `n` times among the records.
    fn effect(&mut self, what: String, n: usize) {
        match n {
            0 => {
                self.missing += 1;
                self.notes
                    .push(format!("{what} never made it to the tracker"));
            }
            1 => {}
            n => {
                self.dups += n as u64 - 1;
                self.notes.push(format!("{what} made {n} times"));
            }
        }
    }
}

/// Records counted, by the tracker's fingerprint and whether judged by
/// intent (a subject's worlds of one script).
pub(crate) type RecordsMemo = Mutex<HashMap<(u128, bool), Arc<Records>>>;

/// How many trackers' records a subject remembers.
const RECORDS_MEMO_CAP: usize = 1 << 14;

fn lock(m: &RecordsMemo) -> std::sync::MutexGuard<'_, HashMap<(u128, bool), Arc<Records>>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a record's `text` stands for the `scripted` text: the same, or
/// (judging `by_intent`) the script's reworded by a model that was asked
/// again.
fn same_record(by_intent: bool, text: &str, scripted: &str) -> bool {
    text == scripted
        || (by_intent
            && text
                .strip_prefix(scripted)
                .is_some_and(|rest| rest.starts_with(" (take ")))
}

/// The issues by their title and body.
fn index_by_text(issues: &[tracker::Issue]) -> HashMap<(&str, &str), Vec<&tracker::Issue>> {
    let mut by_text: HashMap<(&str, &str), Vec<&tracker::Issue>> = HashMap::new();
    for i in issues {
        by_text
            .entry((i.title.as_str(), i.body.as_str()))
            .or_default()
            .push(i);
    }
    by_text
}

/// How many records (issues' titles, comments) are worded as no scripted
/// effect is: reworded by a model that was asked again.
fn reworded(script: &Script, issues: &[tracker::Issue]) -> u64 {
    let scripted: Vec<&str> = script
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
        + issues
            .iter()
            .flat_map(|i| &i.comments)
            .filter(|c| !scripted.contains(&c.body.as_str()))
            .count();
    n as u64
}

/// Count the records `issues` hold of `script`'s effects.
fn records(script: &Script, by_intent: bool, issues: &[tracker::Issue]) -> Records {
    let mut out = Records {
        dups: 0,
        missing: 0,
        reworded: None,
        notes: Vec::new(),
    };
    // A record stands for a scripted effect when its text is the
    // script's, or (judging by intent) the script's reworded by a model
    // that was asked again.
    let same = |text: &str, scripted: &str| same_record(by_intent, text, scripted);
    // Judging by exact text, the issues by their title and body, found in
    // one pass (a sweep judges many worlds of a long job).
    let by_text = if by_intent {
        HashMap::new()
    } else {
        index_by_text(issues)
    };
    // The issues that stand for `title` and `body` (more than one if filed
    // twice), in the tracker's order.
    let standing_for = |title: &str, body: &str| -> Vec<&tracker::Issue> {
        if by_intent {
            issues
                .iter()
                .filter(|i| same(&i.title, title) && same(&i.body, body))
                .collect()
        } else {
            by_text.get(&(title, body)).cloned().unwrap_or_default()
        }
    };
    // The issues that stand for the issue filed by the scripted call `id`.
    let filed_by = |id: &str| match script.call(id).map(|c| &c.op) {
        Some(Op::FileIssue { title, body }) => standing_for(title, body),
        _ => Vec::new(),
    };
    // An effect is keyed by what it is: an issue by its title and body, a
    // comment by the issue it is on and its body — two comments with one
    // body on two issues are two effects, not a duplicate.
    for call in script.effects() {
        let (what, n) = match &call.op {
            Op::FileIssue { title, body } => {
                (format!("issue {title:?}"), standing_for(title, body).len())
            }
            Op::Comment { issue_call, body } => (
                format!("comment {body:?}"),
                filed_by(issue_call)
                    .into_iter()
                    .flat_map(|i| &i.comments)
                    .filter(|c| same(&c.body, body))
                    .count(),
            ),
            Op::Search { .. } => continue,
        };
        out.effect(what, n);
    }
    out.reworded = by_intent.then(|| reworded(script, issues));
    if let Some(n @ 1..) = out.reworded {
        out.notes.push(format!(
            "{n} record(s) worded as a model asked again worded them: a lookup by \
                 the first wording cannot find them"
        ));
    }
    out
}
