//! Restarts from the world at the hit: a process subject's opt-in to shared
//! lives ([`Share`]).
//!
//! While a life is stopped at a hit (the program blocked on its answer),
//! its world directory is copied: a crash there leaves that very world,
//! because `SIGKILL` keeps the page cache. Every scenario that crashes at
//! that hit then restarts from the copy, instead of replaying the lives
//! before it. The runner's checks for shared lives apply (see
//! [`sharing`](crate::sharing)): a sample of the captures is compared with
//! the worlds real crashes leave, and a sample of the scenarios is replayed
//! from a fresh world and must give the same result.
//!
//! A world's fingerprint is its *lineage*, the hash of how it was made
//! (each life's number and the hit it was killed at, or how it ended), and
//! what the checks compare of two worlds made the same way: a world whose
//! last life finished, its description (as the clean runs' check compares
//! it); a world a crash left, the sizes of its files (the names a crash
//! leaves may hold chance, such as a temporary file's random suffix).
//! No two scenarios share a lineage, so no scenario's result is ever taken
//! from another's: only the lives before the crash are saved.
//!
//! No copy is taken when the program has more than one thread at the hit
//! (the others could still write while it is copied), nor at any later hit
//! of a life that had more than one at an earlier hit (where the others
//! were when they ended is chance): such a scenario runs its crashed life
//! again from its parent's world. A world with a service
//! is shared only when the service restarts from its directory
//! ([`Process::crash_service`]); its directory is copied with the world and
//! a new service starts on the copy at the next life. I/O points are not
//! shared (their lives run under the tracer).

use std::cell::{Cell, RefCell};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use crashpoint::Hit;

use super::builder::Process;
use super::service::Service;
use super::world::{copy_tree, ProcessWorld};
use crate::sharing::{Capture, Fingerprint, Share};
use crate::subject::Subject;

thread_local! {
    /// The program stopped at the hit this thread relays now: its process
    /// id and its command line as shown.
    static AT_HIT: RefCell<Option<(u32, String)>> = const { RefCell::new(None) };
    /// The last program this thread relayed seen with more than one thread
    /// at a hit: its world at a later hit depends on where the others were,
    /// so its life takes no capture from then on.
    static THREADED: Cell<Option<u32>> = const { Cell::new(None) };
}

/// Clears [`AT_HIT`] when the hit is answered (or the life unwinds).
struct Clear;

impl Drop for Clear {
    fn drop(&mut self) {
        AT_HIT.with(|a| *a.borrow_mut() = None);
    }
}

/// Run `f` (the hit relayed into the life's scope) while the program `pid`
/// waits at it: a capture taken meanwhile, on this thread, copies its world.
/// `None` for a subject that never captures: no capture, and no look at
/// the program's threads.
pub(super) fn stopped_at_hit<R>(pid: Option<u32>, shown: &str, f: impl FnOnce() -> R) -> R {
    if let Some(p) = pid {
        if threads(p).is_some_and(|n| n > 1) {
            THREADED.set(Some(p));
        }
    }
    AT_HIT.with(|a| *a.borrow_mut() = pid.map(|p| (p, shown.to_owned())));
    let _clear = Clear;
    f()
}

/// The lineage of a world after life `life` ended as `how` (the hit it was
/// killed at, or its exit), on a world whose lineage was `before`.
pub(super) fn next_lineage(before: u64, life: u32, how: &str) -> u64 {
    // SipHash with fixed keys: the same in every run.
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    before.hash(&mut h);
    life.hash(&mut h);
    how.hash(&mut h);
    h.finish()
}

/// How a life killed at `hit` ended, for its lineage.
pub(super) fn killed_at(hit: &Hit) -> String {
    format!("killed at {hit}")
}

/// How many threads process `pid` has now (`None`: it cannot be told).
fn threads(pid: u32) -> Option<usize> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()
        .map(Iterator::count)
}

