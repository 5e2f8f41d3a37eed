//! The run stores' conformance suite: every store (files, SQLite, Postgres
//! on a throwaway cluster) keeps the promises of `durable::store`. Each
//! check gets a fresh store and opens one connection per worker, as
//! workers on different machines would.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use durable::store::{Claim, FileStore, PostgresStore, RunStore, SqliteStore};
use durable::{Error, RunId};

use crate::pg_cluster::PgCluster;
use crate::{fast, run_id, Checkpoint, Phase};

/// A fresh store; each call of the function it returns is a new worker's
/// connection to it.
type Workers = Box<dyn Fn() -> Arc<dyn RunStore>>;

/// A lease that is certainly still held whenever a check asserts that it
/// is, however loaded the machine: a check that needs it gone shortens it
/// first ([`RunStore::renew`] to [`SHORT`]) and outlives that.
const LONG: Duration = Duration::from_secs(60);
/// A lease a check waits out: it is only ever asserted expired.
const SHORT: Duration = Duration::from_millis(40);
/// How far past its end a lease is waited out: the stores' clocks count
/// whole milliseconds (files, SQLite) or the server's time (Postgres).
const MARGIN: Duration = Duration::from_millis(80);

/// Sleep until a lease of `SHORT` taken (or renewed) at `taken`, an instant
/// read before the call that took it, has certainly expired, whichever
/// clock: only what is left of it (and [`MARGIN`]) is slept.
fn outlive_short_lease(taken: Instant) {
    let end = taken + SHORT + MARGIN;
    thread::sleep(end.saturating_duration_since(Instant::now()));
}

type Check = fn(&dyn Fn() -> Arc<dyn RunStore>);

const CHECKS: &[(&str, Check)] = &[
    ("claim, save, load, renew, release", claim_save_load),
    (
        "two workers claim one run at once: exactly one wins",
        one_of_two_wins,
    ),
    (
        "a holder paused past its lease is fenced",
        stale_holder_fenced,
    ),
    (
        "a done run refuses every save, its holder's too",
        done_is_final,
    ),
    (
        "a rescue racing a completion never overwrites it",
        rescue_races_completion,
    ),
    (
        "claim-next: held and done runs skipped, each run to one worker",
        claim_next_pool,
    ),
    (
        "Checkpoint::open_store: start, restart, fence; load_store reads without claiming",
        checkpoint_on_store,
    ),
];

fn conformance(store: &str, fresh: &dyn Fn(usize) -> Workers) {
    own_points(|| {
        for (i, (name, check)) in CHECKS.iter().enumerate() {
            let workers = fresh(i);
            eprintln!("{store}: {name}");
            check(&*workers);
        }
    });
}

/// Run `f` with the stores' crash points it passes (outside any life)
/// counted for a watch of its own, on this thread and the threads it
/// starts (`crashpoint::spawn` carries the watch): a store sweep running
/// meanwhile in this binary (`store_sweep.rs`) refuses points passed
/// outside its lives while only its lives run, and would count these.
fn own_points<R>(f: impl FnOnce() -> R) -> R {
    let watch = crashpoint::unscoped::watch_unscoped();
    watch.owner().enter(f)
}

#[test]
fn the_file_store_conforms() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    conformance("files", &|i| {
        let path = root.join(format!("check-{i}"));
        Box::new(move || Arc::new(FileStore::open(&path).unwrap()) as Arc<dyn RunStore>)
    });
}

#[test]
fn the_sqlite_store_conforms() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().to_path_buf();
    conformance("sqlite", &|i| {
        let path = root.join(format!("check-{i}.db"));
        Box::new(move || Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn RunStore>)
    });
}

#[test]
fn the_postgres_store_conforms() {
    let Some(cluster) = PgCluster::start(false) else {
        return;
    };
    conformance("postgres", &|i| {
        let conn = cluster.create_db(&format!("check_{i}"));
        // The table is created by the first connection, before the workers
        // race.
        drop(PostgresStore::connect(&conn).unwrap());
        Box::new(move || Arc::new(PostgresStore::connect(&conn).unwrap()) as Arc<dyn RunStore>)
    });
}

/// The synchronous client would panic inside a tokio runtime: the store
/// refuses with a typed error instead, before connecting and after.
#[test]
fn the_postgres_store_refuses_inside_a_tokio_runtime() {
    own_points(refuses_inside_a_tokio_runtime);
}

