//! `join_task`'s three endings, for the survivors mutation testing
//! (`cargo xtask mutants crashpoint`) found: a value is handed back, a
//! task's panic is re-raised as it was, a cancelled task panics saying so.

use std::panic::{catch_unwind, AssertUnwindSafe};

fn multi_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap()
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[test]
fn join_task_hands_back_the_tasks_value_and_records_its_points() {
    let life = crashpoint::record(|| {
        multi_thread().block_on(async {
            let task = crashpoint::task::spawn_task(async {
                crashpoint::point!("in task");
                41 + 1
            });
            crashpoint::task::join_task(task).await
        })
    });
    assert_eq!(life.outcome, crashpoint::Outcome::Finished(42));
    assert_eq!(life.hits, [crashpoint::Hit::new("in task", 1)]);
}

#[test]
fn join_task_re_raises_the_tasks_own_panic() {
    let rt = multi_thread();
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async {
            let task = tokio::spawn(async {
                std::panic::panic_any(String::from("boom in task"));
            });
            crashpoint::task::join_task(task).await
        })
    }));
    assert_eq!(panic_text(r.unwrap_err().as_ref()), "boom in task");
}

#[test]
fn join_task_of_a_cancelled_task_panics_saying_so() {
    let rt = multi_thread();
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(async {
            let task = tokio::spawn(std::future::pending::<()>());
            task.abort();
            crashpoint::task::join_task(task).await
        })
    }));
    let text = panic_text(r.unwrap_err().as_ref());
    assert!(
        text.starts_with("task ") && text.contains("cancelled"),
        "{text}"
    );
}
