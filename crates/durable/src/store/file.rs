//! The file store: one file per run in a [`Dir`], the lease in its first
//! line, every step one atomic rename under the run's `flock`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{millis, refused, Claim, Lease, Record, RunStore};
use crate::dir::{Dir, LockGuard};
use crate::disk::DiskDir;
use crate::error::{Error, Result};
use crate::run_id::RunId;
use crate::write::{remove_leftover_temps, write_atomic_step, WriteFail, WriteOptions};

/// How long a step waits for another step on the same run to finish with
/// the run's `flock` (each step holds it for one read and one rename).
const LOCK_WAIT: Duration = Duration::from_secs(5);

/// Runs in a directory: `<run>.run` holds the run's lease (one line of
/// JSON: epoch, owner, expiry, whether it is done) followed by its
/// checkpoint's bytes.
///
/// Each step takes the run's `flock` (`<run>.lock`) for as long as it reads
/// the file and renames a new one over it, so the check of the epoch and the
/// write are one step; a crash at any moment leaves the old file or the new
/// one. The `flock` is held only during a step: between steps the lease
/// alone says who holds the run, as it does in a database. Lease expiry
/// uses this host's clock: the file store is for one host (on a network
/// file system `flock` means different things on different clients).
#[derive(Debug)]
pub struct FileStore {
    dir: Arc<dyn Dir>,
    sync: bool,
    lock_wait: Duration,
}

/// The lease line at the head of a run's file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Head {
    epoch: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
    /// Milliseconds since the Unix epoch, this host's clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_ms: Option<i64>,
    #[serde(default)]
    done: bool,
    /// Whether a checkpoint follows the lease line.
    #[serde(default)]
    checkpoint: bool,
}

