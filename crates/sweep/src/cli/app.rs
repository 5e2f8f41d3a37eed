//! The [`App`]: a command line over a list of subjects — its flags parsed,
//! `--list` and `merge` answered, the subjects and crash states named on it
//! chosen, and the rest handed to [`execute`] as a [`Plan`].

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use super::execute::{execute, Plan};
use super::output::{failure_lines, merge_files, render};
use super::{args, Env, EXIT_FAILED, EXIT_PASSED, EXIT_USAGE};
use crate::crash_state::CrashState;
use crate::dyn_subject::DynSubject;
use crate::scenario::Scenario;

struct Entry {
    subject: Box<dyn DynSubject>,
    /// The state given with [`App::subject_in`], a label.
    label: Option<String>,
}

impl Entry {
    /// The states `--list` shows and `--crash-state` picks from: the label,
    /// or the subject's own states.
    fn states(&self) -> Vec<String> {
        match &self.label {
            Some(l) => vec![l.clone()],
            None => self
                .subject
                .crash_states()
                .iter()
                .map(ToString::to_string)
                .collect(),
        }
    }
}

/// A command line over a list of subjects; see the [module docs](crate::cli).
pub struct App {
    command: String,
    entries: Vec<Entry>,
    snapshot: Option<PathBuf>,
}

/// A name as typed on a command line: lower case, words joined by `-`.
pub fn slug(name: &str) -> String {
    let mut s = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() {
            s.extend(c.to_lowercase());
        } else if !s.ends_with('-') && !s.is_empty() {
            s.push('-');
        }
    }
    s.trim_end_matches('-').to_owned()
}

impl App {
    /// A command line whose rerun hints start with `command` (how a user
    /// runs this binary, e.g. `cargo run -p outbox --`).
    pub fn new(command: &str) -> App {
        App {
            command: command.to_owned(),
            entries: Vec::new(),
            snapshot: None,
        }
    }

    /// Add a subject, swept in its own crash states (see the
    /// [module docs](crate::cli#crash-states)).
    pub fn subject(mut self, subject: impl DynSubject + 'static) -> App {
        self.entries.push(Entry {
            subject: Box::new(subject),
            label: None,
        });
        self
    }

    /// Add a subject built for one crash state, under `state` as a label for
    /// `--crash-state` and `--list` (it is swept in its own default states).
    pub fn subject_in(mut self, state: &str, subject: impl DynSubject + 'static) -> App {
        self.entries.push(Entry {
            subject: Box::new(subject),
            label: Some(state.to_owned()),
        });
        self
    }

    /// Compare the table of a run as registered with this file.
    pub fn snapshot(mut self, path: impl Into<PathBuf>) -> App {
        self.snapshot = Some(path.into());
        self
    }

    /// Parse this process's arguments, run, and exit with the documented code.
    pub fn main(self) -> ExitCode {
        let env = Env::from_process();
        let code = self.run(
            std::env::args_os(),
            &env,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        );
        ExitCode::from(code)
    }

