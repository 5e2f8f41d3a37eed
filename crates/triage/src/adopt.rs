//! A world without a checkpoint: a run killed before its first save, which
//! the next start adopts, or a run that lost its checkpoint, which is
//! refused.
//!
//! A run's world is built whole and renamed into place before its first
//! checkpoint is saved, and the run saves that checkpoint before it calls
//! anything. A kill between the two leaves a world and no checkpoint. That
//! world is the run: it holds the task's seeds, and with `--tracker` the
//! seeds may already be on the service, filed under `key(run, "seed-N")`.
//! So it is never removed and never replaced by a run with a new ID (whose
//! keys would all differ): the next start *adopts* it, same run ID, same
//! keys, and saves its first checkpoint then.
//!
//! A world whose run got past its first save and then lost its checkpoint
//! (deleted, moved) looks the same from the outside, but holds what the run
//! did, and nothing records which calls were made. Starting it afresh would
//! do them again, so it is refused ([`lost_checkpoint`]), with the signs
//! that gave it away: the mark [`SAVED_MARK`] that a run writes into its
//! world once its first checkpoint is on disk (before its first call), or,
//! for a world made before runs wrote that mark, a workspace or tracker
//! that no longer holds only what the task seeded ([`signs_of_progress`]).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use durable::{DiskDir, RunId};
use serde::Deserialize;

use crate::exit::Failure;
use crate::files::{self, io_failure};
use crate::world::{StateDir, World, WORKSPACE};

/// The mark, in a run's world, that the run's first checkpoint was saved:
/// written right after that save and before the run calls anything.
pub const SAVED_MARK: &str = "checkpointed";

/// The tracker's file inside a world.
const TRACKER_FILE: &str = "tracker.json";

/// Write [`SAVED_MARK`] into the world at `world` (synced, 0600), unless it
/// is there.
pub fn mark_saved(world: &Path, run: &RunId) -> Result<(), Failure> {
    let path = world.join(SAVED_MARK);
    if files::regular("the run's first-save mark", &path)? {
        return Ok(());
    }
    let dir = DiskDir::new(world).map_err(|e| io_failure("open the world", world, &e))?;
    let opts = durable::write::WriteOptions {
        sync: true,
        points: false,
    };
    let mut text = run.as_str().as_bytes().to_vec();
    text.push(b'\n');
    // A process stopped here past its lease may find its temp file removed
    // by the run's new holder when it wakes (a killed writer's leftover).
    let mut point = || {
        crashpoint::point!("first-save mark: before rename");
        Ok(())
    };
    durable::write::write_atomic_checked(&dir, SAVED_MARK, &text, opts, &mut point)
        .map_err(|e| io_failure("write the first-save mark", &path, &e))
}

/// The issues of a world's `tracker.json`; the rest of the file is the
/// tracker's business.
#[derive(Deserialize)]
struct TrackerIssues {
    issues: Vec<tracker::Issue>,
}

/// What in a world without a checkpoint shows that its run got past its
/// first save: [`SAVED_MARK`], a workspace file the task did not seed (or
/// seeded with other content, or that is gone), a temp file a killed writer
/// left, a tracker that holds more than the task's seed issues. Empty: the
/// world holds only what the task seeded, and adopting it repeats nothing.
pub fn signs_of_progress(world: &World) -> Result<Vec<String>, Failure> {
    let mut signs = Vec::new();
    if files::regular("the run's first-save mark", &world.path.join(SAVED_MARK))? {
        signs.push(format!("{SAVED_MARK} marks its first save as done"));
    }
    // The workspace: exactly the seeded files with their seeded contents.
    let mut found = BTreeMap::new();
    workspace_files(&world.workspace(), "", &mut found, &mut signs)?;
    for (rel, seeded) in &world.task.workspace {
        match found.remove(rel) {
            None => signs.push(format!("{WORKSPACE}/{rel} is gone")),
            Some(bytes) if bytes != seeded.as_bytes() => {
                signs.push(format!("{WORKSPACE}/{rel} differs from the task's"));
            }
            Some(_) => {}
        }
    }
    for rel in found.keys() {
        signs.push(format!("{WORKSPACE}/{rel} is not one the task seeded"));
    }
    // The tracker: exactly the seed issues, no comments, no write in flight.
    // (A temp file of the tracker or of the mark is a write in flight; one
    // of `tracker-seeded` is only the seeding, which adopting repeats
    // safely.)
    for name in world_names(&world.path)? {
        let of = |target: &str| name.starts_with(&format!(".{target}-"));
        if files::is_write_temp(&name) && (of(TRACKER_FILE) || of(SAVED_MARK)) {
            signs.push(format!("{name} is left from a killed write"));
        }
    }
    let path = world.path.join(TRACKER_FILE);
    if let Some(bytes) = files::read_regular("the run's tracker", &path)? {
        match serde_json::from_slice::<TrackerIssues>(&bytes) {
            Err(e) => signs.push(format!("{TRACKER_FILE} cannot be read ({e})")),
            Ok(t) => {
                let seeds = &world.task.tracker;
                let same = t.issues.len() == seeds.len()
                    && t.issues
                        .iter()
                        .zip(seeds)
                        .all(|(i, s)| i.title == s.title && i.body == s.body);
                if !same {
                    signs.push(format!(
                        "{TRACKER_FILE} holds {} where the task seeds {}",
                        crate::output::plural(t.issues.len(), "issue"),
                        seeds.len()
                    ));
                }
                let comments: usize = t.issues.iter().map(|i| i.comments.len()).sum();
                if comments > 0 {
                    signs.push(format!(
                        "{TRACKER_FILE} holds {}",
                        crate::output::plural(comments, "comment")
                    ));
                }
            }
        }
    }
    Ok(signs)
}