/// The sizes of the files under `dir`, sorted: what the checks compare of
/// two worlds made the same way in two runs. Names are left out: they may
/// hold chance (a temporary file's random suffix, a run's ID), so two
/// crashes at the same hit leave other names; the sizes they leave agree.
fn file_sizes(dir: &Path) -> Vec<u64> {
    fn walk(dir: &Path, out: &mut Vec<u64>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => walk(&e.path(), out),
                Ok(m) => out.push(m.len()),
                Err(_) => out.push(u64::MAX),
            }
        }
    }
    let mut sizes = Vec::new();
    walk(dir, &mut sizes);
    sizes.sort_unstable();
    sizes
}

/// What a world's copy needs of its subject, owned (a capture outlives the
/// borrow of the subject).
#[derive(Clone)]
struct Copier {
    worlds_in: Option<PathBuf>,
}

impl Copier {
    /// A new scratch directory holding copies of the directories under
    /// `from` (its program's, its logs, its service's), and a service
    /// (not yet running) on the copy if `service`.
    fn copy(
        &self,
        from: &Path,
        service: Option<&Service>,
    ) -> Result<(tempfile::TempDir, Option<Service>), String> {
        let root = super::builder::scratch_in(self.worlds_in.as_deref(), "crashsweep-world-")?;
        let copy = |name: &str| -> Result<(), String> {
            let (src, dst) = (from.join(name), root.path().join(name));
            copy_tree(&src, &dst).map_err(|e| format!("copying {}: {e}", src.display()))
        };
        copy("world")?;
        copy("logs")?;
        let service = match service {
            Some(s) => {
                copy("service")?;
                Some(s.stopped_copy(&root.path().join("service")))
            }
            None => None,
        };
        Ok((root, service))
    }
}

impl Process {
    /// Whether this subject's worlds can be shared (see the module docs).
    pub(super) fn restarts(&self) -> bool {
        self.io_points.is_none()
            && self.power.is_none()
            && (self.service.is_none() || self.service_points)
    }
}

impl Share<ProcessWorld> for Process {
    fn copy(&self, world: &ProcessWorld) -> Option<ProcessWorld> {
        let copier = Copier {
            worlds_in: self.worlds_in.clone(),
        };
        let (root, service) = copier
            .copy(world.root.path(), world.service.as_ref())
            .ok()?;
        Some(ProcessWorld {
            lives: world.lives,
            hits: world.hits,
            ends: world.ends.clone(),
            makers: world.makers.clone(),
            lineage: world.lineage,
            finished: world.finished,
            service,
            disk: None,
            crash_disks: None,
            root,
        })
    }

    fn fingerprint(&self, world: &ProcessWorld) -> Option<Fingerprint> {
        let fp = Fingerprint::new().observe(&world.lineage);
        // A world a life finished is compared as the clean runs' check
        // always compared it: by its description.
        Some(if world.finished {
            fp.judge(&self.describe(world))
        } else {
            fp.judge(&file_sizes(&world.dir()))
        })
    }

