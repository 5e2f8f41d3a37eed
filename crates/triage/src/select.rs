//! Which run a command works on.
//!
//! * `--run ID`: that run. It must exist here: a checkpoint, or a world
//!   without one (a run killed before its first save, adopted under its ID;
//!   or a run that lost its checkpoint, refused). It must belong to `--task`
//!   if one is given; an ID that could leave the directory is refused.
//! * `--task NAME`: the task's one unfinished run — a checkpoint in any
//!   phase but `done`, or a world without a checkpoint — and an error
//!   listing them if it has several. With none, its most recent finished
//!   run, reported without calling anything, so "the same command again"
//!   after a run finished (or was killed after its final save) never pays
//!   for the job twice. A new run only when the task has no run here, or
//!   with `--new-run` (refused while the task has an unfinished run).
//!
//! A checkpoint of the task that cannot be read, or a world of the task
//! whose checkpoint is lost, is an error: it may be the unfinished run, and
//! it is never silently replaced.

use std::fs;
use std::time::{SystemTime, UNIX_EPOCH};

use agent::state::{Checkpoint, Phase};
use durable::RunId;

use crate::adopt;
use crate::exit::Failure;
use crate::files;
use crate::world::{Collected, Meta, StateDir, World};

/// Which run the command works on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The task has no run to continue or report here (or `--new-run`):
    /// start a new one.
    New,
    /// Continue (or, if done, report) this run, which has a checkpoint.
    Existing(RunId),
    /// The task's most recent run, done, picked without `--run` because the
    /// task has no unfinished run: report it, calling nothing.
    Finished(RunId),
    /// This run has a world and no checkpoint: it was killed before its
    /// first save. Continue it under its own ID (the same keys), saving its
    /// first checkpoint now.
    Adopt(RunId),
}

/// What the command asked for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wanted<'a> {
    /// `--task NAME`.
    pub task: Option<&'a str>,
    /// `--run ID`.
    pub run: Option<&'a str>,
    /// `--new-run`.
    pub new_run: bool,
}

