//! The subject type erased at the runner's boundary, so the engine compiles
//! once, here.
//!
//! [`run`](crate::run) and [`rerun`](crate::rerun) are generic over the
//! subject, and so were the runner, the nets, the replayer, shared lives,
//! shared tails and the plan below them: each crate (and each test binary)
//! that swept a subject compiled the whole engine again for its world type.
//! Now the public entry points wrap the subject in an [`Adapter`], whose
//! world is an [`AnyWorld`] (a `Box<dyn Any + Send>` holding the subject's
//! own world), and hand it to the engine as one concrete type, [`Erased`]:
//! the engine is instantiated for `Erased` alone, inside this crate, and a
//! caller compiles only the adapter's few small methods.
//!
//! Every [`AnyWorld`] the engine holds was made by the same adapter's
//! [`world`](Subject::world) (or by its [`Share::copy`], [`Capture`] or
//! [`Share::graft`], which box the subject's own world too), so a downcast
//! cannot fail. If it ever did (a bug of this crate), the adapter panics with
//! a message naming the subject and both types: inside a life or a judge that
//! panic fails the scenario with that message (a real panic, not an injected
//! crash), and elsewhere it ends the sweep. It never passes quietly.

use std::any::Any;

use crate::error::LifeError;
use crate::judge::{Counter, Verdict};
use crate::power::{Boot, CrashState, PowerCuts};
use crate::sharing::{Capture, Fingerprint, Probe, Share, Tally};
use crate::subject::Subject;

/// A subject's world, boxed: the world type every erased subject shares.
pub(crate) type AnyWorld = Box<dyn Any + Send>;

/// The subject's world inside `world`. Panics (an internal invariant: every
/// world the engine holds was boxed by this adapter) with a message naming
/// the subject and the types if it is not one.
fn world_ref<'w, S: Subject>(subject: &S, world: &'w AnyWorld) -> &'w S::World {
    match (**world).downcast_ref::<S::World>() {
        Some(w) => w,
        None => mismatch(subject),
    }
}

/// [`world_ref`], mutable.
fn world_mut<'w, S: Subject>(subject: &S, world: &'w mut AnyWorld) -> &'w mut S::World {
    match (**world).downcast_mut::<S::World>() {
        Some(w) => w,
        None => mismatch(subject),
    }
}

/// The panic of a world that is not the subject's: a bug of this crate.
#[cold]
fn mismatch<S: Subject>(subject: &S) -> ! {
    panic!(
        "sweep internal invariant broken: subject {:?} was handed a world that is not its own \
         (expected {}); please report this as a bug of the sweep crate",
        subject.name(),
        std::any::type_name::<S::World>(),
    )
}

/// Box a subject's world.
fn boxed<W: Send + 'static>(world: W) -> AnyWorld {
    Box::new(world)
}

/// The object-safe face of any [`Subject`], over [`AnyWorld`]: what
/// [`Erased`] calls.
pub(crate) trait ErasedSubject: Sync {
    fn name(&self) -> String;
    fn counters(&self) -> Vec<Counter>;
    fn world(&self) -> Result<AnyWorld, LifeError>;
    fn life(&self, world: &mut AnyWorld) -> Result<(), LifeError>;
    fn judge(&self, world: &AnyWorld) -> Verdict;
    fn describe(&self, world: &AnyWorld) -> String;
    fn keep(&self, world: &AnyWorld, to: &std::path::Path) -> std::io::Result<bool>;
    fn power_cuts(&self) -> Option<&dyn PowerCuts<AnyWorld>>;
    fn share(&self) -> Option<&dyn Share<AnyWorld>>;
    fn points_not_taken(&self) -> Vec<&'static str>;
}

/// Any subject, seen through [`AnyWorld`]. It is its own [`PowerCuts`] and
/// [`Share`], offered exactly when the subject offers its own.
pub(crate) struct Adapter<'s, S>(pub(crate) &'s S);

