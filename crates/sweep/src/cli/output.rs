//! What the command line prints: tables, the JSON documents, failures with
//! the command that reruns each, and merging shard files.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::args::Format;
use crate::report::{Report, ScenarioResult};
use crate::scenario::Scenario;

/// The rows of `reports` as `format` says. With `partial` and JSON, the
/// full reports are included too (what `merge` reads back).
pub fn render(reports: &[Report], format: Format, partial: bool) -> String {
    let rows: Vec<_> = reports.iter().flat_map(Report::rows).collect();
    match format {
        Format::Table => crate::table(&rows),
        Format::Markdown => crate::report::markdown(&rows),
        Format::Json => {
            let mut v = json!({ "rows": rows });
            if partial {
                v["reports"] = serde_json::to_value(reports).unwrap_or(Value::Null);
            }
            pretty(&v)
        }
    }
}

/// One rerun scenario as JSON: `subject`, `scenario`, `passed`, `failure`
/// (text or null), `lives` (each with `crash`, `hits`, `end`), `counts`
/// (counter name → value), `notes`, `world` (text or null).
pub fn scenario_json(subject: &str, r: &ScenarioResult) -> Value {
    let counts: serde_json::Map<String, Value> = r
        .verdict
        .counts
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    json!({
        "subject": subject,
        "scenario": r.scenario.to_string(),
        "passed": r.failure.is_none(),
        "failure": r.failure.as_ref().map(ToString::to_string),
        "lives": r.lives,
        "counts": counts,
        "notes": r.verdict.notes,
        "world": r.world,
    })
}

pub(crate) fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// The processes a sweep of a process subject started, in one line:
/// `payouts: 211 processes for 37 scenarios: 104 lives, 0 forked, 67
/// judges, 0 forked, 37 services, 0 fork servers` (reruns of failing scenarios
/// included); `None` for a subject swept in this process.
pub fn processes_line(r: &Report) -> Option<String> {
    let p = r.stats.processes?;
    Some(format!(
        "{}: {} processes for {} scenarios: {} lives, {} forked, {} judges, {} forked, {} services, {} fork servers",
        r.subject,
        p.total(),
        r.stats.scenarios,
        p.lives,
        p.forked,
        p.judges,
        p.forked_judges,
        p.services,
        p.servers
    ))
}

/// How many failures of one subject are printed (the rest are counted).
const SHOWN: usize = 10;

/// Each failing scenario of `reports` as a message and the command that
/// reruns it, then each flaky one, then a warning for each subject whose
/// points were passed on threads without a scope; `rerun(i, scenario)` is
/// that command for report `i`. The count is of failing and flaky
/// scenarios (either fails the command).
pub fn failure_lines(
    reports: &[Report],
    rerun: &dyn Fn(usize, &Scenario) -> String,
) -> (Vec<String>, usize) {
    let mut lines = Vec::new();
    let mut total = 0;
    let mut flaky_total = 0;
    let mut unfired_total = 0;
    for (i, r) in reports.iter().enumerate() {
        // The clean run (no crash) goes with the first state only: its
        // scenario is in the process state, which may come later.
        let of = |s: &ScenarioResult, state: Option<&crate::power::CrashState>, first: bool| {
            state.map_or(true, |st| {
                if s.scenario.hits.is_empty() {
                    first
                } else {
                    s.scenario.state == *st
                }
            })
        };
        for (g, (title, state)) in state_groups(r).iter().enumerate() {
            let failed: Vec<_> = r.failures().filter(|s| of(s, *state, g == 0)).collect();
            // (The clean run is never flaky: it is not rerun.)
            let flaky: Vec<_> = r.flaky().filter(|s| of(s, *state, false)).collect();
            let unfired: Vec<_> = r.unfired().filter(|s| of(s, *state, false)).collect();
            total += failed.len();
            flaky_total += flaky.len();
            unfired_total += unfired.len();
            for (label, list) in [("FAILED", failed), ("FLAKY", flaky), ("NOT FIRED", unfired)] {
                shown_lines(&mut lines, (r, title), label, &list, &|f| rerun(i, f));
            }
        }
        lines.extend(report_warnings(r));
    }
    if flaky_total > 0 {
        lines.push(format!(
            "{flaky_total} {} flaky: {} another result when run again",
            plural(flaky_total, "scenario was", "scenarios were"),
            plural(flaky_total, "it gave", "they gave"),
        ));
    }
    if unfired_total > 0 {
        lines.push(format!(
            "{unfired_total} {} never fired: the program did not reach {} hit, also when run again, so {} nothing; its hits vary from run to run (threads, the clock, a race); no failure of the program, but not a pass either",
            plural(unfired_total, "scenario's crash", "scenarios' crashes"),
            plural(unfired_total, "its", "their"),
            plural(unfired_total, "it tested", "they tested"),
        ));
    }
    if total > 0 {
        lines.push(format!(
            "{total} {} a required invariant",
            plural(total, "scenario failed", "scenarios failed")
        ));
    }
    (lines, total + flaky_total + unfired_total)
}