/// The names in a directory (not UTF-8: skipped, not ours).
fn world_names(dir: &Path) -> Result<Vec<String>, Failure> {
    let entries = fs::read_dir(dir).map_err(|e| io_failure("list", dir, &e))?;
    let mut names = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| io_failure("list", dir, &e))?;
        if let Ok(name) = entry.file_name().into_string() {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Every regular file under `dir` (relative to the workspace, `prefix`
/// leading), with its bytes; anything that is neither a file nor a
/// directory is a sign.
fn workspace_files(
    dir: &Path,
    prefix: &str,
    found: &mut BTreeMap<String, Vec<u8>>,
    signs: &mut Vec<String>,
) -> Result<(), Failure> {
    for name in world_names(dir)? {
        let path = dir.join(&name);
        let rel = format!("{prefix}{name}");
        let meta = match fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io_failure("look at", &path, &e)),
        };
        if meta.is_dir() {
            workspace_files(&path, &format!("{rel}/"), found, signs)?;
        } else if meta.is_file() {
            if let Some(bytes) = files::read_regular("the workspace file", &path)? {
                found.insert(rel, bytes);
            }
        } else {
            signs.push(format!(
                "{WORKSPACE}/{rel} is {}",
                files::kind_of(meta.file_type())
            ));
        }
    }
    Ok(())
}

/// The refusal of a world whose run got past its first save and whose
/// checkpoint is gone: exit 5, naming the world, the signs and what to do.
pub fn lost_checkpoint(sd: &StateDir, run: &RunId, signs: &[String]) -> Failure {
    let world = sd.world_path(run);
    let checkpoint = sd.checkpoint_path(run);
    Failure::run(
        "checkpoint_lost",
        format!(
            "run {run} has no checkpoint, but its world {} shows it got past its first save: {}; \
             the world holds what the run did, so it is neither removed nor started afresh",
            world.display(),
            signs.join("; ")
        ),
    )
    .hint(format!(
        "restore its checkpoint {} to continue it; or move the world {} away (keep it: it \
         records what the run did) and rerun, which starts the task as a new run",
        checkpoint.display(),
        world.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Catalog;
    use std::time::SystemTime;

    #[test]
    fn a_fresh_world_shows_no_progress_and_each_change_is_a_sign() {
        let tmp = tempfile::tempdir().unwrap();
        let sd = StateDir::open(&tmp.path().join("state")).unwrap();
        let task = Catalog::BuiltIn
            .all()
            .unwrap()
            .into_iter()
            .find(|t| !t.tracker.is_empty() && !t.workspace.is_empty())
            .unwrap();
        let run = RunId::generate(&task.name, SystemTime::now());
        let world = sd.create_world(&run, &task).unwrap();
        assert_eq!(signs_of_progress(&world).unwrap(), Vec::<String>::new());

        let (rel, _) = task.workspace.iter().next().unwrap();
        let file = world.workspace().join(rel);
        let seeded = fs::read(&file).unwrap();
        fs::write(&file, "patched").unwrap();
        let signs = signs_of_progress(&world).unwrap();
        assert_eq!(signs, [format!("workspace/{rel} differs from the task's")]);
        fs::write(&file, &seeded).unwrap();

        fs::write(world.workspace().join("new.rs"), "x").unwrap();
        let signs = signs_of_progress(&world).unwrap();
        assert_eq!(signs, ["workspace/new.rs is not one the task seeded"]);
        fs::remove_file(world.workspace().join("new.rs")).unwrap();

        let t =
            tracker::Tracker::open_existing(world.dir().unwrap(), tracker::Mode::Keyed).unwrap();
        t.comment(1, "a note", None).unwrap();
        let signs = signs_of_progress(&world).unwrap();
        assert_eq!(signs, ["tracker.json holds 1 comment"]);
        t.file_issue("another", "body", None).unwrap();
        let signs = signs_of_progress(&world).unwrap();
        assert!(signs[0].starts_with("tracker.json holds "), "{signs:?}");
        assert!(signs[0].ends_with(&format!("where the task seeds {}", task.tracker.len())));

        mark_saved(&world.path, &run).unwrap();
        mark_saved(&world.path, &run).unwrap();
        let signs = signs_of_progress(&world).unwrap();
        assert_eq!(signs[0], "checkpointed marks its first save as done");
        let e = lost_checkpoint(&sd, &run, &signs);
        assert_eq!(e.kind, "checkpoint_lost");
        assert!(e.message.contains(&world.path.display().to_string()));
        assert!(e.hint.unwrap().contains("move the world"));
    }
}