fn refuses_inside_a_tokio_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let inside = rt.block_on(async { PostgresStore::connect("host=/nonexistent dbname=runs") });
    let err = inside.unwrap_err();
    assert!(matches!(err, Error::InsideAsyncRuntime { .. }), "{err}");
    assert!(err.to_string().contains("spawn_blocking"), "{err}");
    let bad = PostgresStore::connect("host=/nonexistent port=notaport").unwrap_err();
    assert!(matches!(bad, Error::Store { .. }), "{bad}");

    let Some(cluster) = PgCluster::start(false) else {
        return;
    };
    let store = PostgresStore::connect(&cluster.conn("postgres")).unwrap();
    let run = run_id("async");
    let inside = rt.block_on(async { store.claim(&run, "a", LONG) });
    assert!(
        matches!(inside, Err(Error::InsideAsyncRuntime { op: "claim", .. })),
        "{inside:?}"
    );
    // Outside it, the same store works.
    assert!(matches!(
        store.claim(&run, "a", LONG).unwrap(),
        Claim::Won { .. }
    ));
}

fn won(claim: Claim) -> durable::store::Lease {
    match claim {
        Claim::Won { lease, .. } => lease,
        other => panic!("expected a win, got {other:?}"),
    }
}

fn claim_save_load(workers: &dyn Fn() -> Arc<dyn RunStore>) {
    let (a, b) = (workers(), workers());
    let run = run_id("job-1");
    assert_eq!(a.load(&run).unwrap(), None);
    let lease = won(a.claim(&run, "a", LONG).unwrap());
    assert_eq!(lease.epoch, 1);
    a.save(&lease, b"step 1", false).unwrap();
    let rec = b.load(&run).unwrap().unwrap();
    assert_eq!(rec.checkpoint.as_deref(), Some(&b"step 1"[..]));
    assert_eq!(
        (rec.epoch, rec.owner.as_deref(), rec.done),
        (1, Some("a"), false)
    );
    assert_eq!(
        b.claim(&run, "b", LONG).unwrap(),
        Claim::Held { owner: "a".into() }
    );
    a.renew(&lease, LONG).unwrap();
    a.release(&lease).unwrap();
    let Claim::Won {
        lease: l2,
        checkpoint,
    } = b.claim(&run, "b", LONG).unwrap()
    else {
        panic!("a released run is claimable at once");
    };
    assert_eq!((l2.epoch, checkpoint.as_deref()), (2, Some(&b"step 1"[..])));
    assert!(b.add(&run_id("job-2")).unwrap());
    assert!(!b.add(&run_id("job-2")).unwrap());
    assert!(!b.add(&run).unwrap(), "add leaves a run it has alone");
    assert_eq!(b.load(&run).unwrap().unwrap().epoch, 2);
}