/// The groups report `r`'s failures are told in: one for each crash state
/// (its title) when it swept several, else one for the whole subject.
fn state_groups(r: &Report) -> Vec<(String, Option<&crate::power::CrashState>)> {
    // A report of several crash states shows up to SHOWN of each state.
    if r.states.len() > 1 {
        r.states
            .iter()
            .map(|st| (st.title.clone(), Some(&st.state)))
            .collect()
    } else {
        vec![(r.subject.clone(), None)]
    }
}

/// Up to SHOWN scenarios of `list` (failing or flaky, as `label` says) of
/// the group titled `title` of report `r`, each with its rerun command, and
/// how many more there are.
fn shown_lines(
    lines: &mut Vec<String>,
    (r, title): (&Report, &str),
    label: &str,
    list: &[&ScenarioResult],
    rerun: &dyn Fn(&Scenario) -> String,
) {
    for f in list.iter().take(SHOWN) {
        let reason = (f.failure.as_ref())
            .map(ToString::to_string)
            .unwrap_or_default();
        lines.push(format!(
            "{label} {} / {}: {}\n    rerun: {}",
            r.subject,
            f.scenario,
            reason,
            rerun(&f.scenario)
        ));
    }
    if list.len() > SHOWN {
        let what = match label {
            "FAILED" => "failing",
            "FLAKY" => "flaky",
            _ => "unfired",
        };
        lines.push(format!(
            "    … and {} more {what} scenarios of {title}",
            list.len() - SHOWN,
        ));
    }
}

/// Report `r`'s warnings and notes: points passed on threads without a
/// scope, its notices, and points its clean run never passed.
fn report_warnings(r: &Report) -> Vec<String> {
    let mut lines = Vec::new();
    if !r.unscoped.is_empty() || !r.stray.is_empty() {
        let names: Vec<String> = r
            .unscoped
            .iter()
            .chain(&r.stray)
            .map(|(n, c)| format!("{n} ({c}×)"))
            .collect();
        lines.push(format!(
            "warning: {}: crash points passed on threads without a scope, which no crash can reach: {}\n    hint: start threads with crashpoint::spawn (tokio tasks with crashpoint::task::spawn_task) so they carry the life's scope",
            r.subject,
            names.join(", ")
        ));
    }
    for n in &r.notices {
        lines.push(format!("note: {}: {n}", r.subject));
    }
    if !r.never_passed.is_empty() {
        lines.push(format!(
            "warning: {}: crash points compiled into the code its clean run went through, which the clean run never passed, so no scenario crashes there: {}\n    hint: make the clean run pass them (take the branch, enable the feature) or remove them; --strict-points refuses such a sweep",
            r.subject,
            r.never_passed.join(", ")
        ));
    }
    lines
}

fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// The failures as JSON objects: `subject`, `scenario`, `reason`, `rerun`.
pub fn failures_json(reports: &[Report], rerun: &dyn Fn(usize, &Scenario) -> String) -> Value {
    let mut out = Vec::new();
    for (i, r) in reports.iter().enumerate() {
        for f in r.failures().chain(r.flaky()).chain(r.unfired()) {
            out.push(json!({
                "subject": r.subject,
                "scenario": f.scenario.to_string(),
                "reason": f.failure.as_ref().map(ToString::to_string),
                "flaky": f.failure.as_ref().is_some_and(crate::Failure::is_flaky),
                "not_fired": f.failure.as_ref().is_some_and(crate::Failure::is_unfired),
                "rerun": rerun(i, &f.scenario),
            }));
        }
    }
    Value::Array(out)
}

