//! `--artifacts DIR`: a directory per failing scenario, so a CI failure can
//! be read without rerunning it — the rerun command (as an argv array and
//! as a shell line), the timeline, the verdict with its notes, and the
//! final world: as the subject describes it, and its files for a subject
//! that keeps them (a process subject's world directory, service directory
//! and logs).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::output::{pretty, scenario_json};
use super::slug;
use crate::config::Config;
use crate::dyn_subject::DynSubject;
use crate::report::{Report, ScenarioResult};
use crate::scenario::Scenario;

/// Write one directory per failing (or flaky) scenario of `reports` under
/// `dir`, named `NNN-SUBJECT-SCENARIO` (numbered in the order the failures
/// are printed). Each scenario is run once more ([`crate::rerun`] with
/// `config`), traced, for its timeline and final world; the verdict is the
/// sweep's own, with the rerun's beside it. Returns the directories written.
///
/// Files: `rerun.json` (`argv`: the command as an array, `null` if the
/// shell line does not split; `shell`: the line), `rerun.sh`, `timeline.txt`,
/// `verdict.json` (`subject`, `scenario`, `failure`, `counts`, `notes`,
/// and `rerun`: the rerun as [`scenario_json`] gives it), `world.txt`, and
/// what the subject keeps of the final world ([`crate::Subject::keep`]; a
/// process subject: `world/`, `service/`, `logs/`).
pub(crate) fn write(
    dir: &Path,
    subjects: &[&dyn DynSubject],
    config: &Config,
    reports: &[Report],
    rerun: &dyn Fn(usize, &Scenario) -> String,
) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for (i, report) in reports.iter().enumerate() {
        let Some(subject) = subjects.get(i) else {
            continue;
        };
        for f in report.failures().chain(report.flaky()) {
            let name = format!(
                "{:03}-{}-{}",
                written.len() + 1,
                slug(&report.subject),
                match slug(&f.scenario.to_string()) {
                    s if s.is_empty() => "clean-run".to_owned(),
                    s => s,
                }
            );
            let at = dir.join(name);
            std::fs::create_dir_all(&at)?;
            let (again, kept) = subject
                .rerun_keeping(config, &f.scenario.to_string(), &at)
                .map_err(std::io::Error::other)?;
            kept.map_err(|e| {
                std::io::Error::new(e.kind(), format!("the final world of {}: {e}", f.scenario))
            })?;
            write_one(&at, &report.subject, f, &again, &rerun(i, &f.scenario))?;
            written.push(at);
        }
    }
    Ok(written)
}

fn write_one(
    at: &Path,
    subject: &str,
    sweep: &ScenarioResult,
    again: &ScenarioResult,
    shell: &str,
) -> std::io::Result<()> {
    let argv = split(shell);
    std::fs::write(
        at.join("rerun.json"),
        pretty(&json!({ "argv": argv, "shell": shell })),
    )?;
    std::fs::write(at.join("rerun.sh"), format!("{shell}\n"))?;
    std::fs::write(at.join("timeline.txt"), again.timeline())?;
    let counts: serde_json::Map<String, Value> = sweep
        .verdict
        .counts
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let verdict = json!({
        "subject": subject,
        "scenario": sweep.scenario.to_string(),
        "failure": sweep.failure.as_ref().map(ToString::to_string),
        "counts": counts,
        "notes": sweep.verdict.notes,
        "rerun": scenario_json(subject, again),
    });
    std::fs::write(at.join("verdict.json"), pretty(&verdict))?;
    let world = match again.world.as_deref() {
        Some(w) if !w.is_empty() => format!("{w}\n"),
        _ => "(the subject describes no world: implement Subject::describe to dump it here)\n"
            .to_owned(),
    };
    std::fs::write(at.join("world.txt"), world)
}

/// Split a shell line into its words as a POSIX shell would (quotes and
/// backslashes; no expansions): `None` if a quote is left open or the line
/// uses what a plain split cannot honour (`$`, `` ` ``, `;`, `|`, `&`,
/// redirections, unquoted).
pub(crate) fn split(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        c => word.push(c),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => match chars.next()? {
                            c @ ('"' | '\\' | '$' | '`') => word.push(c),
                            '\n' => {}
                            c => {
                                word.push('\\');
                                word.push(c);
                            }
                        },
                        '$' | '`' => return None,
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next()?);
            }
            '$' | '`' | ';' | '|' | '&' | '<' | '>' | '(' | ')' => return None,
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn a_rerun_line_splits_into_the_words_a_shell_passes() {
        let v = |w: &[&str]| Some(w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(
            split(r#"cargo run -p outbox -- record-first --scenario "lose: posting#2 → a b#1""#),
            v(&[
                "cargo",
                "run",
                "-p",
                "outbox",
                "--",
                "record-first",
                "--scenario",
                "lose: posting#2 → a b#1"
            ])
        );
        assert_eq!(
            split(r#"a 'b "c' d\ e "f\"g""#),
            v(&["a", "b \"c", "d e", "f\"g"])
        );
        assert_eq!(split(r#"x '' "" "#), v(&["x", "", ""]));
        assert_eq!(split("a 'open"), None);
        assert_eq!(split("a $HOME"), None);
        assert_eq!(split("a; b"), None);
    }
}
