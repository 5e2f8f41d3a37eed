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
    // An earlier watch keeps the process-wide tally counting.
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
    // In the order first seen by the tally; `c`, not passed since, absent.
    assert_eq!(
        mine,
        [
            ("mutants-unscoped-a".to_owned(), 1),
            ("mutants-unscoped-b".to_owned(), 2)
        ]
    );
    drop(earlier);
}