/// Why shard files could not be merged; every message names its file.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// The file could not be read.
    #[error("cannot read {}: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file holds no partial reports.
    #[error("{}: no partial reports in it ({reason}); write them with --partition K/N --format json", path.display())]
    NotAShard {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The file's shard of a subject was given by another file already.
    #[error("{}: shard {shard} of {subject} is also in {}", path.display(), first.display())]
    Twice {
        /// The file refused.
        path: PathBuf,
        /// The file that gave the shard first.
        first: PathBuf,
        /// The subject.
        subject: String,
        /// The shard, `K/N`.
        shard: String,
    },
    /// The file's report is not a shard of one sweep.
    #[error("{}: {subject} is not a shard of a partitioned sweep (its report covers all scenarios)", path.display())]
    Whole {
        /// The file refused.
        path: PathBuf,
        /// The subject.
        subject: String,
    },
    /// The shards do not add up.
    #[error("cannot merge the shards of {subject} ({}): {reason}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "))]
    Shards {
        /// The subject.
        subject: String,
        /// Its files.
        files: Vec<PathBuf>,
        /// Why.
        reason: String,
    },
}

/// Read the partial reports in `files` and merge them, subject by subject,
/// in the order the subjects first appear.
pub fn merge_files(files: &[PathBuf]) -> Result<Vec<Report>, MergeError> {
    type Parts = Vec<(PathBuf, Report)>;
    let mut by_subject: Vec<(String, Parts)> = Vec::new();
    for f in files {
        for r in read_shard(f)? {
            let Some((k, n)) = r.partition else {
                return Err(MergeError::Whole {
                    path: f.clone(),
                    subject: r.subject,
                });
            };
            let i = match by_subject.iter().position(|(s, _)| *s == r.subject) {
                Some(i) => i,
                None => {
                    by_subject.push((r.subject.clone(), Vec::new()));
                    by_subject.len() - 1
                }
            };
            let slot = &mut by_subject[i].1;
            if let Some((first, _)) = slot.iter().find(|(_, p)| p.partition == r.partition) {
                return Err(MergeError::Twice {
                    path: f.clone(),
                    first: first.clone(),
                    subject: r.subject,
                    shard: format!("{k}/{n}"),
                });
            }
            slot.push((f.clone(), r));
        }
    }
    by_subject
        .into_iter()
        .map(|(subject, parts)| {
            let paths: Vec<PathBuf> = parts.iter().map(|(p, _)| p.clone()).collect();
            Report::merge(parts.into_iter().map(|(_, r)| r).collect()).map_err(|e| {
                MergeError::Shards {
                    subject,
                    files: paths,
                    reason: e.to_string(),
                }
            })
        })
        .collect()
}