impl StateDir {
    /// Pick the run to work on (see the module's rules). Call it under
    /// [`StateDir::lock`] with what [`StateDir::collect`] found; without
    /// it (`None`), before the lock, it only checks that `--run ID` exists,
    /// judging no world.
    pub fn select(
        &self,
        wanted: Wanted<'_>,
        collected: Option<&Collected>,
    ) -> Result<Selection, Failure> {
        if let Some(id) = wanted.run {
            return self.named(wanted.task, id, collected);
        }
        let Some(task) = wanted.task else {
            return Err(Failure::usage(
                "usage",
                "--task NAME or --run ID is required",
            ));
        };
        let empty = Collected::default();
        let c = collected.unwrap_or(&empty);
        let belongs = |run: &RunId, meta: Option<&Meta>| match meta {
            Some(meta) => meta.task == task,
            // A run whose metadata is missing or unreadable still counts as
            // the task's if its ID says so: better a clear error about its
            // world than a silent fresh start beside it.
            None => run
                .as_str()
                .strip_prefix(task)
                .is_some_and(|rest| rest.starts_with('-')),
        };
        // (run, what it is, whether it has no checkpoint)
        let mut unfinished: Vec<(RunId, String, bool)> = Vec::new();
        let runs = self.runs()?;
        for run in &c.starting {
            // A run whose first checkpoint appeared since the clean-up is
            // counted below, by its checkpoint.
            if !runs.contains(run) && belongs(run, self.meta(run).ok().flatten().as_ref()) {
                unfinished.push((run.clone(), "starting".to_owned(), true));
            }
        }
        for run in &c.unsaved {
            if runs.contains(run) || !belongs(run, self.meta(run).ok().flatten().as_ref()) {
                continue;
            }
            self.adoptable(run)?;
            unfinished.push((run.clone(), "killed before its first save".to_owned(), true));
        }
        let mut done: Vec<(u64, SystemTime, RunId)> = Vec::new();
        for run in runs {
            let meta = self.meta(&run).ok().flatten();
            if !belongs(&run, meta.as_ref()) {
                continue;
            }
            let unreadable = |f: Failure| {
                f.hint(format!(
                    "it belongs to task {task:?} and may be its unfinished run; \
                     the file was left as it is: inspect or move it away, \
                     or name another run with --run"
                ))
            };
            let path = self.checkpoint_path(&run);
            if !files::regular("the checkpoint", &path).map_err(unreadable)? {
                continue; // removed since the listing
            }
            match Checkpoint::load(self.dir().as_ref(), &run) {
                Ok(Some(state)) if state.phase == Phase::Done => {
                    let saved = fs::symlink_metadata(&path)
                        .and_then(|m| m.modified())
                        .unwrap_or(UNIX_EPOCH);
                    done.push((meta.map_or(0, |m| m.started), saved, run));
                }
                Ok(Some(state)) => unfinished.push((run, state.phase.to_string(), false)),
                Ok(None) => {}
                Err(e) => return Err(unreadable(Failure::from(e))),
            }
        }
        let listed = |runs: &[(RunId, String, bool)]| {
            runs.iter()
                .map(|(r, p, _)| format!("{r} ({p})"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if wanted.new_run {
            if unfinished.is_empty() {
                return Ok(Selection::New);
            }
            return Err(Failure::usage(
                "unfinished_run",
                format!(
                    "--new-run: task {task:?} has an unfinished run in {}: {}",
                    self.path().display(),
                    listed(&unfinished)
                ),
            )
            .hint(
                "continue it: the same command without --new-run (or name it with --run); \
                 --new-run starts a run only when every run of the task is done",
            ));
        }
        match unfinished.len() {
            0 => Ok(done
                .into_iter()
                .max()
                .map_or(Selection::New, |(_, _, run)| Selection::Finished(run))),
            1 => {
                let (run, _, unsaved) = unfinished.remove(0);
                Ok(if unsaved {
                    Selection::Adopt(run)
                } else {
                    Selection::Existing(run)
                })
            }
            n => Err(Failure::usage(
                "several_runs",
                format!(
                    "task {task:?} has {n} unfinished runs in {}",
                    self.path().display()
                ),
            )
            .hint(format!("pick one with --run: {}", listed(&unfinished)))),
        }
    }

    /// `--run ID`.
    fn named(
        &self,
        task: Option<&str>,
        id: &str,
        collected: Option<&Collected>,
    ) -> Result<Selection, Failure> {
        let run = RunId::parse(id).map_err(Failure::from)?;
        let has_checkpoint = files::regular("the checkpoint", &self.checkpoint_path(&run))?;
        if !has_checkpoint && !self.has_world(&run)? {
            let mut known = self.runs()?;
            known.extend(self.worlds()?);
            known.sort();
            known.dedup();
            let hint = if known.is_empty() {
                format!("{} holds no runs", self.path().display())
            } else {
                format!(
                    "runs here: {}",
                    known
                        .iter()
                        .map(RunId::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(Failure::usage(
                "no_such_run",
                format!("no run {run} in {}", self.path().display()),
            )
            .hint(hint));
        }
        if let Some(task) = task {
            if let Some(meta) = self.meta(&run)? {
                if meta.task != task {
                    return Err(Failure::usage(
                        "wrong_task",
                        format!("run {run} runs task {:?}, not {task:?}", meta.task),
                    )
                    .hint("leave out --task, or pass the run's own task"));
                }
            }
        }
        if has_checkpoint {
            return Ok(Selection::Existing(run));
        }
        // A world without a checkpoint. Judged under the state lock only,
        // and only if no process holds it (taking its lock then says
        // "locked").
        if let Some(c) = collected {
            if !c.starting.contains(&run) {
                self.adoptable(&run)?;
            }
        }
        Ok(Selection::Adopt(run))
    }

    /// A world without a checkpoint may be adopted only if it is whole and
    /// shows no sign that its run got past its first save: the world, or
    /// why not. Call it while no process holds the run's lock.
    pub fn adoptable(&self, run: &RunId) -> Result<World, Failure> {
        let world = self.open_world(run).map_err(|f| match f.hint {
            Some(_) => f,
            None => f.hint(format!(
                "run {run} has no checkpoint, so this world is all there is of it; it was left \
                 as it is: repair it, or move {} away and rerun",
                self.world_path(run).display()
            )),
        })?;
        let signs = adopt::signs_of_progress(&world)?;
        if signs.is_empty() {
            Ok(world)
        } else {
            Err(adopt::lost_checkpoint(self, run, &signs))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::{Catalog, Task};

    fn task() -> Task {
        Catalog::BuiltIn.all().unwrap().remove(0)
    }

    fn by_task(task: &str) -> Wanted<'_> {
        Wanted {
            task: Some(task),
            ..Wanted::default()
        }
    }

    fn by_run<'a>(task: Option<&'a str>, run: &'a str) -> Wanted<'a> {
        Wanted {
            task,
            run: Some(run),
            new_run: false,
        }
    }

    fn select(sd: &StateDir, wanted: Wanted<'_>) -> Result<Selection, Failure> {
        let c = sd.collect()?;
        sd.select(wanted, Some(&c))
    }

    #[test]
    fn worlds_are_whole_and_selection_follows_the_rules() {
        let tmp = tempfile::tempdir().unwrap();
        let sd = StateDir::open(&tmp.path().join("state")).unwrap();
        let t = task();
        assert_eq!(select(&sd, by_task(&t.name)).unwrap(), Selection::New);

        let run = RunId::generate(&t.name, SystemTime::now());
        let w = sd.create_world(&run, &t).unwrap();
        assert!(w.workspace().is_dir());
        for rel in t.workspace.keys() {
            assert!(w.workspace().join(rel).is_file(), "{rel}");
        }
        assert!(
            sd.create_world(&run, &t).is_err(),
            "never over an existing world"
        );
        let names: Vec<_> = fs::read_dir(sd.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "no temp directory left: {names:?}");

        // A world without a checkpoint is a run killed before its first
        // save: adopted, by --task and by --run, and kept by the clean-up.
        assert_eq!(
            select(&sd, by_task(&t.name)).unwrap(),
            Selection::Adopt(run.clone())
        );
        assert_eq!(
            select(&sd, by_run(None, run.as_str())).unwrap(),
            Selection::Adopt(run.clone())
        );
        assert!(sd.world_path(&run).is_dir());
        // ... but not a run to start beside: --new-run is refused.
        let new = Wanted {
            new_run: true,
            ..by_task(&t.name)
        };
        assert_eq!(select(&sd, new).unwrap_err().kind, "unfinished_run");

        let opened = Checkpoint::open(sd.dir(), &run, durable::Options::default()).unwrap();
        drop(opened);
        assert_eq!(
            select(&sd, by_task(&t.name)).unwrap(),
            Selection::Existing(run.clone())
        );
        assert_eq!(select(&sd, by_task("other")).unwrap(), Selection::New);
        assert_eq!(
            select(&sd, by_run(None, run.as_str())).unwrap(),
            Selection::Existing(run.clone())
        );
        assert_eq!(
            select(&sd, by_run(Some("other"), run.as_str()))
                .unwrap_err()
                .kind,
            "wrong_task"
        );
        assert_eq!(
            select(&sd, by_run(None, "../x")).unwrap_err().kind,
            "invalid_run_id"
        );
        assert_eq!(
            select(&sd, by_run(None, "nope")).unwrap_err().kind,
            "no_such_run"
        );

        let reopened = sd.open_world(&run).unwrap();
        assert_eq!(reopened.meta.task, t.name);
        assert_eq!(reopened.task.text, t.text);

        // A second unfinished run makes the choice ambiguous.
        let run2 = RunId::generate(&t.name, SystemTime::now());
        sd.create_world(&run2, &t).unwrap();
        drop(Checkpoint::open(sd.dir(), &run2, durable::Options::default()).unwrap());
        let e = select(&sd, by_task(&t.name)).unwrap_err();
        assert_eq!(e.kind, "several_runs");
        assert!(e.hint.unwrap().contains(run2.as_str()));

        // A corrupt checkpoint of the task stops the choice.
        fs::write(sd.checkpoint_path(&run2), "{").unwrap();
        assert_eq!(
            select(&sd, by_task(&t.name)).unwrap_err().kind,
            "corrupt_checkpoint"
        );
        assert_eq!(fs::read_to_string(sd.checkpoint_path(&run2)).unwrap(), "{");
    }

    #[test]
    fn a_world_whose_checkpoint_is_lost_is_refused_not_adopted() {
        let tmp = tempfile::tempdir().unwrap();
        let sd = StateDir::open(&tmp.path().join("state")).unwrap();
        let t = task();
        let run = RunId::generate(&t.name, SystemTime::now());
        let w = sd.create_world(&run, &t).unwrap();
        adopt::mark_saved(&w.path, &run).unwrap();
        for wanted in [by_task(&t.name), by_run(None, run.as_str())] {
            let e = select(&sd, wanted).unwrap_err();
            assert_eq!(e.kind, "checkpoint_lost", "{wanted:?}");
        }
        // Before the lock, --run only checks that the run exists.
        assert_eq!(
            sd.select(by_run(None, run.as_str()), None).unwrap(),
            Selection::Adopt(run.clone())
        );
        assert!(sd.world_path(&run).join(adopt::SAVED_MARK).is_file());
    }
}