    fn capture(&self, world: &ProcessWorld) -> Option<Capture<ProcessWorld>> {
        let copier = Copier {
            worlds_in: self.worlds_in.clone(),
        };
        // The world as it is before the life, whose directories the life
        // changes in place: what a copy at a hit reads.
        let from: PathBuf = world.root.path().to_path_buf();
        let lives = world.lives + 1;
        let lineage = world.lineage;
        let hits = world.hits;
        let ends = world.ends.clone();
        // Who made the I/O points so far (the listing's; a sweep with I/O
        // points captures nothing, so a copy only carries them on).
        let makers = world.makers.clone();
        let service = world
            .service
            .as_ref()
            .map(|s| s.stopped_copy(Path::new("")));
        #[cfg(test)]
        let (from, _stale) = if self.stale_captures {
            let (stale, _) = copier.copy(&from, None).ok()?;
            (stale.path().to_path_buf(), Some(stale))
        } else {
            (from, None)
        };
        Some(Capture::at_hit(move |hit| {
            #[cfg(test)]
            let _ = &_stale;
            let (pid, shown) = AT_HIT.with(|a| a.borrow().clone())?;
            // One thread now, and none but one at any hit of this life
            // before: a thread that wrote and ended between two hits may
            // end elsewhere in another run.
            if threads(pid) != Some(1) || THREADED.get() == Some(pid) {
                return None;
            }
            let (root, service) = copier.copy(&from, service.as_ref()).ok()?;
            let mut copy = ProcessWorld {
                lives,
                hits,
                ends: ends.clone(),
                makers: makers.clone(),
                lineage: next_lineage(lineage, lives, &killed_at(hit)),
                finished: false,
                service,
                disk: None,
                crash_disks: None,
                root,
            };
            copy.ends.push(format!(
                "life {lives}: {shown} was killed by signal 9 (SIGKILL) at {}",
                hit.point
            ));
            Some(copy)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Error, Verdict};

    /// A shell program that pays three times, keeping its progress in
    /// `count` (a restart reads it back) and its payments in `log`:
    /// `--fixed` records each payment and its progress in one rename.
    const PAYER: &str = r#"
n=$(cat count 2>/dev/null || echo 0)
echo "hit start" >&3; read -r _ <&3
while [ "$n" -lt 3 ]; do
  n=$((n+1))
  echo "$n" >> log
  echo "hit paid" >&3; read -r _ <&3
  echo "$n" > count.tmp
  echo "hit saving" >&3; read -r _ <&3
  mv count.tmp count
done
"#;

    fn payer() -> Process {
        Process::new("payer", ["sh", "-c", PAYER])
            .judge_with(|w| {
                let log = std::fs::read_to_string(w.dir().join("log")).unwrap_or_default();
                let lines = log.lines().count() as u64;
                let mut seen: Vec<&str> = log.lines().collect();
                seen.sort_unstable();
                seen.dedup();
                Ok(Verdict::new()
                    .count("duplicates", lines - seen.len() as u64)
                    .count("missing", 3 - seen.len() as u64))
            })
            .count_only("duplicates")
            .discover()
            .expect("the payer runs")
    }

    fn config(depth: u32, share: bool) -> Config {
        Config {
            depth,
            threads: Some(2),
            share,
            ..Config::default()
        }
    }

    /// Restarts from captured worlds give the table of replays byte for
    /// byte, with fewer lives.
    #[test]
    fn restarts_from_captures_give_the_replays_table() {
        let p = payer();
        let brute = crate::run(&p, &config(2, false)).expect("replayed");
        let lives_brute = p.count.now().lives;
        let shared = crate::run(&p, &config(2, true)).expect("shared");
        let lives_shared = p.count.now().lives - lives_brute;
        assert!(shared.stats.shared, "the process sweep shares");
        assert!(!brute.stats.shared);
        assert!(
            brute
                .scenarios
                .iter()
                .any(|s| s.verdict.get("duplicates") > 0),
            "the crashes repay: {}",
            crate::table(&brute.rows())
        );
        assert_eq!(crate::table(&shared.rows()), crate::table(&brute.rows()));
        // Every scenario's verdict and failure, in the sweep's order.
        let results = |r: &crate::Report| {
            let mut v: Vec<String> = r
                .scenarios
                .iter()
                .map(|s| format!("{} {:?} {:?}", s.scenario, s.verdict, s.failure))
                .collect();
            v.sort();
            v
        };
        assert_eq!(results(&shared), results(&brute));
        assert!(
            lives_shared < lives_brute,
            "{lives_shared} lives shared, {lives_brute} replayed"
        );
    }

    /// A capture that copied the wrong world (here: the world before its
    /// life) is caught before the sweep: its world differs from the one a
    /// crash at the same hit leaves.
    #[test]
    fn a_wrong_capture_is_refused() {
        let mut p = payer();
        p.stale_captures = true;
        match crate::run(&p, &config(2, true)) {
            Err(Error::WronglyShared { detail, .. }) => {
                assert!(
                    detail.contains("differs from the world a crash there leaves"),
                    "{detail}"
                );
            }
            other => panic!(
                "a stale capture was not refused: {:?}",
                other.map(|r| r.rows())
            ),
        }
    }
}
