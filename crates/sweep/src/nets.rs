//! The safety nets of the clean run, which need no crash: it must finish,
//! pass a point, count only declared counters, set every required one,
//! fault nothing, and do the same again when run twice.

use std::collections::BTreeSet;

use crashpoint::Hit;

use crate::config::Config;
use crate::error::{Divergence, Error};
use crate::failure::Failure;
use crate::judge::{broken_invariants, Counter};
use crate::replay::{Ran, Replayer, WorldSeen};
use crate::scenario::Scenario;
use crate::subject::Subject;

/// The clean run, with every safety net that needs no crash: it must
/// finish, pass a point, count only declared counters, set every required
/// one, fault nothing, and do the same again when run twice.
///
/// Runs are compared by what must match: the hits passed (each `name#k`,
/// so each point's count) and the world, not one global order. With
/// whether the runs passed their hits in different orders (threads
/// racing): then the clean run's hits are in [`canonical_order`].
pub(crate) fn checked_clean_run<S: Subject>(
    replayer: &Replayer<'_, S>,
    config: &Config,
    unscoped: &crashpoint::unscoped::UnscopedWatch,
    notices: &mut Vec<String>,
) -> Result<(Ran, bool), Error> {
    let subject = replayer.subject;
    let (before, before_unknown) = (unscoped.plain(), unscoped.during_lives());
    let mut clean = replayer.replay(&Scenario::default(), Vec::new(), None);
    // Points passed on plain threads this clean run's lives started, and on
    // plain threads no life started while it ran.
    let plain = passed_since(&before, &unscoped.plain());
    let unknown = passed_since(&before_unknown, &unscoped.during_lives());
    if let Some(e) = replayer.world_failed() {
        return Err(e);
    }
    check_clean_verdict(&subject.name(), &clean, &replayer.counters)?;
    if clean.last_hits.is_empty() {
        return Err(Error::NoPoints {
            subject: subject.name(),
            unscoped: unscoped
                .hits()
                .into_iter()
                .chain(unscoped.plain())
                .chain(unscoped.during_lives())
                .map(|(n, _)| n)
                .collect(),
        });
    }
    let (plain, unknown, interleaved) = repeat_clean_runs(
        replayer,
        config,
        unscoped,
        &clean,
        (plain, unknown),
        notices,
    )?;
    if interleaved {
        canonical_order(&mut clean.last_hits);
        notices.push(INTERLEAVED.to_owned());
    }
    refuse_unscoped(&subject.name(), config, plain)?;
    notice_unknown_threads(&unknown, notices);
    // What is left is no failure or a broken counter measured over the
    // clean run: judged without a clean run to measure over, its own value
    // counted; judged over itself (above), it is zero. The clean run passes.
    clean.result.failure = None;
    Ok((clean, interleaved))
}

/// The notice of a sweep whose clean runs passed the same hits in
/// different orders.
const INTERLEAVED: &str = "its clean runs passed the same hits in different orders (threads racing), so the sweep compared them as sets: a hit is its point and its occurrence among that point's passes (`name#k`), whichever thread passed it; scenarios are listed by occurrence, then by point; a failing scenario is run again, and one whose result changes is reported as flaky with both results";

/// Points passed, each with how many times.
type Passed = Vec<(String, u64)>;

/// The clean runs after the first, each compared with it: what `passed`
/// (points on plain threads its lives started, and on threads none did)
/// keeps only the points every run passed.
fn repeat_clean_runs<S: Subject>(
    replayer: &Replayer<'_, S>,
    config: &Config,
    unscoped: &crashpoint::unscoped::UnscopedWatch,
    clean: &Ran,
    passed: (Passed, Passed),
    notices: &mut Vec<String>,
) -> Result<(Passed, Passed, bool), Error> {
    let (mut plain, mut unknown) = passed;
    let mut interleaved = false;
    for _ in 1..config.clean_runs.max(1) {
        let (before, before_unknown) = (unscoped.plain(), unscoped.during_lives());
        let again = replayer.replay(&Scenario::default(), Vec::new(), None);
        // A program passes the same points on its plain threads in every
        // clean run: a point passed in one only (a race) warns, never
        // refuses.
        let again_plain = passed_since(&before, &unscoped.plain());
        plain.retain(|(n, _)| again_plain.iter().any(|(m, _)| m == n));
        let again_unknown = passed_since(&before_unknown, &unscoped.during_lives());
        unknown.retain(|(n, _)| again_unknown.iter().any(|(m, _)| m == n));
        if let Some(e) = replayer.world_failed() {
            return Err(e);
        }
        interleaved |= compare_clean_runs(&replayer.subject.name(), clean, &again, notices)?;
    }
    Ok((plain, unknown, interleaved))
}

