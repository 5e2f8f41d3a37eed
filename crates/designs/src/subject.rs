//! A design running a scripted job, as a sweep subject: its row's name, and
//! the world, life, judge and description the sweep asks for.

use durable::testing::{Fault, PersistenceModel};
use sweep::{
    power::{Boot, CrashState},
    Counter, Subject, Verdict,
};
use tracker::LogLayout;

use crate::design::Design;
use crate::durable_loop::Loop;
use crate::judge;
use crate::modes::{Modes, Person};
use crate::script::Script;
use crate::world::{Storage, World};

impl Design {
    /// This design as a sweep subject running `script`.
    pub fn subject(self, script: &Script, storage: Storage) -> DesignSubject {
        DesignSubject {
            design: self,
            script: script.clone(),
            storage,
            modes: Modes::default(),
            model: PersistenceModel::default(),
            faults: None,
            records: std::sync::Arc::default(),
        }
    }
}

/// A design running a scripted job, as a sweep subject.
#[derive(Clone, Debug)]
pub struct DesignSubject {
    design: Design,
    script: Script,
    storage: Storage,
    modes: Modes,
    model: PersistenceModel,
    faults: Option<Vec<Fault>>,
    /// The judge's count of records by tracker (the script never changes;
    /// the key says whether judged by intent).
    records: std::sync::Arc<judge::RecordsMemo>,
}

impl DesignSubject {
    /// Each world's checkpoint directory goes through a
    /// [`FaultDir`](durable::testing::FaultDir) armed with `faults`
    /// ([`World::faults`]): the disk answers those calls with an error, once
    /// each. An empty list counts the calls ([`FaultDir::sites`](durable::testing::FaultDir::sites)).
    pub fn with_faults(mut self, faults: Vec<Fault>) -> Self {
        self.faults = Some(faults);
        self
    }

    /// The persistence model of the [`ENUMERATED`] state (its bound on the
    /// disks per crash, its block size and torn prefixes).
    pub fn with_persistence(mut self, model: PersistenceModel) -> Self {
        self.model = model;
        self
    }

    /// The same design run with `modes`.
    pub fn with_modes(mut self, modes: Modes) -> Self {
        self.modes = modes;
        self
    }

    /// The modes this subject runs with.
    pub fn modes(&self) -> &Modes {
        &self.modes
    }

    /// The design.
    pub fn design(&self) -> Design {
        self.design
    }

    /// The loop a life of this subject runs.
    fn durable_loop(&self) -> Loop<'_> {
        Loop {
            design: self.design,
            script: &self.script,
            modes: &self.modes,
        }
    }
}

impl DesignSubject {
    /// The row title, with the crash state after the writer in a power-loss
    /// world (`keys and markers | real writer | lose`).
    fn title_in(&self, state: Option<&CrashState>) -> String {
        let mut name = self.design.title().to_owned();
        if let Some(p) = self.modes.power {
            name.push_str(&format!(" | {}", p.writer.title()));
            if let Some(s) = state {
                name.push_str(&format!(" | {s}"));
            }
        }
        if self.modes.keys && !self.design.sends_keys() {
            name.push_str(" + keys");
        }
        if let Person::WrongAt(k) = self.modes.person {
            name.push_str(&format!(" | person wrong at question {k}"));
        }
        if let Some(m) = self.modes.model {
            name.push_str(&format!(" | {}", m.title()));
        }
        match self.modes.tracker {
            Some(LogLayout::KeysInLog) => name.push_str(" | tracker crashes"),
            Some(LogLayout::KeysInIndexOnly) => {
                name.push_str(" | tracker crashes, keys in its index only")
            }
            None => {}
        }
        name
    }
}

pub use durable::testing::ENUMERATED;

impl Subject for DesignSubject {
    type World = World;

