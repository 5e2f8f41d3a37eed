//! A crash sweep of `Checkpoint` on enumerated crash states: a small durable
//! program (count to four, one save per step, then finish) is crashed at
//! every hit of its clean run and, at depth 2, at every hit of the restart;
//! each crash is a power cut in *every* state the persistence model allows
//! (`PowerDir::enumerated`). The real writer loses no returned save in any
//! of them; each mutation is caught, with the first failing scenario named
//! and rerun from its name alone. `Mutation::RemoveFirst` passes every
//! scenario of the six named states and fails under enumeration.

use std::sync::{Arc, Mutex};

use crashpoint::{Hit, Outcome};
use durable::testing::{DiskState, MutantDir, Mutation, PersistenceModel, PowerDir};
use durable::{Checkpoint, Dir, Durable, Options, RunId};
use serde::{Deserialize, Serialize};

const STEPS: u32 = 4;

#[derive(Debug, Default, Serialize, Deserialize)]
struct Count {
    n: u32,
    done: bool,
}

impl Durable for Count {
    fn is_finished(&self) -> bool {
        self.done
    }
}

/// How each crash's power cut is chosen.
#[derive(Clone, Copy, Debug)]
enum Cuts {
    /// One of the six named states, for every crash.
    Named(DiskState),
    /// Enumerated states, the scenario's own index per crash.
    Enumerated,
}

/// One crash of a scenario: where, and which state its power cut applies
/// (for enumerated cuts).
#[derive(Clone, Debug, PartialEq)]
struct CrashStep {
    hit: Hit,
    state: usize,
    of: usize,
}

/// A scenario's name: `state 2/5: mid-save#3 → state 0/3: after rename#1`.
fn name(steps: &[CrashStep]) -> String {
    steps
        .iter()
        .map(|s| format!("state {}/{}: {}", s.state, s.of, s.hit))
        .collect::<Vec<_>>()
        .join(" → ")
}

/// A scenario from its name alone.
fn parse(name: &str) -> Vec<CrashStep> {
    name.split(" → ")
        .map(|part| {
            let rest = part.strip_prefix("state ").unwrap();
            let (states, hit) = rest.split_once(": ").unwrap();
            let (state, of) = states.split_once('/').unwrap();
            let (point, occurrence) = hit.rsplit_once('#').unwrap();
            CrashStep {
                hit: Hit::new(point.to_owned(), occurrence.parse().unwrap()),
                state: state.parse().unwrap(),
                of: of.parse().unwrap(),
            }
        })
        .collect()
}

/// One life of the program on `dir`: open (counting the restart), check
/// that no returned save was lost, count on to `STEPS`, finish.
fn life(dir: &PowerDir, writer: Option<Mutation>, returned: &Mutex<u32>) -> Result<(), String> {
    dir.boot();
    let d: Arc<dyn Dir> = match writer {
        None => Arc::new(dir.clone()),
        Some(m) => Arc::new(MutantDir::new(dir.clone(), m)),
    };
    let run = RunId::parse("count-1700000000-ab12cd34").map_err(|e| e.to_string())?;
    let opts = Options {
        max_resumes: None,
        ..Options::default()
    };
    let mut opened = Checkpoint::<Count>::open(d, &run, opts).map_err(|e| e.to_string())?;
    let had = *returned.lock().unwrap();
    if opened.state.n < had {
        return Err(format!(
            "lost save: step {had} was saved, the restart reads step {}",
            opened.state.n
        ));
    }
    while opened.state.n < STEPS {
        opened.state.n += 1;
        opened
            .checkpoint
            .save(&opened.state)
            .map_err(|e| e.to_string())?;
        *returned.lock().unwrap() = opened.state.n;
    }
    if !opened.state.done {
        opened.state.done = true;
        opened
            .checkpoint
            .save(&opened.state)
            .map_err(|e| e.to_string())?;
    }
    drop(opened);
    dir.shutdown();
    Ok(())
}

/// What replaying a scenario saw.
struct Replay {
    /// `Err` names what went wrong.
    verdict: Result<(), String>,
    /// The hits of the life after the last crash: the next level's targets.
    last_hits: Vec<Hit>,
    /// How many states the power cut after the last crash could choose from.
    states_at_last: usize,
}