impl Head {
    fn held_by_other(&self, now: i64) -> Option<&str> {
        match (&self.owner, self.expires_ms) {
            (Some(owner), Some(expires)) if expires >= now => Some(owner),
            _ => None,
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(millis)
        .unwrap_or(0)
}

fn file_name(run: &RunId) -> String {
    format!("{run}.run")
}

impl FileStore {
    /// A store in the directory at `path`, created (0700) if missing, with
    /// synced writes.
    pub fn open(path: impl AsRef<Path>) -> Result<FileStore> {
        let path = path.as_ref();
        Ok(FileStore::new(Arc::new(DiskDir::create(path)?), true))
    }

    /// A store in `dir`; `sync: false` skips fsync (for tests and crash
    /// sweeps only, as [`Options::sync`](crate::Options::sync)).
    pub fn new(dir: Arc<dyn Dir>, sync: bool) -> FileStore {
        FileStore {
            dir,
            sync,
            lock_wait: LOCK_WAIT,
        }
    }

    /// How long a step waits for another step on the same run to let go of
    /// the run's `flock` before it fails with
    /// [`Error::Locked`](crate::Error::Locked) (default 5 s). A process
    /// paused in the middle of a step holds it all that time.
    pub fn with_lock_wait(mut self, wait: Duration) -> FileStore {
        self.lock_wait = wait;
        self
    }

    fn path(&self, run: &RunId) -> PathBuf {
        self.dir.path_of(&file_name(run))
    }

    /// Take the run's `flock`, waiting while another step holds it; with
    /// `skip`, give up at once (`None`) instead.
    fn lock(&self, run: &RunId, skip: bool) -> Result<Option<LockGuard>> {
        let name = format!("{run}.lock");
        let start = std::time::Instant::now();
        let mut pause = Duration::from_micros(50);
        loop {
            match self.dir.lock(&name) {
                Ok(guard) => return Ok(Some(guard)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if skip {
                        return Ok(None);
                    }
                    if start.elapsed() > self.lock_wait {
                        return Err(Error::Locked {
                            path: self.dir.path_of(&name),
                        });
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
                Err(e) => return Err(Error::from_io(self.dir.path_of(&name), "lock", e)),
            }
        }
    }

    fn read(&self, run: &RunId) -> Result<Option<(Head, Option<Vec<u8>>)>> {
        let name = file_name(run);
        let bytes = match self.dir.read(&name) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return Ok(None),
            Err(e) => return Err(Error::from_io(self.path(run), "read", e)),
        };
        let corrupt = |reason: String| Error::Corrupt {
            path: self.path(run),
            reason,
        };
        let Some(end) = bytes.iter().position(|b| *b == b'\n') else {
            return Err(corrupt("no lease line".to_owned()));
        };
        let head: Head = serde_json::from_slice(&bytes[..end])
            .map_err(|e| corrupt(format!("lease line: {e}")))?;
        let checkpoint = head.checkpoint.then(|| bytes[end + 1..].to_vec());
        Ok(Some((head, checkpoint)))
    }

    /// Write the run's file: `point` is passed just before the rename that
    /// commits it (`"<step>: before commit"`) and `committed` just after.
    fn write(
        &self,
        run: &RunId,
        head: &Head,
        checkpoint: Option<&[u8]>,
        point: &'static str,
        committed: &'static str,
    ) -> Result<()> {
        let mut head = head.clone();
        head.checkpoint = checkpoint.is_some();
        let mut bytes = serde_json::to_vec(&head).map_err(|e| Error::InvalidState {
            path: self.path(run),
            reason: format!("cannot serialise the lease: {e}"),
        })?;
        bytes.push(b'\n');
        bytes.extend_from_slice(checkpoint.unwrap_or_default());
        let opts = WriteOptions {
            sync: self.sync,
            points: false,
        };
        let name = file_name(run);
        write_atomic_step(self.dir.as_ref(), &name, &bytes, opts, &mut || {
            crashpoint::point!(point);
            Ok(())
        })
        .map_err(|fail| match fail {
            WriteFail::Step(op, source) => Error::from_io(self.path(run), op, source),
            WriteFail::Refused(e) => e,
        })?;
        crashpoint::point!(committed);
        Ok(())
    }

    /// The claim of a run whose `flock` is held.
    fn claim_locked(&self, run: &RunId, owner: &str, lease: Duration) -> Result<Claim> {
        remove_leftover_temps(self.dir.as_ref(), &file_name(run))
            .map_err(|e| Error::from_io(self.path(run), "remove leftover temp files", e))?;
        let now = now_ms();
        let (mut head, checkpoint) = self.read(run)?.unwrap_or_default();
        if head.done {
            return Ok(Claim::Done {
                epoch: head.epoch,
                checkpoint,
            });
        }
        if let Some(other) = head.held_by_other(now) {
            return Ok(Claim::Held {
                owner: other.to_owned(),
            });
        }
        head.epoch = head.epoch.saturating_add(1);
        head.owner = Some(owner.to_owned());
        head.expires_ms = Some(now.saturating_add(millis(lease)));
        self.write(
            run,
            &head,
            checkpoint.as_deref(),
            "claim: before commit",
            "claim: committed",
        )?;
        Ok(Claim::Won {
            lease: Lease {
                run: run.clone(),
                owner: owner.to_owned(),
                epoch: head.epoch,
            },
            checkpoint,
        })
    }

    /// Read the run under its `flock` for a step of `lease`'s holder:
    /// refused unless the run's epoch is still the lease's (and, unless
    /// `done_ok`, the run is not done).
    fn held(&self, lease: &Lease, done_ok: bool) -> Result<(Head, Option<Vec<u8>>)> {
        let found = self.read(&lease.run)?;
        match found {
            Some((head, cp)) if head.epoch == lease.epoch && (done_ok || !head.done) => {
                Ok((head, cp))
            }
            other => Err(refused(
                self.path(&lease.run),
                lease.epoch,
                other.map(|(h, _)| (h.epoch, h.done)),
            )),
        }
    }
}

impl RunStore for FileStore {
    fn add(&self, run: &RunId) -> Result<bool> {
        let _lock = self.lock(run, false)?;
        if self.read(run)?.is_some() {
            return Ok(false);
        }
        self.write(
            run,
            &Head::default(),
            None,
            "add: before commit",
            "add: committed",
        )?;
        Ok(true)
    }

    fn claim(&self, run: &RunId, owner: &str, lease: Duration) -> Result<Claim> {
        let _lock = self.lock(run, false)?;
        self.claim_locked(run, owner, lease)
    }

    fn claim_next(&self, owner: &str, lease: Duration) -> Result<Option<(Lease, Option<Vec<u8>>)>> {
        let names = self
            .dir
            .list()
            .map_err(|e| Error::from_io(self.dir.path_of(""), "list", e))?;
        for name in names {
            let Some(id) = name.strip_suffix(".run") else {
                continue;
            };
            if name.starts_with('.') {
                continue;
            }
            let Ok(run) = RunId::parse(id) else {
                continue;
            };
            // Another worker is on this run right now: skip it, as SKIP
            // LOCKED does, rather than wait.
            let Some(_lock) = self.lock(&run, true)? else {
                continue;
            };
            if let Claim::Won { lease, checkpoint } = self.claim_locked(&run, owner, lease)? {
                return Ok(Some((lease, checkpoint)));
            }
        }
        Ok(None)
    }

    fn renew(&self, lease: &Lease, lease_for: Duration) -> Result<()> {
        let _lock = self.lock(&lease.run, false)?;
        let (mut head, checkpoint) = self.held(lease, false)?;
        head.expires_ms = Some(now_ms().saturating_add(millis(lease_for)));
        self.write(
            &lease.run,
            &head,
            checkpoint.as_deref(),
            "renew: before commit",
            "renew: committed",
        )
    }

    fn save(&self, lease: &Lease, checkpoint: &[u8], done: bool) -> Result<()> {
        let _lock = self.lock(&lease.run, false)?;
        let (mut head, _) = self.held(lease, false)?;
        head.done = done;
        self.write(
            &lease.run,
            &head,
            Some(checkpoint),
            "save: before commit",
            "save: committed",
        )
    }

    fn load(&self, run: &RunId) -> Result<Option<Record>> {
        Ok(self.read(run)?.map(|(head, checkpoint)| Record {
            epoch: head.epoch,
            owner: head.owner,
            done: head.done,
            checkpoint,
        }))
    }

    fn release(&self, lease: &Lease) -> Result<()> {
        let _lock = self.lock(&lease.run, false)?;
        let (mut head, checkpoint) = self.held(lease, true)?;
        head.owner = None;
        head.expires_ms = None;
        self.write(
            &lease.run,
            &head,
            checkpoint.as_deref(),
            "release: before commit",
            "release: committed",
        )
    }

    fn path_of(&self, run: &RunId) -> PathBuf {
        self.path(run)
    }
}
