//! Points in async programs on tokio: a current-thread runtime needs
//! nothing; on a multi-thread runtime a spawned task's points are lost
//! unless the task is wrapped in `crashpoint::task::scoped` (or spawned with
//! `spawn_task`, feature `tokio`). During a sweep those lost points are
//! reported as unscoped hits (sweep's `tests/it/async_tasks.rs`).

use crashpoint::Hit;

async fn relay(n: u32) {
    for _ in 0..n {
        crashpoint::point!("sent");
        tokio::task::yield_now().await;
        crashpoint::point!("recorded");
    }
}

fn names(hits: &[Hit]) -> Vec<String> {
    hits.iter().map(Hit::to_string).collect()
}

const ALL: [&str; 4] = ["sent#1", "recorded#1", "sent#2", "recorded#2"];

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
}

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

#[test]
fn tasks_on_a_current_thread_runtime_are_in_the_life_scope() {
    let life = crashpoint::record(|| {
        current_thread().block_on(async {
            let task = tokio::spawn(relay(2));
            task.await.unwrap();
        })
    });
    assert_eq!(names(&life.hits), ALL);

    let crash: Hit = "sent#2".parse().unwrap();
    let life = crashpoint::crash_at(crash.clone(), || {
        current_thread().block_on(async {
            // The crash arrives as a panic inside the task: tokio hands it to
            // the join handle, and the scope knows the life died there.
            let _ = tokio::spawn(relay(2)).await;
        })
    });
    assert_eq!(life.outcome.crashed(), Some(&crash));
    assert_eq!(names(&life.hits), ALL[..2]);
}

#[test]
fn a_multi_thread_runtime_loses_the_hits_of_unwrapped_tasks() {
    let life = crashpoint::record(|| {
        multi_thread().block_on(async {
            tokio::spawn(relay(2)).await.unwrap();
        })
    });
    // What the workers passed is not in the life's scope: this is the
    // limitation `scoped` lifts.
    assert!(life.hits.is_empty(), "{:?}", names(&life.hits));
}

#[test]
fn scoped_tasks_on_a_multi_thread_runtime_follow_their_life() {
    let life = crashpoint::record(|| {
        multi_thread().block_on(async {
            tokio::spawn(crashpoint::task::scoped(relay(2)))
                .await
                .unwrap();
        })
    });
    assert_eq!(names(&life.hits), ALL);

    let crash: Hit = "recorded#1".parse().unwrap();
    let life = crashpoint::crash_at(crash.clone(), || {
        multi_thread().block_on(async {
            let _ = tokio::spawn(crashpoint::task::scoped(relay(2))).await;
        })
    });
    assert_eq!(life.outcome.crashed(), Some(&crash));
    assert_eq!(names(&life.hits), ALL[..1]);
}

#[cfg(feature = "tokio")]
#[test]
fn spawn_task_and_join_task_carry_the_scope_and_the_crash() {
    let crash: Hit = "sent#2".parse().unwrap();
    let life = crashpoint::crash_at(crash.clone(), || {
        multi_thread().block_on(async {
            crashpoint::task::join_task(crashpoint::task::spawn_task(relay(2))).await;
            // Never reached: join_task re-raised the crash here.
            crashpoint::point!("after join");
        })
    });
    assert_eq!(life.outcome.crashed(), Some(&crash));
    assert_eq!(names(&life.hits), ALL[..2]);
    assert!(matches!(life.outcome, crashpoint::Outcome::Crashed(_)));
}