/// Replay `steps` from a fresh world, then finish with a clean life. With
/// `probe`, stop right after the last crash and count its states instead.
fn replay(cuts: Cuts, writer: Option<Mutation>, steps: &[CrashStep], probe: bool) -> Replay {
    let dir = match cuts {
        Cuts::Named(s) => PowerDir::new(s),
        Cuts::Enumerated => PowerDir::enumerated(
            PersistenceModel::default(),
            steps.iter().map(|s| s.state).collect(),
        ),
    };
    let returned = Mutex::new(0);
    for (k, step) in steps.iter().enumerate() {
        let l = crashpoint::crash_at(step.hit.clone(), || life(&dir, writer, &returned));
        match l.outcome {
            Outcome::Crashed(_) => {}
            Outcome::Finished(Err(e)) => {
                return Replay {
                    verdict: Err(e),
                    last_hits: Vec::new(),
                    states_at_last: 0,
                }
            }
            other => panic!("{}: life {} did not crash: {other:?}", name(steps), k + 1),
        }
        if probe && k + 1 == steps.len() {
            return Replay {
                verdict: Ok(()),
                last_hits: Vec::new(),
                states_at_last: dir.crash_states().states,
            };
        }
    }
    let last = crashpoint::record(|| life(&dir, writer, &returned));
    let verdict = match last.outcome {
        Outcome::Finished(r) => r,
        other => Err(format!("the final life did not finish: {other:?}")),
    };
    Replay {
        verdict,
        last_hits: last.hits,
        states_at_last: 0,
    }
}

/// The sweep's numbers.
#[derive(Debug, Default)]
struct Sweep {
    scenarios: usize,
    failing: Vec<(String, String)>,
    /// States per crash, one entry per crash site (enumerated only).
    per_crash: Vec<usize>,
}

/// Every scenario to depth 2.
fn sweep(cuts: Cuts, writer: Option<Mutation>) -> Sweep {
    let mut out = Sweep::default();
    let clean = replay(cuts, writer, &[], false);
    assert!(clean.verdict.is_ok(), "clean run: {:?}", clean.verdict);
    let mut level: Vec<(Vec<CrashStep>, Vec<Hit>)> = vec![(Vec::new(), clean.last_hits)];
    for _depth in 1..=2 {
        let mut next = Vec::new();
        for (prefix, hits) in &level {
            for hit in hits {
                let mut steps = prefix.clone();
                steps.push(CrashStep {
                    hit: hit.clone(),
                    state: 0,
                    of: 1,
                });
                let of = match cuts {
                    Cuts::Named(_) => 1,
                    Cuts::Enumerated => replay(cuts, writer, &steps, true).states_at_last,
                };
                out.per_crash.push(of);
                for state in 0..of {
                    let last = steps.len() - 1;
                    steps[last].state = state;
                    steps[last].of = of;
                    let r = replay(cuts, writer, &steps, false);
                    out.scenarios += 1;
                    match r.verdict {
                        Ok(()) => next.push((steps.clone(), r.last_hits)),
                        Err(e) => out.failing.push((name(&steps), e)),
                    }
                }
            }
        }
        level = next;
    }
    out
}

fn median(v: &mut [usize]) -> usize {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

#[test]
fn the_real_writer_passes_every_enumerated_state_to_depth_two() {
    let mut s = sweep(Cuts::Enumerated, None);
    assert!(s.failing.is_empty(), "{:?}", s.failing.first());
    let max = s.per_crash.iter().copied().max().unwrap_or(0);
    let med = median(&mut s.per_crash);
    println!(
        "real writer: {} scenarios, {} crash sites, states per crash max {max} median {med}",
        s.scenarios,
        s.per_crash.len()
    );
    assert!(max > 1 && s.scenarios > s.per_crash.len());
}

#[test]
fn each_mutation_is_caught_with_its_first_failing_scenario_rerunnable_by_name() {
    for m in Mutation::ALL {
        let s = sweep(Cuts::Enumerated, Some(m));
        let (first, why) = s
            .failing
            .first()
            .unwrap_or_else(|| panic!("{m:?} passes every enumerated state"));
        println!(
            "{}: {} of {} scenarios fail; first: {first} ({why})",
            m.slug(),
            s.failing.len(),
            s.scenarios
        );
        // Rerun from the name alone: the same failure.
        let again = replay(Cuts::Enumerated, Some(m), &parse(first), false);
        assert_eq!(again.verdict.as_ref().err(), Some(why), "{m:?}: {first}");
    }
}

#[test]
fn remove_first_passes_all_six_named_states_and_fails_enumerated_ones() {
    for state in DiskState::ALL {
        let s = sweep(Cuts::Named(state), Some(Mutation::RemoveFirst));
        assert!(
            s.failing.is_empty(),
            "{state:?} catches remove-first: {:?}",
            s.failing.first()
        );
    }
    let s = sweep(Cuts::Enumerated, Some(Mutation::RemoveFirst));
    assert!(!s.failing.is_empty());
}

#[test]
fn names_round_trip() {
    let steps = vec![
        CrashStep {
            hit: Hit::new("mid-save", 3),
            state: 2,
            of: 5,
        },
        CrashStep {
            hit: Hit::new("after rename", 1),
            state: 0,
            of: 3,
        },
    ];
    assert_eq!(
        name(&steps),
        "state 2/5: mid-save#3 → state 0/3: after rename#1"
    );
    assert_eq!(parse(&name(&steps)), steps);
}