/// The clean run's verdict, checked: it counts only declared counters, fails
/// on nothing but its counters, sets every required one and, measured over
/// itself, counts no fault.
fn check_clean_verdict(subject: &str, clean: &Ran, counters: &[Counter]) -> Result<(), Error> {
    let verdict = &clean.result.verdict;
    if let Some((name, _)) = verdict
        .counts
        .iter()
        .find(|(n, _)| !counters.iter().any(|c| &c.name == n))
    {
        return Err(Error::UndeclaredCounter {
            subject: subject.to_owned(),
            name: name.clone(),
            declared: counters.iter().map(|c| c.name.clone()).collect(),
        });
    }
    // A judge's broken counters are told apart below.
    if let Some(reason) = clean
        .result
        .failure
        .as_ref()
        .filter(|f| !matches!(f, Failure::Broken { .. } | Failure::RequiredNotSet { .. }))
    {
        return Err(Error::CleanRunFailed {
            subject: subject.to_owned(),
            reason: Box::new(reason.clone()),
        });
    }
    if let Some(c) = counters
        .iter()
        .find(|c| c.required_zero && !verdict.counts.iter().any(|(n, _)| *n == c.name))
    {
        return Err(Error::RequiredNeverSet {
            subject: subject.to_owned(),
            name: c.name.clone(),
        });
    }
    // Measured over itself, an over-clean counter is zero: what remains is
    // a fault counted when nothing crashed.
    if let Some(Failure::Broken {
        counters: broken, ..
    }) = broken_invariants(verdict, Some(verdict), counters)
    {
        let parts: Vec<String> = broken.iter().map(|(t, v)| format!("{t} = {v}")).collect();
        return Err(Error::CleanJudgeFaults {
            subject: subject.to_owned(),
            counters: parts.join(", "),
        });
    }
    Ok(())
}

/// A notice of the points passed on threads no life started while each
/// clean run ran (`unknown`), if any.
fn notice_unknown_threads(unknown: &[(String, u64)], notices: &mut Vec<String>) {
    if !unknown.is_empty() {
        let names: Vec<String> = unknown.iter().map(|(n, c)| format!("{n} ({c}×)")).collect();
        notices.push(format!(
            "points passed on threads that no life started while each clean run ran, which no crash can reach: {}; the sweep cannot tell whether they are its own (a thread pool made outside the life is; another test's thread is not), so it does not refuse them: carry the life's scope into that pool (crashpoint::scope::Handle::enter), or run each test in a process of its own (cargo nextest), where they can only be its own",
            names.join(", ")
        ));
    }
}

/// Each point whose count grew from `before` to `after` (two readings of
/// one tally), with how much.
fn passed_since(before: &[(String, u64)], after: &[(String, u64)]) -> Vec<(String, u64)> {
    after
        .iter()
        .filter_map(|(n, c)| {
            let was = before.iter().find(|(m, _)| m == n).map_or(0, |(_, b)| *b);
            (*c > was).then(|| (n.clone(), c - was))
        })
        .collect()
}

/// [`Error::Unscoped`] if the config refuses points on threads without a
/// scope and the clean runs passed some (`points`).
fn refuse_unscoped(
    subject: &str,
    config: &Config,
    points: Vec<(String, u64)>,
) -> Result<(), Error> {
    if config.refuse_unscoped && !points.is_empty() {
        return Err(Error::Unscoped {
            subject: subject.to_owned(),
            points,
        });
    }
    Ok(())
}

/// The first line where two descriptions differ, from each (the whole
/// description when it is one short line).
pub(crate) fn first_difference(a: &str, b: &str) -> (String, String) {
    let (mut la, mut lb) = (a.lines(), b.lines());
    let mut n = 1;
    loop {
        match (la.next(), lb.next()) {
            (Some(x), Some(y)) if x == y => n += 1,
            (x, y) => {
                let show = |l: Option<&str>| match l {
                    Some(l) => format!("line {n}: {l}"),
                    None => format!("line {n}: (the end)"),
                };
                return (show(x), show(y));
            }
        }
    }
}