impl<S: Subject> ErasedSubject for Adapter<'_, S> {
    fn name(&self) -> String {
        self.0.name()
    }
    fn counters(&self) -> Vec<Counter> {
        self.0.counters()
    }
    fn world(&self) -> Result<AnyWorld, LifeError> {
        self.0.world().map(boxed)
    }
    fn life(&self, world: &mut AnyWorld) -> Result<(), LifeError> {
        self.0.life(world_mut(self.0, world))
    }
    fn judge(&self, world: &AnyWorld) -> Verdict {
        self.0.judge(world_ref(self.0, world))
    }
    fn describe(&self, world: &AnyWorld) -> String {
        self.0.describe(world_ref(self.0, world))
    }
    fn keep(&self, world: &AnyWorld, to: &std::path::Path) -> std::io::Result<bool> {
        self.0.keep(world_ref(self.0, world), to)
    }
    fn power_cuts(&self) -> Option<&dyn PowerCuts<AnyWorld>> {
        self.0
            .power_cuts()
            .map(|_| self as &dyn PowerCuts<AnyWorld>)
    }
    fn share(&self) -> Option<&dyn Share<AnyWorld>> {
        self.0.share().map(|_| self as &dyn Share<AnyWorld>)
    }
    fn points_not_taken(&self) -> Vec<&'static str> {
        self.0.points_not_taken()
    }
}

impl<S: Subject> Adapter<'_, S> {
    /// The subject's own [`PowerCuts`]. Only called through
    /// [`ErasedSubject::power_cuts`], which offers the adapter's exactly when
    /// the subject offers its own.
    fn cuts(&self) -> &dyn PowerCuts<S::World> {
        match self.0.power_cuts() {
            Some(cuts) => cuts,
            None => panic!(
                "sweep internal invariant broken: subject {:?} offered power cuts, then none",
                self.0.name()
            ),
        }
    }

    /// The subject's own [`Share`], as [`cuts`](Self::cuts).
    fn shared(&self) -> &dyn Share<S::World> {
        match self.0.share() {
            Some(share) => share,
            None => panic!(
                "sweep internal invariant broken: subject {:?} offered shared lives, then none",
                self.0.name()
            ),
        }
    }
}

impl<S: Subject> PowerCuts<AnyWorld> for Adapter<'_, S> {
    fn crash_states(&self) -> Vec<CrashState> {
        self.cuts().crash_states()
    }
    fn default_crash_states(&self) -> Vec<CrashState> {
        self.cuts().default_crash_states()
    }
    fn boot(&self, world: &mut AnyWorld, boot: &Boot) -> Result<(), LifeError> {
        self.cuts().boot(world_mut(self.0, world), boot)
    }
    fn shutdown(&self, world: &mut AnyWorld, boot: &Boot) {
        self.cuts().shutdown(world_mut(self.0, world), boot)
    }
    fn enumerates(&self, state: &CrashState) -> bool {
        self.cuts().enumerates(state)
    }
    fn crash_disks(&self, world: &AnyWorld) -> Option<u32> {
        self.cuts().crash_disks(world_ref(self.0, world))
    }
    fn row_title(&self, subject: &str, state: &CrashState) -> String {
        self.cuts().row_title(subject, state)
    }
}

impl<S: Subject> Share<AnyWorld> for Adapter<'_, S> {
    fn copy(&self, world: &AnyWorld) -> Option<AnyWorld> {
        self.shared().copy(world_ref(self.0, world)).map(boxed)
    }
    fn fingerprint(&self, world: &AnyWorld) -> Option<Fingerprint> {
        self.shared().fingerprint(world_ref(self.0, world))
    }
    fn capture(&self, world: &AnyWorld) -> Option<Capture<AnyWorld>> {
        let capture = self.shared().capture(world_ref(self.0, world))?;
        Some(Capture::from_fn(move |hit| {
            match hit {
                Some(h) => capture.take_at(h),
                None => capture.take(),
            }
            .map(boxed)
        }))
    }
    fn probe(&self, world: &AnyWorld) -> Option<Probe> {
        self.shared().probe(world_ref(self.0, world))
    }
    fn graft(&self, at: &Tally, from: &Tally, end: &AnyWorld) -> Option<AnyWorld> {
        self.shared()
            .graft(at, from, world_ref(self.0, end))
            .map(boxed)
    }
    fn shift(&self, at: &Tally, from: &Tally, to: &Tally) -> Option<Tally> {
        self.shared().shift(at, from, to)
    }
}

/// The one subject type the engine is compiled for: any subject behind an
/// [`ErasedSubject`].
pub(crate) struct Erased<'s>(pub(crate) &'s dyn ErasedSubject);

