use super::*;

#[cfg(feature = "enabled")]
mod enabled {
    use super::*;
    use crate::scope::current;
    use proptest::prelude::*;

    fn names(hits: &[Hit]) -> Vec<String> {
        hits.iter().map(Hit::to_string).collect()
    }

    #[test]
    fn outside_a_scope_points_do_nothing() {
        point!("a");
        point!("a");
        assert!(current().is_none());
        // A scope opened afterwards starts counting from one.
        let life = record(|| point!("a"));
        assert_eq!(names(&life.hits), ["a#1"]);
    }

    #[test]
    fn a_paused_life_is_held_at_its_hit_and_goes_on_afterwards() {
        use crate::scope::Handle;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let held_after = Arc::new(AtomicUsize::new(usize::MAX));
        let during = Arc::clone(&held_after);
        let handle = Handle::new(None);
        let watched = handle.clone();
        let life = handle
            .pause_at(Hit::new("x", 2), move || {
                // The hit is recorded before the pause; the scope can be
                // read from the pausing code (no lock is held).
                during.store(
                    watched.last_hit().map_or(0, |h| h.occurrence as usize),
                    Ordering::SeqCst,
                );
                // Points passed here, outside any scope, are not the life's.
                point!("elsewhere");
            })
            .run(|| {
                for _ in 0..3 {
                    point!("x");
                }
            });
        assert!(life.outcome.crashed().is_none());
        assert_eq!(names(&life.hits), ["x#1", "x#2", "x#3"]);
        assert_eq!(held_after.load(Ordering::SeqCst), 2);
        // A crash at the same hit wins: the pause never runs.
        let ran = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&ran);
        let life = Handle::new(Some(Hit::new("x", 2)))
            .pause_at(Hit::new("x", 2), move || {
                r.fetch_add(1, Ordering::SeqCst);
            })
            .run(|| {
                for _ in 0..3 {
                    point!("x");
                }
            });
        assert_eq!(life.outcome.crashed(), Some(&Hit::new("x", 2)));
        assert_eq!(ran.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn record_counts_occurrences_per_name() {
        let life = record(|| {
            for _ in 0..2 {
                point!("x");
                point!("y");
            }
            7
        });
        assert_eq!(life.outcome, Outcome::Finished(7));
        assert_eq!(names(&life.hits), ["x#1", "y#1", "x#2", "y#2"]);
    }

    #[test]
    fn crash_at_stops_exactly_at_the_hit() {
        let mut after = false;
        let life = crash_at(Hit::new("y", 2), || {
            for _ in 0..3 {
                point!("x");
                point!("y");
            }
            after = true;
        });
        assert_eq!(life.outcome, Outcome::Crashed(Hit::new("y", 2)));
        assert_eq!(names(&life.hits), ["x#1", "y#1", "x#2"]);
        assert!(!after);
    }

    #[test]
    fn a_target_never_reached_finishes() {
        let life = crash_at(Hit::new("x", 9), || point!("x"));
        assert_eq!(life.outcome, Outcome::Finished(()));
        assert_eq!(names(&life.hits), ["x#1"]);
    }

    #[test]
    fn a_real_panic_is_not_a_crash() {
        let life = crash_at(Hit::new("x", 2), || {
            point!("x");
            panic!("boom {}", 42);
        });
        assert_eq!(life.outcome, Outcome::Panicked("boom 42".into()));
        assert_eq!(names(&life.hits), ["x#1"]);
    }

    #[test]
    fn nested_scopes_restore_the_outer_one() {
        let outer = record(|| {
            point!("o");
            let inner = crash_at(Hit::new("i", 1), || point!("i"));
            assert!(inner.outcome.crashed().is_some());
            point!("o");
        });
        assert_eq!(names(&outer.hits), ["o#1", "o#2"]);
        assert!(current().is_none());
    }

    #[test]
    fn spawned_threads_carry_the_scope_and_their_crash() {
        let life = crash_at(Hit::new("t", 2), || {
            point!("t");
            let h = spawn(|| point!("t"));
            join(h);
            point!("never");
        });
        assert_eq!(life.outcome, Outcome::Crashed(Hit::new("t", 2)));
        assert_eq!(names(&life.hits), ["t#1"]);
    }

    #[test]
    fn a_swallowed_crash_on_another_thread_still_counts() {
        let life = crash_at(Hit::new("t", 1), || {
            let h = spawn(|| point!("t"));
            let _ = h.join();
        });
        assert_eq!(life.outcome, Outcome::Crashed(Hit::new("t", 1)));
    }

    #[test]
    fn eight_threads_run_their_own_scopes() {
        let handles: Vec<_> = (0..8u32)
            .map(|t| {
                std::thread::spawn(move || {
                    let mut seen = Vec::new();
                    for round in 0..200u32 {
                        let target = Hit::new("p", 1 + (t + round) % 5);
                        let life = crash_at(target.clone(), || {
                            for _ in 0..(t + 3) {
                                point!("p");
                                point!("q");
                            }
                        });
                        let expect_crash = target.occurrence <= t + 3;
                        assert_eq!(life.outcome.crashed().is_some(), expect_crash);
                        if expect_crash {
                            assert_eq!(life.hits.len() as u32, 2 * (target.occurrence - 1));
                        } else {
                            assert_eq!(life.hits.len() as u32, 2 * (t + 3));
                        }
                        seen.push(life.hits.len());
                    }
                    seen
                })
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().map(|s| s.len()).ok(), Some(200));
        }
    }

    const NAMES: [&str; 4] = ["a", "b", "c", "d"];

    proptest! {
        #[test]
        fn crashing_at_hit_k_sees_the_first_k_hits(
            seq in proptest::collection::vec(0usize..4, 1..40),
            pick in any::<proptest::sample::Index>(),
        ) {
            let job = |seq: &[usize]| for &i in seq { point!(NAMES[i]); };
            let clean = record(|| job(&seq));
            prop_assert_eq!(clean.hits.len(), seq.len());
            let k = pick.index(clean.hits.len());
            let target = clean.hits[k].clone();
            let life = crash_at(target.clone(), || job(&seq));
            prop_assert_eq!(life.outcome, Outcome::Crashed(target));
            prop_assert_eq!(&life.hits[..], &clean.hits[..k]);
        }
    }
}

#[cfg(not(feature = "enabled"))]
#[test]
fn without_the_feature_points_compile_to_nothing() {
    let life = crash_at(Hit::new("x", 1), || {
        point!("x");
        1
    });
    assert_eq!(life.outcome, Outcome::Finished(1));
    assert!(life.hits.is_empty());
}

#[test]
fn hits_parse_and_print() {
    let h: Hit = "after rename#3".parse().unwrap();
    assert_eq!(h, Hit::new("after rename", 3));
    assert_eq!(h.to_string(), "after rename#3");
    for bad in ["", "x", "x#0", "#1", "x#-1", "x#y"] {
        assert!(bad.parse::<Hit>().is_err(), "{bad:?} parsed");
    }
    let msg = "x#0".parse::<Hit>().unwrap_err().to_string();
    assert!(msg.contains("mid-save#2"), "{msg}");
}

#[cfg(feature = "enabled")]
#[test]
fn a_cancelled_scope_stops_at_its_next_hit() {
    let handle = crate::scope::Handle::new(None);
    let h2 = handle.clone();
    let life = handle.run(|| {
        point!("a");
        h2.cancel();
        point!("b");
        point!("c");
    });
    assert_eq!(life.outcome, Outcome::Crashed(Hit::new("b", 1)));
    assert_eq!(handle.cancelled(), Some(Hit::new("b", 1)));
    assert_eq!(handle.last_hit(), None, "hits were taken by the outcome");
    assert_eq!(life.hits, [Hit::new("a", 1)]);
}

#[test]
fn a_scope_carries_its_crash_state_into_its_threads() {
    assert_eq!(crate::scope::crash_state(), None, "outside a scope");
    let handle = crate::scope::Handle::new(None);
    handle.set_crash_state("lose");
    let life = handle.run(|| {
        let here = crate::scope::crash_state();
        let there = join(spawn(crate::scope::crash_state));
        (here, there)
    });
    let lose = Some(std::sync::Arc::from("lose"));
    assert_eq!(life.outcome, Outcome::Finished((lose.clone(), lose)));
    assert_eq!(
        record(crate::scope::crash_state).outcome,
        Outcome::Finished(None)
    );
}

#[cfg(feature = "enabled")]
mod linked_points {
    use super::*;