/// Where two clean runs' hits `a` and `b` part, compared as sets (each
/// hit `name#k` is passed once a run; threads may pass them in any order):
/// the first hit of each run the other lacks, and the hits around each.
/// `None` when both passed the same hits.
pub(crate) fn divergence(a: &[Hit], b: &[Hit]) -> Option<Divergence> {
    let (in_a, in_b): (BTreeSet<&Hit>, BTreeSet<&Hit>) = (a.iter().collect(), b.iter().collect());
    let lacking =
        |hits: &[Hit], other: &BTreeSet<&Hit>| hits.iter().position(|h| !other.contains(h));
    let (ia, ib) = (lacking(a, &in_b), lacking(b, &in_a));
    if ia.is_none() && ib.is_none() {
        return None;
    }
    let around = |hits: &[Hit], index: Option<usize>| -> Vec<String> {
        let index = index.unwrap_or(hits.len());
        let lo = index.saturating_sub(2);
        let hi = (index + 3).min(hits.len());
        hits.get(lo..hi)
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    Some(Divergence {
        index: ia.or(ib).unwrap_or_default(),
        first: ia.and_then(|i| a.get(i)).map(ToString::to_string),
        second: ib.and_then(|i| b.get(i)).map(ToString::to_string),
        first_around: around(a, ia),
        second_around: around(b, ib),
    })
}

/// Whether two clean runs that passed the same hits passed them in
/// different orders (threads racing).
fn interleaved(a: &[Hit], b: &[Hit]) -> bool {
    a != b
}

/// The hits of a program whose threads interleave them differently from
/// run to run, in an order that does not depend on the interleaving: by
/// occurrence, then by point (each point's first pass, then each one's
/// second, …).
pub(crate) fn canonical_order(hits: &mut [Hit]) {
    hits.sort_by(|x, y| (x.occurrence, &x.point).cmp(&(y.occurrence, &y.point)));
}

/// Two clean runs compared hit for hit (as sets), verdict for verdict and
/// world for world: whether they passed their hits in different orders.
fn compare_clean_runs(
    subject: &str,
    first: &Ran,
    second: &Ran,
    notices: &mut Vec<String>,
) -> Result<bool, Error> {
    let (a, b) = (&first.last_hits, &second.last_hits);
    if let Some(at) = divergence(a, b) {
        return Err(Error::Nondeterministic {
            subject: subject.to_owned(),
            at: Box::new(at),
        });
    }
    let (va, vb) = (&first.result.verdict, &second.result.verdict);
    if va != vb || first.result.failure != second.result.failure {
        // The notes too when they are what differs: the counts alone would
        // read the same twice.
        let notes_differ = va.notes != vb.notes;
        let show = |ran: &Ran| {
            let c: Vec<String> = (ran.result.verdict.counts.iter())
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            let mut text = c.join(" ");
            if notes_differ {
                let notes = &ran.result.verdict.notes;
                text.push_str(&format!(", notes: {notes:?}"));
            }
            if let Some(f) = &ran.result.failure {
                text.push_str(&format!(", then {f}"));
            }
            text
        };
        return Err(Error::NondeterministicVerdict {
            subject: subject.to_owned(),
            first: show(first),
            second: show(second),
        });
    }
    if let (Some(a), Some(b)) = (&first.world_seen, &second.world_seen) {
        compare_clean_worlds(subject, a, b, notices)?;
    }
    Ok(interleaved(a, b))
}

/// The worlds two clean runs left, `a` and `b`: the same fingerprint, or
/// else the same description. A notice when neither can be compared.
fn compare_clean_worlds(
    subject: &str,
    a: &WorldSeen,
    b: &WorldSeen,
    notices: &mut Vec<String>,
) -> Result<(), Error> {
    if a.fingerprint.is_none()
        && b.fingerprint.is_none()
        && a.description.is_empty()
        && b.description.is_empty()
    {
        let notice = "its clean runs' worlds were not compared: it has neither Subject::describe nor a fingerprint (Subject::share), so two runs with the same hits and verdict that leave different worlds (an order from a HashSet, a time) pass unseen; implement Subject::describe to have them compared";
        if !notices.iter().any(|n| n == notice) {
            notices.push(notice.to_owned());
        }
    }
    let how = match (a.fingerprint, b.fingerprint) {
        (Some(x), Some(y)) if x != y => Some("their fingerprints differ"),
        (Some(_), Some(_)) => None,
        _ if a.description != b.description => Some("their descriptions differ"),
        _ => None,
    };
    if let Some(how) = how {
        let (first, second) = if a.description == b.description {
            let same = "(described the same: the difference is in what only the fingerprint holds)";
            (same.to_owned(), same.to_owned())
        } else {
            first_difference(&a.description, &b.description)
        };
        return Err(Error::NondeterministicWorld {
            subject: subject.to_owned(),
            how: how.to_owned(),
            first,
            second,
        });
    }
    Ok(())
}