impl Subject for Erased<'_> {
    type World = AnyWorld;
    fn name(&self) -> String {
        self.0.name()
    }
    fn counters(&self) -> Vec<Counter> {
        self.0.counters()
    }
    fn world(&self) -> Result<AnyWorld, LifeError> {
        self.0.world()
    }
    fn life(&self, world: &mut AnyWorld) -> Result<(), LifeError> {
        self.0.life(world)
    }
    fn judge(&self, world: &AnyWorld) -> Verdict {
        self.0.judge(world)
    }
    fn describe(&self, world: &AnyWorld) -> String {
        self.0.describe(world)
    }
    fn keep(&self, world: &AnyWorld, to: &std::path::Path) -> std::io::Result<bool> {
        self.0.keep(world, to)
    }
    fn power_cuts(&self) -> Option<&dyn PowerCuts<AnyWorld>> {
        self.0.power_cuts()
    }
    fn share(&self) -> Option<&dyn Share<AnyWorld>> {
        self.0.share()
    }
    fn points_not_taken(&self) -> Vec<&'static str> {
        self.0.points_not_taken()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subject whose opt-ins are switched on or off.
    struct Toy {
        cuts: bool,
        share: bool,
    }

    impl Subject for Toy {
        type World = Vec<u32>;
        fn name(&self) -> String {
            "toy".into()
        }
        fn counters(&self) -> Vec<Counter> {
            vec![Counter::new("n")]
        }
        fn world(&self) -> Result<Vec<u32>, LifeError> {
            Ok(vec![1])
        }
        fn life(&self, world: &mut Vec<u32>) -> Result<(), LifeError> {
            world.push(2);
            Ok(())
        }
        fn judge(&self, world: &Vec<u32>) -> Verdict {
            Verdict::new().count("n", world.len() as u64)
        }
        fn describe(&self, world: &Vec<u32>) -> String {
            format!("{world:?}")
        }
        fn power_cuts(&self) -> Option<&dyn PowerCuts<Vec<u32>>> {
            self.cuts.then_some(self as _)
        }
        fn share(&self) -> Option<&dyn Share<Vec<u32>>> {
            self.share.then_some(self as _)
        }
    }

    impl PowerCuts<Vec<u32>> for Toy {
        fn crash_states(&self) -> Vec<CrashState> {
            vec![CrashState::PROCESS, CrashState::named("all")]
        }
        fn crash_disks(&self, world: &Vec<u32>) -> Option<u32> {
            Some(world.len() as u32)
        }
    }

    impl Share<Vec<u32>> for Toy {
        fn copy(&self, world: &Vec<u32>) -> Option<Vec<u32>> {
            Some(world.iter().map(|n| n * 10).collect())
        }
        fn fingerprint(&self, _world: &Vec<u32>) -> Option<Fingerprint> {
            None
        }
        fn capture(&self, world: &Vec<u32>) -> Option<Capture<Vec<u32>>> {
            let w = world.clone();
            Some(Capture::new(move || Some(w.clone())))
        }
    }

    #[test]
    fn the_adapter_passes_the_subject_through_with_its_world_boxed() {
        let toy = Toy {
            cuts: true,
            share: true,
        };
        let adapter = Adapter(&toy);
        let erased = Erased(&adapter);
        let mut world = erased.world().unwrap();
        erased.life(&mut world).unwrap();
        assert_eq!(erased.describe(&world), "[1, 2]");
        assert_eq!(erased.judge(&world), Verdict::new().count("n", 2));
        let cuts = erased.power_cuts().expect("the subject's power cuts");
        assert_eq!(cuts.crash_states().len(), 2);
        assert_eq!(cuts.crash_disks(&world), Some(2));
        let share = erased.share().expect("the subject's sharing");
        let copy = share.copy(&world).unwrap();
        assert_eq!(erased.describe(&copy), "[10, 20]");
        let captured = share.capture(&world).unwrap().take().unwrap();
        assert_eq!(erased.describe(&captured), "[1, 2]");
        assert!(share.probe(&world).is_none());
    }

    #[test]
    fn the_opt_ins_are_offered_exactly_when_the_subject_offers_them() {
        for (cuts, share) in [(false, false), (true, false), (false, true)] {
            let toy = Toy { cuts, share };
            let adapter = Adapter(&toy);
            let erased = Erased(&adapter);
            assert_eq!(erased.power_cuts().is_some(), cuts);
            assert_eq!(erased.share().is_some(), share);
        }
    }

    #[test]
    #[should_panic(
        expected = "sweep internal invariant broken: subject \"toy\" was handed a world"
    )]
    fn a_world_of_another_type_panics_naming_the_subject() {
        let toy = Toy {
            cuts: false,
            share: false,
        };
        let adapter = Adapter(&toy);
        let mut foreign: AnyWorld = Box::new("not a Vec<u32>");
        let _ = Erased(&adapter).life(&mut foreign);
    }
}