    fn one_dead_one_alive(run_dead: bool) {
        point!("linked-alive");
        if run_dead {
            point!("linked-dead");
        }
    }

    #[test]
    fn every_literal_point_is_listed_at_link_time() {
        let sites = points::linked();
        let here: Vec<_> = sites
            .iter()
            .filter(|s| s.module == module_path!())
            .map(|s| s.name)
            .collect();
        assert_eq!(here, ["linked-alive", "linked-dead"]);
        let dead = sites.iter().find(|s| s.name == "linked-dead").unwrap();
        assert!(dead.file.ends_with("tests.rs") && dead.line > 0, "{dead}");
    }

    #[test]
    fn a_point_no_run_passes_is_named_in_the_modules_the_run_went_through() {
        let handle = scope::Handle::new(None);
        handle.run(|| one_dead_one_alive(false));
        let passed = handle.sites();
        assert_eq!(passed.len(), 1);
        let never: Vec<_> = points::never_passed(&passed)
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(never, ["linked-dead"]);
        let both = scope::Handle::new(None);
        both.run(|| one_dead_one_alive(true));
        assert!(points::never_passed(&both.sites()).is_empty());
        // A module none of whose points ran is not the run's code.
        assert!(points::never_passed(&[]).is_empty());
    }
}

#[cfg(not(feature = "enabled"))]
#[test]
fn without_the_feature_no_point_is_listed() {
    point!("listed-nowhere");
    assert!(points::linked().is_empty());
}