fn read_shard(f: &Path) -> Result<Vec<Report>, MergeError> {
    let text = std::fs::read_to_string(f).map_err(|e| MergeError::Read {
        path: f.to_path_buf(),
        reason: e.to_string(),
    })?;
    let not_a_shard = |reason: String| MergeError::NotAShard {
        path: f.to_path_buf(),
        reason,
    };
    let v: Value =
        serde_json::from_str(&text).map_err(|e| not_a_shard(format!("not JSON: {e}")))?;
    serde_json::from_value(v["reports"].clone()).map_err(|e| not_a_shard(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::power::CrashState;
    use crate::report::StateRow;
    use crate::{Failure, Hit, Verdict};

    const LOSE: CrashState = CrashState::named("lose");

    fn result(state: &CrashState, hit: u32, failure: Option<Failure>) -> ScenarioResult {
        let hits = if hit == 0 {
            Vec::new()
        } else {
            vec![Hit::new("p", hit)]
        };
        ScenarioResult {
            scenario: Scenario::in_state(state.clone(), hits),
            order: Vec::new(),
            verdict: Verdict::new(),
            failure,
            lives: Vec::new(),
            world: None,
        }
    }

    fn broken() -> Option<Failure> {
        Some(Failure::Broken {
            counters: vec![("dups".into(), 1)],
            notes: Vec::new(),
        })
    }

    fn flaky() -> Option<Failure> {
        Some(Failure::Flaky {
            first: Box::new(Failure::Broken {
                counters: vec![("dups".into(), 1)],
                notes: Vec::new(),
            }),
            again: None,
        })
    }

    /// A report of `states`, its clean run failing if `clean_fails`, with
    /// `failing[i]` failing and `flaky[i]` flaky scenarios in state `i`.
    fn report(
        states: &[CrashState],
        clean_fails: bool,
        failing: &[u32],
        flaky_n: &[u32],
    ) -> Report {
        let mut scenarios = Vec::new();
        for (i, st) in states.iter().enumerate() {
            let mut hit = 0;
            for _ in 0..failing[i] {
                hit += 1;
                scenarios.push(result(st, hit, broken()));
            }
            for _ in 0..flaky_n[i] {
                hit += 1;
                scenarios.push(result(st, hit, flaky()));
            }
            // One that passes.
            scenarios.push(result(st, hit + 1, None));
        }
        Report {
            subject: "relay".into(),
            counters: Vec::new(),
            depth: 1,
            partition: None,
            states: states
                .iter()
                .map(|s| StateRow {
                    state: s.clone(),
                    title: if *s == CrashState::PROCESS {
                        "relay".into()
                    } else {
                        format!("relay | {s}")
                    },
                })
                .collect(),
            unscoped: Vec::new(),
            stray: Vec::new(),
            never_passed: Vec::new(),
            notices: Vec::new(),
            stats: Default::default(),
            clean: result(
                &CrashState::PROCESS,
                0,
                if clean_fails { broken() } else { None },
            ),
            scenarios,
            tallies: Vec::new(),
        }
    }

    fn listed(r: &Report) -> (Vec<String>, usize) {
        failure_lines(std::slice::from_ref(r), &|i, sc| format!("rerun {i} {sc}"))
    }

    /// The first line of each entry.
    fn heads(lines: &[String]) -> Vec<&str> {
        lines.iter().filter_map(|l| l.lines().next()).collect()
    }

    /// Several crash states: each state's failures, then its flaky
    /// scenarios, up to ten of each; the clean run goes with the first
    /// state; the totals count failing and flaky scenarios apart.
    #[test]
    fn failures_of_several_states_are_listed_state_by_state() {
        let r = report(&[LOSE, CrashState::PROCESS], true, &[11, 1], &[0, 2]);
        let (lines, count) = listed(&r);
        assert_eq!(count, 1 + 11 + 1 + 2);
        assert_eq!(
            heads(&lines),
            [
                "FAILED relay / clean: dups = 1",
                "FAILED relay / lose: p#1: dups = 1",
                "FAILED relay / lose: p#2: dups = 1",
                "FAILED relay / lose: p#3: dups = 1",
                "FAILED relay / lose: p#4: dups = 1",
                "FAILED relay / lose: p#5: dups = 1",
                "FAILED relay / lose: p#6: dups = 1",
                "FAILED relay / lose: p#7: dups = 1",
                "FAILED relay / lose: p#8: dups = 1",
                "FAILED relay / lose: p#9: dups = 1",
                "    … and 2 more failing scenarios of relay | lose",
                "FAILED relay / p#1: dups = 1",
                "FLAKY relay / p#2: flaky: failed with dups = 1, then passed when run again",
                "FLAKY relay / p#3: flaky: failed with dups = 1, then passed when run again",
                "2 scenarios were flaky: they gave another result when run again",
                "13 scenarios failed a required invariant",
            ]
        );
        assert_eq!(
            lines[1],
            "FAILED relay / lose: p#1: dups = 1\n    rerun: rerun 0 lose: p#1"
        );
    }

    /// One crash state: the list is the subject's, clean run included.
    #[test]
    fn failures_of_one_state_are_the_subjects() {
        let r = report(&[LOSE], false, &[12], &[1]);
        let (lines, count) = listed(&r);
        assert_eq!(count, 13);
        assert_eq!(lines[10], "    … and 2 more failing scenarios of relay");
        assert!(
            lines[11].starts_with("FLAKY relay / lose: p#13"),
            "{}",
            lines[11]
        );
        assert_eq!(
            lines[12..],
            [
                "1 scenario was flaky: it gave another result when run again",
                "12 scenarios failed a required invariant"
            ]
        );
        // Ten are all shown, with no "more" line.
        let r = report(&[LOSE], false, &[10], &[0]);
        let (lines, _) = listed(&r);
        assert_eq!(lines.len(), 11);
        assert!(!lines.iter().any(|l| l.contains("more")), "{lines:#?}");
        let r = report(&[LOSE], true, &[0], &[0]);
        let (lines, count) = listed(&r);
        assert_eq!(count, 1);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1], "1 scenario failed a required invariant");
    }
}