    /// The row's name; in a power-loss world with the variant's own crash
    /// state (a sweep over other states titles their rows with
    /// [`PowerCuts::row_title`](sweep::power::PowerCuts::row_title)).
    fn name(&self) -> String {
        let own = self.modes.power.map(|p| CrashState::from(p.state));
        self.title_in(own.as_ref())
    }

    fn counters(&self) -> Vec<Counter> {
        judge::counters(self.design, &self.modes)
    }

    fn world(&self) -> Result<World, sweep::LifeError> {
        let keyed = self.design.sends_keys_with(&self.modes);
        let mut w = World::new(&self.modes, self.storage, keyed);
        if let Some(faults) = &self.faults {
            w.arm_faults(faults);
        }
        Ok(w)
    }

    fn life(&self, w: &mut World) -> Result<(), sweep::LifeError> {
        let result = w.boot().and_then(|_| self.durable_loop().run_life(w));
        w.shutdown(&result);
        Ok(result?)
    }

    fn judge(&self, w: &World) -> Verdict {
        let v = judge::judge(&self.script, &self.modes, w, &self.records);
        match w.sampled_cuts() {
            0 => v,
            n => v.note(format!(
                "{n} power cut(s) chose from a sample of their disks"
            )),
        }
    }

    fn describe(&self, w: &World) -> String {
        w.describe()
    }

    fn share(&self) -> Option<&dyn sweep::sharing::Share<Self::World>> {
        Some(self)
    }

    fn points_not_taken(&self) -> Vec<&'static str> {
        self.design.points_not_taken()
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<World>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<World> for DesignSubject {
    fn row_title(&self, _subject: &str, state: &CrashState) -> String {
        match self.modes.power {
            Some(_) => self.title_in(Some(state)),
            None => self.title_in(None),
        }
    }

    /// A power-loss world runs in every named disk state and in
    /// [`ENUMERATED`]; others in the process state alone.
    fn crash_states(&self) -> Vec<CrashState> {
        durable::testing::Power::crash_states(self.modes.power)
    }

    fn enumerates(&self, state: &CrashState) -> bool {
        durable::testing::Power::enumerates(self.modes.power, state)
    }

    fn crash_disks(&self, w: &World) -> Option<u32> {
        w.last_cut()
    }

    /// The variant's own state.
    fn default_crash_states(&self) -> Vec<CrashState> {
        durable::testing::Power::default_crash_states(self.modes.power)
    }

    fn boot(&self, w: &mut World, ctx: &Boot) -> Result<(), sweep::LifeError> {
        if self.enumerates(ctx.state()) {
            w.power_boot_enumerated(self.model, ctx.disk().unwrap_or(0));
            return Ok(());
        }
        w.power_boot(ctx.state().try_into()?);
        Ok(())
    }

    fn shutdown(&self, w: &mut World, _ctx: &Boot) {
        w.power_shutdown();
    }
}

impl sweep::sharing::Share<World> for DesignSubject {
    fn copy(&self, w: &World) -> Option<World> {
        w.snapshot()
    }

    fn fingerprint(&self, w: &World) -> Option<sweep::sharing::Fingerprint> {
        w.fingerprint()
    }

    fn capture(&self, w: &World) -> Option<sweep::sharing::Capture<World>> {
        w.capture()
    }

    fn probe(&self, w: &World) -> Option<sweep::sharing::Probe> {
        let scripted =
            self.modes.model.unwrap_or_default() == crate::modes::ModelBehaviour::Scripted;
        w.probe(scripted, self.modes.person == Person::Right)
    }

    fn graft(
        &self,
        at: &sweep::sharing::Tally,
        from: &sweep::sharing::Tally,
        end: &World,
    ) -> Option<World> {
        end.graft(at, from)
    }

    fn shift(
        &self,
        at: &sweep::sharing::Tally,
        from: &sweep::sharing::Tally,
        to: &sweep::sharing::Tally,
    ) -> Option<sweep::sharing::Tally> {
        World::shift(at, from, to)
    }
}