    /// Run with `args` (the program's name first) and `env`; returns the
    /// exit code.
    pub fn run<I, T>(&self, args: I, env: &Env, out: &mut dyn Write, err: &mut dyn Write) -> u8
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let parsed = match args::AppArgs::try_parse_from(args) {
            Ok(p) => p,
            Err(e) => {
                let code = if e.use_stderr() {
                    EXIT_USAGE
                } else {
                    EXIT_PASSED
                };
                let text = e.render().to_string();
                let _ = if e.use_stderr() {
                    write!(err, "{text}")
                } else {
                    write!(out, "{text}")
                };
                return code;
            }
        };
        match self.dispatch(&parsed, env, out, err) {
            Ok(code) => code,
            Err(msg) => {
                let _ = writeln!(err, "error: {msg}");
                EXIT_USAGE
            }
        }
    }

    fn dispatch(
        &self,
        a: &args::AppArgs,
        env: &Env,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Result<u8, String> {
        let slugs: Vec<String> = self
            .entries
            .iter()
            .map(|e| slug(&e.subject.name()))
            .collect();
        for (i, s) in slugs.iter().enumerate() {
            if slugs[..i].contains(s) {
                return Err(format!(
                    "two subjects are named {s:?}: give each its own name"
                ));
            }
        }
        if let Some(args::Action::Merge { files, format }) = &a.action {
            let merged = merge_files(files).map_err(|e| e.to_string())?;
            let _ = write!(out, "{}", render(&merged, *format, false));
            let rerun = |i: usize, sc: &Scenario| {
                let name = merged.get(i).map_or_else(String::new, |r| slug(&r.subject));
                self.rerun_command(&name, sc)
            };
            let (lines, failed) = failure_lines(&merged, &rerun);
            for l in lines {
                let _ = writeln!(err, "{l}");
            }
            return Ok(if failed > 0 { EXIT_FAILED } else { EXIT_PASSED });
        }
        let entry_states: Vec<Vec<String>> = self.entries.iter().map(Entry::states).collect();
        let mut states: Vec<&str> = Vec::new();
        for s in entry_states.iter().flatten() {
            if !states.contains(&s.as_str()) {
                states.push(s);
            }
        }
        if a.list {
            let _ = writeln!(out, "subjects (NAME, crash states, row title):");
            let width = slugs.iter().map(String::len).max().unwrap_or(0);
            let shown: Vec<String> = self
                .entries
                .iter()
                .zip(&entry_states)
                .map(|(e, st)| {
                    let defaults = e.subject.default_crash_states();
                    // (A labelled entry has one state, its label.)
                    if defaults.len() < st.len() {
                        let d: Vec<String> = defaults.iter().map(ToString::to_string).collect();
                        format!("{} (default {})", st.join(","), d.join(","))
                    } else {
                        st.join(",")
                    }
                })
                .collect();
            let sw = shown.iter().map(String::len).max().unwrap_or(0).max(10);
            for ((e, s), st) in self.entries.iter().zip(&slugs).zip(&shown) {
                let _ = writeln!(out, "  {s:width$}  {st:sw$}  {}", e.subject.name());
            }
            let _ = writeln!(out, "crash states: {}", states.join(", "));
            return Ok(EXIT_PASSED);
        }
        let mut asked: Vec<CrashState> = Vec::new();
        for s in &a.crash_state {
            if !states.contains(&s.as_str()) {
                return Err(format!(
                    "--crash-state {s}: no subject has it (the states are {})",
                    states.join(", ")
                ));
            }
            asked.push(CrashState::new(s.clone()).map_err(|e| format!("--crash-state: {e}"))?);
        }
        let mut chosen: Vec<usize> = Vec::new();
        for name in &a.subjects {
            let want = slug(name);
            let Some(i) = slugs.iter().position(|s| *s == want) else {
                return Err(format!(
                    "no subject is named {name:?} (the subjects are {}; see --list)",
                    slugs.join(", ")
                ));
            };
            if !chosen.contains(&i) {
                chosen.push(i);
            }
        }
        if chosen.is_empty() {
            chosen = (0..self.entries.len()).collect();
        }
        chosen.retain(|&i| {
            a.crash_state.is_empty() || entry_states[i].iter().any(|s| a.crash_state.contains(s))
        });
        if chosen.is_empty() {
            return Err(
                "no subject is left to sweep: the names and --crash-state exclude every one".into(),
            );
        }
        let as_registered = a.subjects.is_empty()
            && a.crash_state.is_empty()
            && a.flags.depth.is_none()
            && a.flags.partition.is_none();
        let rerun = |i: usize, sc: &Scenario| {
            let name = chosen
                .get(i)
                .map_or_else(String::new, |&j| slugs[j].clone());
            self.rerun_command(&name, sc)
        };
        let plan = Plan {
            subjects: chosen.iter().map(|&i| &*self.entries[i].subject).collect(),
            snapshot: self.snapshot.clone().filter(|_| as_registered),
            required: Vec::new(),
            crash_states: asked,
            default_depth: 2,
            rerun: &rerun,
        };
        Ok(execute(&plan, &a.flags, env, out, err))
    }

    fn rerun_command(&self, slug: &str, sc: &Scenario) -> String {
        format!("{} {slug} --scenario \"{sc}\"", self.command)
    }
}

/// [`App`] over `subjects`, in one call: `sweep::cli::main("cargo run --", vec![Box::new(a), Box::new(b)])`.
pub fn main(command: &str, subjects: Vec<Box<dyn DynSubject>>) -> ExitCode {
    let mut app = App::new(command);
    for s in subjects {
        app.entries.push(Entry {
            subject: s,
            label: None,
        });
    }
    app.main()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_join_words_with_one_dash_and_no_dash_at_either_end() {
        assert_eq!(slug("Hasty  transfer!"), "hasty-transfer");
        assert_eq!(slug("(keys) + markers"), "keys-markers");
        assert_eq!(slug("lose: posting#2"), "lose-posting-2");
        assert_eq!(slug("--"), "");
    }
}
