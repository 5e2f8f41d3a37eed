//! The safety nets of the clean run, which need no crash: it must finish,
//! pass a point, count only declared counters, set every required one,
//! fault nothing, and do the same again when run twice.

use crashpoint::Hit;

use crate::config::Config;
use crate::error::{Divergence, Error};
use crate::failure::Failure;
use crate::judge::broken_invariants;
use crate::replay::{Ran, Replayer};
use crate::scenario::Scenario;
use crate::subject::Subject;

/// The clean run, with every safety net that needs no crash: it must
/// finish, pass a point, count only declared counters, set every required
/// one, fault nothing, and do the same again when run twice.
pub(crate) fn checked_clean_run<S: Subject>(
    replayer: &Replayer<'_, S>,
    config: &Config,
    unscoped: &crashpoint::unscoped::UnscopedWatch,
) -> Result<Ran, Error> {
    let subject = replayer.subject;
    let mut clean = replayer.replay(&Scenario::default(), Vec::new(), None);
    let verdict = &clean.result.verdict;
    let counters = &replayer.counters;
    if let Some((name, _)) = verdict
        .counts
        .iter()
        .find(|(n, _)| !counters.iter().any(|c| &c.name == n))
    {
        return Err(Error::UndeclaredCounter {
            subject: subject.name(),
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
            subject: subject.name(),
            reason: Box::new(reason.clone()),
        });
    }
    if let Some(c) = counters
        .iter()
        .find(|c| c.required_zero && !verdict.counts.iter().any(|(n, _)| *n == c.name))
    {
        return Err(Error::RequiredNeverSet {
            subject: subject.name(),
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
            subject: subject.name(),
            counters: parts.join(", "),
        });
    }
    if clean.last_hits.is_empty() {
        return Err(Error::NoPoints {
            subject: subject.name(),
            unscoped: unscoped
                .hits()
                .into_iter()
                .chain(unscoped.stray())
                .map(|(n, _)| n)
                .collect(),
        });
    }
    for _ in 1..config.clean_runs.max(1) {
        let again = replayer.replay(&Scenario::default(), Vec::new(), None);
        compare_clean_runs(&subject.name(), &clean, &again)?;
    }
    // What is left is no failure or a broken counter measured over the
    // clean run: judged without a clean run to measure over, its own value
    // counted; judged over itself (above), it is zero. The clean run passes.
    clean.result.failure = None;
    Ok(clean)
}

fn compare_clean_runs(subject: &str, first: &Ran, second: &Ran) -> Result<(), Error> {
    let (a, b) = (&first.last_hits, &second.last_hits);
    if a != b {
        let index = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        let around = |hits: &[Hit]| -> Vec<String> {
            let lo = index.saturating_sub(2);
            let hi = (index + 3).min(hits.len());
            hits.get(lo..hi)
                .unwrap_or_default()
                .iter()
                .map(ToString::to_string)
                .collect()
        };
        return Err(Error::Nondeterministic {
            subject: subject.to_owned(),
            at: Box::new(Divergence {
                index,
                first: a.get(index).map(ToString::to_string),
                second: b.get(index).map(ToString::to_string),
                first_around: around(a),
                second_around: around(b),
            }),
        });
    }
    let (va, vb) = (&first.result.verdict, &second.result.verdict);
    if va != vb || first.result.failure != second.result.failure {
        let show = |ran: &Ran| {
            let c: Vec<String> = (ran.result.verdict.counts.iter())
                .map(|(k, n)| format!("{k}={n}"))
                .collect();
            match &ran.result.failure {
                Some(f) => format!("{}, then {f}", c.join(" ")),
                None => c.join(" "),
            }
        };
        return Err(Error::NondeterministicVerdict {
            subject: subject.to_owned(),
            first: show(first),
            second: show(second),
        });
    }
    Ok(())
}
