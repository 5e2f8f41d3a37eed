//! Points inside tokio tasks on a multi-thread runtime. A task spawned
//! with plain `tokio::spawn` runs on a worker thread that carries no scope:
//! its points cannot be crashed, and the sweep reports them as unscoped
//! hits (in `Report::unscoped` and a warning line of the command line). A
//! task spawned with `crashpoint::task::spawn_task` carries the life's scope, so
//! its points are swept like any other.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use sweep::{Counter, LifeError, Subject, Verdict};

/// One delivery, made by a task on a multi-thread runtime.
struct Deliver {
    /// Spawn the task with `crashpoint::task::spawn_task` (else `tokio::spawn`).
    scoped: bool,
}

async fn deliver(delivered: Arc<AtomicU32>) {
    crashpoint::point!("in task");
    delivered.fetch_add(1, Ordering::SeqCst);
}

impl Subject for Deliver {
    type World = Arc<AtomicU32>;
    fn name(&self) -> String {
        if self.scoped {
            "spawn_task"
        } else {
            "tokio::spawn"
        }
        .into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("missing").required()]
    }
    fn world(&self) -> Result<Arc<AtomicU32>, sweep::LifeError> {
        Ok(Arc::default())
    }
    fn life(&self, delivered: &mut Arc<AtomicU32>) -> Result<(), LifeError> {
        crashpoint::point!("started");
        if delivered.load(Ordering::SeqCst) > 0 {
            return Ok(());
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()?;
        let d = Arc::clone(delivered);
        let scoped = self.scoped;
        rt.block_on(async move {
            if scoped {
                crashpoint::task::join_task(crashpoint::task::spawn_task(deliver(d))).await;
                Ok(())
            } else {
                tokio::spawn(deliver(d)).await.map_err(|e| e.to_string())
            }
        })?;
        Ok(())
    }
    fn judge(&self, delivered: &Arc<AtomicU32>) -> Verdict {
        let missing = u64::from(delivered.load(Ordering::SeqCst) == 0);
        Verdict::new().count("missing", missing)
    }
}

/// A stray pass counts for every sweep alive at the time: the two sweeps
/// must not overlap.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
fn a_plain_tokio_spawn_on_a_multi_thread_runtime_is_reported_as_unscoped() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Only warned: the refusal is off.
    let config = sweep::Config {
        refuse_unscoped: false,
        ..sweep::Config::default()
    };
    let report = sweep::run(&Deliver { scoped: false }, &config).unwrap();
    // The task's point was passed, but outside the life's scope.
    // The runtime's workers belong to no sweep: a stray pass.
    let in_task = report.stray.iter().find(|(name, _)| name == "in task");
    assert!(in_task.is_some_and(|(_, n)| *n > 0), "{:?}", report.stray);
    // So no scenario crashes there: only `started` is swept.
    assert!(report
        .scenarios
        .iter()
        .all(|s| s.scenario.hits.iter().all(|h| h.point != "in task")));
    assert_eq!(report.row().depth_counts, vec![1, 1]);
    // The command line's warning names the point and the fix.
    let (lines, _) =
        sweep::cli::failure_lines(std::slice::from_ref(&report), &|_, _| String::new());
    let warning = lines
        .iter()
        .find(|l| {
            l.starts_with("warning: tokio::spawn: crash points passed on threads without a scope")
        })
        .unwrap_or_else(|| panic!("no warning in {lines:?}"));
    assert!(
        warning.contains("in task (") && warning.contains("crashpoint::task::spawn_task"),
        "{warning}"
    );
}

#[test]
fn a_task_spawned_with_spawn_task_is_swept() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let report = sweep::run(&Deliver { scoped: true }, &sweep::Config::default()).unwrap();
    assert!(report.unscoped.is_empty(), "{:?}", report.unscoped);
    assert!(
        !report.stray.iter().any(|(n, _)| n == "in task"),
        "{:?}",
        report.stray
    );
    // The crash at the task's point fired (a scenario whose crash does not
    // fire fails), the restart delivered, and nothing is missing.
    let crashed_in_task = report
        .scenarios
        .iter()
        .find(|s| s.scenario.to_string() == "in task#1")
        .expect("a scenario crashes inside the task");
    assert_eq!(crashed_in_task.failure, None);
    assert_eq!(report.failures().count(), 0);
    assert_eq!(report.row().depth_counts[0], 2, "started#1 and in task#1");
}

/// By default the same sweep is refused, naming the task's point and the
/// fix. (Before, it returned `Ok` and only the command line warned.)
#[test]
fn a_plain_tokio_spawn_refuses_the_sweep_by_default() {
    // Alone: a pass counts for the sweep whose lives alone run at the time.
    if !crate::alone("async_tasks::a_plain_tokio_spawn_refuses_the_sweep_by_default") {
        return;
    }
    let e = sweep::run(&Deliver { scoped: false }, &sweep::Config::default()).unwrap_err();
    let sweep::Error::Unscoped { subject, points } = &e else {
        panic!("expected Unscoped, got {e}");
    };
    assert_eq!(subject, "tokio::spawn");
    assert!(points.iter().any(|(n, _)| n == "in task"), "{points:?}");
    assert!(
        e.to_string().contains("crashpoint::task::spawn_task"),
        "{e}"
    );
}