fn one_of_two_wins(workers: &dyn Fn() -> Arc<dyn RunStore>) {
    for round in 0..12 {
        let run = run_id(&format!("race-{round}"));
        if round % 2 == 1 {
            // Half the rounds race for a run the store already has.
            workers().add(&run).unwrap();
        }
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|who| {
                let (store, run, barrier) = (workers(), run.clone(), barrier.clone());
                crashpoint::spawn(move || {
                    barrier.wait();
                    store.claim(&run, who, LONG).unwrap()
                })
            })
            .collect();
        let claims: Vec<Claim> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let winners: Vec<_> = claims
            .iter()
            .filter_map(|c| match c {
                Claim::Won { lease, .. } => Some(lease.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(winners.len(), 1, "round {round}: {claims:?}");
        let loser = claims.iter().find(|c| !matches!(c, Claim::Won { .. }));
        assert_eq!(
            loser,
            Some(&Claim::Held {
                owner: winners[0].owner.clone()
            })
        );
        assert_eq!(winners[0].epoch, 1);
    }
}

fn stale_holder_fenced(workers: &dyn Fn() -> Arc<dyn RunStore>) {
    let (a, b) = (workers(), workers());
    let run = run_id("paused");
    let taken = Instant::now();
    let stale = won(a.claim(&run, "a", SHORT).unwrap());
    a.save(&stale, b"a: step 1", false).unwrap();
    // `a` pauses (a GC, a stopped VM) past its lease; `b` rescues the run
    // and finishes it.
    outlive_short_lease(taken);
    let fresh = won(b.claim(&run, "b", LONG).unwrap());
    assert_eq!(fresh.epoch, stale.epoch + 1);
    b.save(&fresh, b"b: step 2", false).unwrap();
    b.save(&fresh, b"b: done", true).unwrap();
    let before = b.load(&run).unwrap();
    // `a` wakes up: every write it tries is refused, and nothing changes.
    let fenced = |r: durable::Result<()>| match r {
        Err(Error::Fenced { ours, on_disk, .. }) => assert_eq!((ours, on_disk), (1, 2)),
        other => panic!("the stale holder was not fenced: {other:?}"),
    };
    fenced(a.save(&stale, b"a: step 2", false));
    fenced(a.save(&stale, b"a: done", true));
    fenced(a.renew(&stale, LONG));
    fenced(a.release(&stale));
    assert_eq!(b.load(&run).unwrap(), before);
    assert_eq!(before.unwrap().checkpoint.as_deref(), Some(&b"b: done"[..]));
}

fn done_is_final(workers: &dyn Fn() -> Arc<dyn RunStore>) {
    let (a, b) = (workers(), workers());
    let run = run_id("final");
    let taken = Instant::now();
    let lease = won(a.claim(&run, "a", SHORT).unwrap());
    a.save(&lease, b"done", true).unwrap();
    let finished = |r: durable::Result<()>| {
        assert!(matches!(r, Err(Error::Finished { .. })), "{r:?}");
    };
    finished(a.save(&lease, b"after", false));
    finished(a.save(&lease, b"after", true));
    finished(a.renew(&lease, LONG));
    outlive_short_lease(taken);
    // The lease has expired: a rescue finds the run done, not claimable.
    assert_eq!(
        b.claim(&run, "b", LONG).unwrap(),
        Claim::Done {
            epoch: 1,
            checkpoint: Some(b"done".to_vec())
        }
    );
    assert_eq!(b.claim_next("b", LONG).unwrap(), None);
    a.release(&lease).unwrap();
    let rec = b.load(&run).unwrap().unwrap();
    assert_eq!((rec.epoch, rec.done), (1, true));
    assert_eq!(rec.checkpoint.as_deref(), Some(&b"done"[..]));
}

/// River's rescue bug as a regression test: a worker whose lease expired
/// completes its run at the very moment a rescuer claims it. Either the
/// completion lands first (the rescue finds the run done) or the rescue
/// does (the completion is fenced); never both, and a completed run is
/// never claimed or written again.
///
/// Worker `a` takes all sixteen runs first and their leases are outlived
/// once, together; then each round races one of them.
fn rescue_races_completion(workers: &dyn Fn() -> Arc<dyn RunStore>) {
    const ROUNDS: usize = 16;
    let a = workers();
    let mut leases = Vec::with_capacity(ROUNDS);
    let mut last_taken = Instant::now();
    for round in 0..ROUNDS {
        let run = run_id(&format!("rescue-{round}"));
        last_taken = Instant::now();
        let lease = won(a.claim(&run, "a", SHORT).unwrap());
        a.save(&lease, b"a: working", false).unwrap();
        leases.push((run, lease));
    }
    outlive_short_lease(last_taken);
    let (mut completed, mut rescued) = (0, 0);
    for (round, (run, lease)) in leases.into_iter().enumerate() {
        let (a, b) = (a.clone(), workers());
        let barrier = Arc::new(Barrier::new(2));
        let finisher = {
            let (barrier, lease) = (barrier.clone(), lease.clone());
            crashpoint::spawn(move || {
                barrier.wait();
                a.save(&lease, b"a: done", true)
            })
        };
        let rescuer = {
            let (barrier, run, b) = (barrier.clone(), run.clone(), b.clone());
            crashpoint::spawn(move || {
                barrier.wait();
                let claim = b.claim(&run, "b", LONG).unwrap();
                if let Claim::Won { lease, .. } = &claim {
                    b.save(lease, b"b: redone", false).unwrap();
                }
                claim
            })
        };
        let finished = finisher.join().unwrap();
        let claim = rescuer.join().unwrap();
        let rec = b.load(&run).unwrap().unwrap();
        match (&finished, &claim) {
            (Ok(()), Claim::Done { epoch: 1, .. }) => {
                completed += 1;
                assert!(rec.done, "round {round}");
                assert_eq!(rec.checkpoint.as_deref(), Some(&b"a: done"[..]));
            }
            (
                Err(Error::Fenced {
                    ours: 1,
                    on_disk: 2,
                    ..
                }),
                Claim::Won { .. },
            ) => {
                rescued += 1;
                assert!(!rec.done, "round {round}");
                assert_eq!(rec.checkpoint.as_deref(), Some(&b"b: redone"[..]));
            }
            other => panic!("round {round}: completion and rescue both went through: {other:?}"),
        }
        // Whoever won, a later rescue never reclaims a done run.
        if rec.done {
            assert!(matches!(
                b.claim(&run, "c", LONG).unwrap(),
                Claim::Done { .. }
            ));
            assert_eq!(b.load(&run).unwrap().unwrap(), rec);
        }
    }
    eprintln!("  completion first {completed}, rescue first {rescued}");
}

fn claim_next_pool(workers: &dyn Fn() -> Arc<dyn RunStore>) {
    let a = workers();
    assert_eq!(a.claim_next("a", LONG).unwrap(), None);
    for r in ["r1", "r2", "r3"] {
        assert!(a.add(&run_id(r)).unwrap());
    }
    let l1 = won(a.claim(&run_id("r1"), "a", LONG).unwrap());
    a.save(&l1, b"r1 done", true).unwrap();
    let (b, c) = (workers(), workers());
    let (lb, _) = b.claim_next("b", LONG).unwrap().unwrap();
    let (lc, _) = c.claim_next("c", LONG).unwrap().unwrap();
    assert_eq!((lb.run.as_str(), lc.run.as_str()), ("r2", "r3"));
    assert_eq!(
        a.claim_next("a", LONG).unwrap(),
        None,
        "held and done runs are skipped"
    );
    b.save(&lb, b"r2 step", false).unwrap();
    b.release(&lb).unwrap();
    let (again, cp) = a.claim_next("a", LONG).unwrap().unwrap();
    assert_eq!((again.run.as_str(), again.epoch), ("r2", 2));
    assert_eq!(cp.as_deref(), Some(&b"r2 step"[..]));

    // A pool of four workers drains twenty runs: each run to exactly one.
    let ids: Vec<RunId> = (0..20).map(|i| run_id(&format!("pool-{i:02}"))).collect();
    for id in &ids {
        a.add(id).unwrap();
    }
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let store = workers();
            crashpoint::spawn(move || {
                let mut mine = Vec::new();
                while let Some((lease, _)) = store.claim_next(&format!("w{w}"), LONG).unwrap() {
                    store.save(&lease, b"done", true).unwrap();
                    mine.push(lease.run.as_str().to_owned());
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    let want: Vec<String> = ids.iter().map(|r| r.as_str().to_owned()).collect();
    assert_eq!(all, want, "every pooled run claimed once, none twice");
}

fn checkpoint_on_store(workers: &dyn Fn() -> Arc<dyn RunStore>) {
    let run = run_id("agent-run");
    let open = |who: &str, lease| {
        Checkpoint::open_store(workers(), &run, who, lease, fast(), Default::default)
    };
    // Read without claiming: nothing there, then an added run with no
    // checkpoint (and still nobody holds it).
    let queued = run_id("queued-run");
    assert!(Checkpoint::load_store(&*workers(), &queued)
        .unwrap()
        .is_none());
    workers().add(&queued).unwrap();
    let (rec, saved) = Checkpoint::load_store(&*workers(), &queued)
        .unwrap()
        .unwrap();
    assert!(saved.is_none() && rec.owner.is_none() && rec.epoch == 0);
    // The lease `open_store` is given is the one that expires: a run opened
    // for `SHORT` is opened again, resumed, once that has passed.
    let brief = run_id("brief-run");
    let taken = Instant::now();
    let mut lapsed =
        Checkpoint::open_store(workers(), &brief, "x", SHORT, fast(), Default::default).unwrap();
    lapsed.state.phase = Phase::Tools;
    lapsed.checkpoint.save(&lapsed.state).unwrap();
    let mut first = open("a", LONG).unwrap();
    assert!(!first.resumed);
    assert_eq!(first.checkpoint.epoch(), 1);
    first.state.phase = Phase::Tools;
    first.checkpoint.save(&first.state).unwrap();
    assert!(matches!(open("b", LONG), Err(Error::Leased { owner, .. }) if owner == "a"));
    // `a` stalls: its lease runs out (shortened to `SHORT` from now, as
    // a holder that stopped renewing lets it) and `b` takes the run over.
    let shortened = Instant::now();
    first.checkpoint.renew(SHORT).unwrap();
    // (The brief run's lease was taken earlier: it is gone by then too.)
    debug_assert!(taken <= shortened);
    outlive_short_lease(shortened);
    let rescued =
        Checkpoint::open_store(workers(), &brief, "y", LONG, fast(), Default::default).unwrap();
    assert!(rescued.resumed);
    assert_eq!((rescued.resumes, rescued.checkpoint.epoch()), (1, 2));
    assert_eq!(rescued.state.phase, Phase::Tools);
    let mut second = open("b", LONG).unwrap();
    assert!(second.resumed);
    assert_eq!((second.resumes, second.checkpoint.epoch()), (1, 2));
    assert_eq!(second.state.phase, Phase::Tools);
    let (rec, saved) = Checkpoint::load_store(&*workers(), &run).unwrap().unwrap();
    assert_eq!((rec.owner.as_deref(), rec.epoch), (Some("b"), 2));
    assert_eq!(
        saved.unwrap().phase,
        Phase::Tools,
        "parsed, and not claimed"
    );
    first.state.turns = 99;
    assert!(matches!(
        first.checkpoint.save(&first.state),
        Err(Error::Fenced { .. })
    ));
    second.state.phase = Phase::Done;
    second.checkpoint.save(&second.state).unwrap();
    second.checkpoint.release().unwrap();
    let third = open("c", LONG).unwrap();
    assert_eq!(third.state.phase, Phase::Done);
    assert_eq!(third.state.turns, 0, "the fenced save wrote nothing");
    let rec = workers().load(&run).unwrap().unwrap();
    assert!(rec.done);
}

/// The database stopped as a power cut would (`pg_ctl stop -m immediate`)
/// at each point of a save, and started again: the save that was under
/// way fails (its holder cannot know whether it committed), the store
/// connects again by itself, what committed is read back whole, nothing
/// committed is lost, and the holder goes on under the same lease.
#[test]
fn the_database_stopped_mid_save_and_started_again_loses_nothing() {
    own_points(stopped_mid_save_and_started_again);
}

fn stopped_mid_save_and_started_again() {
    use crashpoint::scope::Handle;
    use crashpoint::Hit;
    let Some(cluster) = PgCluster::start(true) else {
        return;
    };
    let cluster = Arc::new(cluster);
    for (i, point) in ["save: before commit", "save: committed"]
        .into_iter()
        .enumerate()
    {
        let conn = cluster.create_db(&format!("outage_{i}"));
        let store: Arc<dyn RunStore> = Arc::new(PostgresStore::connect(&conn).unwrap());
        let run = run_id("outage");
        let mut opened = Checkpoint::open_store(
            Arc::clone(&store),
            &run,
            "a",
            LONG,
            fast(),
            Default::default,
        )
        .unwrap();
        opened.state.turns = 1;
        opened.checkpoint.save(&opened.state).unwrap();
        // The second save of this scope (the first is above, outside it).
        opened.state.turns = 2;
        let c = Arc::clone(&cluster);
        let life = Handle::new(None)
            .pause_at(Hit::new(point, 1), move || {
                c.stop_immediate();
                c.start_again();
            })
            .run(|| opened.checkpoint.save(&opened.state));
        let saved = match life.outcome {
            crashpoint::Outcome::Finished(r) => r,
            other => panic!("{point}: {other:?}"),
        };
        let on_disk = store.load(&run).unwrap().expect("the run is there");
        assert_eq!(on_disk.epoch, 1, "{point}: no claim happened");
        let text = String::from_utf8(on_disk.checkpoint.expect("a checkpoint")).unwrap();
        let turns = |n: u32| text.contains(&format!("\"turns\": {n},"));
        match point {
            // The commit never reached the server: the save failed, and the
            // store holds the first save whole.
            "save: before commit" => {
                assert!(
                    matches!(saved, Err(Error::Store { .. })),
                    "{point}: {saved:?}"
                );
                assert!(turns(1) && !turns(2), "{point}: {text}");
            }
            // Committed before the outage: returned and kept.
            _ => {
                assert!(saved.is_ok(), "{point}: {saved:?}");
                assert!(turns(2), "{point}: {text}");
            }
        }
        // The holder goes on under the same lease, on a new connection.
        opened.state.turns = 3;
        opened.checkpoint.save(&opened.state).unwrap();
        assert_eq!(store.load(&run).unwrap().unwrap().epoch, 1);
    }
}
