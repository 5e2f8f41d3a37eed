//! What a scope and an unscoped watch report, for the survivors mutation
//! testing (`cargo xtask mutants crashpoint`) found.

use crashpoint::Hit;

#[test]
fn last_hit_is_the_latest_point_passed_so_far_in_the_scope() {
    let handle = crashpoint::scope::Handle::new(None);
    assert_eq!(handle.last_hit(), None);
    let life = handle.run(|| {
        let me = crashpoint::scope::current().unwrap();
        assert_eq!(me.last_hit(), None);
        crashpoint::point!("a");
        crashpoint::point!("b");
        crashpoint::point!("a");
        me.last_hit()
    });
    assert_eq!(
        life.outcome,
        crashpoint::Outcome::Finished(Some(Hit::new("a", 2)))
    );
    assert_eq!(life.hits.len(), 3);
}

/// Pass `name` `n` times on a thread with no scope.
fn pass_unscoped(name: &'static str, n: usize) {
    std::thread::spawn(move || {
        for _ in 0..n {
            crashpoint::point!(name);
        }
    })
    .join()
    .unwrap();
}

#[test]
fn a_watch_counts_only_the_passes_since_it_started_point_by_point() {
    // An earlier watch is counting meanwhile: each watch has its own tally.
    let earlier = crashpoint::unscoped::watch_unscoped();
    pass_unscoped("mutants-unscoped-a", 3);
    pass_unscoped("mutants-unscoped-b", 1);
    pass_unscoped("mutants-unscoped-c", 2);
    let watch = crashpoint::unscoped::watch_unscoped();
    pass_unscoped("mutants-unscoped-b", 2);
    pass_unscoped("mutants-unscoped-a", 1);
    let mine: Vec<(String, u64)> = watch
        .stray()
        .into_iter()
        .filter(|(n, _)| n.starts_with("mutants-unscoped-"))
        .collect();
    // In the order this watch first saw them; `c`, not passed since, absent.
    assert_eq!(
        mine,
        [
            ("mutants-unscoped-b".to_owned(), 2),
            ("mutants-unscoped-a".to_owned(), 1)
        ]
    );
    let all: Vec<(String, u64)> = earlier
        .stray()
        .into_iter()
        .filter(|(n, _)| n.starts_with("mutants-unscoped-"))
        .collect();
    assert_eq!(
        all,
        [
            ("mutants-unscoped-a".to_owned(), 4),
            ("mutants-unscoped-b".to_owned(), 3),
            ("mutants-unscoped-c".to_owned(), 2)
        ]
    );
    drop(earlier);
}

/// A thread started with `crashpoint::spawn` runs in its scope from the
/// spawn on, even before it is scheduled, and until it ends: a life that
/// returns at once still sees it, named by where it was started.
#[test]
fn a_spawned_thread_runs_in_its_scope_until_it_ends() {
    let handle = crashpoint::scope::Handle::new(None);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let life = handle.run(|| crashpoint::spawn(move || rx.recv().is_ok()));
    let crashpoint::Outcome::Finished(thread) = life.outcome else {
        panic!("the life finished");
    };
    let running = handle.running();
    assert_eq!(running.len(), 1, "{running:?}");
    assert!(
        running[0].starts_with("the thread started at ")
            && running[0].contains("mutants_unscoped.rs:"),
        "{running:?}"
    );
    // Still running at the limit: named.
    let soon = std::time::Instant::now() + std::time::Duration::from_millis(50);
    assert_eq!(handle.wait_threads(Some(soon)), running);
    tx.send(()).unwrap();
    assert!(handle.wait_threads(None).is_empty());
    assert!(handle.running().is_empty());
    assert!(thread.join().unwrap());
}

/// A fenced scope: a thread still running in it dies at its next point.
#[test]
fn a_fenced_scope_stops_its_threads_at_their_next_point() {
    let handle = crashpoint::scope::Handle::new(None);
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (acted_tx, acted) = std::sync::mpsc::channel::<()>();
    let life = handle.run(|| {
        crashpoint::spawn(move || {
            let _ = rx.recv();
            crashpoint::point!("after the life");
            let _ = acted_tx.send(());
        })
    });
    let crashpoint::Outcome::Finished(thread) = life.outcome else {
        panic!("the life finished");
    };
    handle.fence();
    tx.send(()).unwrap();
    assert!(handle.wait_threads(None).is_empty());
    let payload = thread.join().unwrap_err();
    assert!(crashpoint::scope::is_crash(payload.as_ref()).is_some());
    assert!(
        acted.try_recv().is_err(),
        "the thread acted after its point"
    );
}

/// A plain thread a life started is that life's watch's, even while the
/// lives of other watches run at the same time; a plain thread no life
/// started is nobody's: stray for every watch, and "during lives" for each
/// watch with a life running then.
#[test]
fn a_plain_thread_a_life_started_is_its_watchs_alone() {
    let mine = crashpoint::unscoped::watch_unscoped();
    let other = crashpoint::unscoped::watch_unscoped();
    let only = |v: Vec<(String, u64)>| -> Vec<(String, u64)> {
        v.into_iter()
            .filter(|(n, _)| n.starts_with("attributed-"))
            .collect()
    };
    let one = |n: &str| vec![(n.to_owned(), 1)];
    // A life of `other` runs throughout, and a plain thread that no life
    // started passes a point meanwhile.
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let (running, started) = std::sync::mpsc::channel::<()>();
    let owner = other.owner().clone();
    let theirs = std::thread::spawn(move || {
        owner.enter(|| {
            crashpoint::scope::Handle::new(None).run(|| {
                running.send(()).unwrap();
                let _ = wait.recv();
            })
        })
    });
    started.recv().unwrap();
    pass_unscoped("attributed-by-nobody", 1);
    // In a life on a thread `mine` owns: a plain thread, and a plain
    // thread started by that one.
    mine.owner().enter(|| {
        crashpoint::scope::Handle::new(None).run(|| {
            pass_unscoped("attributed-in-a-life", 1);
            std::thread::spawn(|| pass_unscoped("attributed-grandchild", 1))
                .join()
                .unwrap();
        })
    });
    go.send(()).unwrap();
    theirs.join().unwrap();
    // The life's thread carries no mark once its life is over.
    mine.owner().enter(|| pass_unscoped("attributed-after", 1));
    assert_eq!(
        only(mine.plain()),
        [
            ("attributed-in-a-life".to_owned(), 1),
            ("attributed-grandchild".to_owned(), 1)
        ]
    );
    assert!(only(other.plain()).is_empty());
    assert_eq!(only(other.during_lives()), one("attributed-by-nobody"));
    assert!(only(mine.during_lives()).is_empty());
    for w in [&mine, &other] {
        assert_eq!(
            only(w.stray()),
            [
                ("attributed-by-nobody".to_owned(), 1),
                ("attributed-after".to_owned(), 1)
            ]
        );
    }
}
