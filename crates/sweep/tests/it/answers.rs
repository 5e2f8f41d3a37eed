//! Answers that must be true whatever else the process runs: a failure
//! that repeats is not flaky, a thread left running is the program's
//! fault, a world that cannot be compared is said so, and a judge's points
//! are counted.

use std::sync::atomic::{AtomicU64, Ordering};

use sweep::{report::Failure, Config, Counter, Error, Subject, Verdict};

fn cfg(depth: u32) -> Config {
    Config {
        depth,
        ..Config::default()
    }
}

/// Its world is a temporary directory; every restart fails, naming it.
struct FailsNamingItsDir;
impl Subject for FailsNamingItsDir {
    type World = (tempfile::TempDir, u64);
    fn name(&self) -> String {
        "fails naming its directory".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![]
    }
    fn world(&self) -> Result<Self::World, sweep::LifeError> {
        Ok((tempfile::tempdir()?, 0))
    }
    fn life(&self, w: &mut Self::World) -> Result<(), sweep::LifeError> {
        w.1 += 1;
        if w.1 > 1 {
            let path = w.0.path().join("r.lock");
            return Err(format!("run is locked by another process: {}", path.display()).into());
        }
        crashpoint::point!("saved");
        Ok(())
    }
    fn judge(&self, _: &Self::World) -> Verdict {
        Verdict::new()
    }
}

/// Two failures that differ only in the world's temporary path are one
/// repeatable failure, not a flaky one. (Before: flaky.)
#[test]
fn a_failure_naming_the_worlds_temporary_path_is_not_flaky() {
    let r = sweep::run(&FailsNamingItsDir, &cfg(1)).unwrap();
    assert_eq!(r.flaky().count(), 0, "{:?}", r.scenarios);
    let failed: Vec<_> = r.failures().collect();
    assert_eq!(failed.len(), 1, "{:?}", r.scenarios);
    assert!(
        matches!(&failed[0].failure, Some(Failure::Stopped { error, .. }) if error.contains("locked")),
        "{:?}",
        failed[0].failure
    );
}
