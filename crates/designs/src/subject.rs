//! A design running a scripted job, as a sweep subject: its row's name, and
//! the world, life, judge and description the sweep asks for.

use sweep::{Counter, Subject, Verdict};
use tracker::LogLayout;

use crate::design::Design;
use crate::durable_loop::Loop;
use crate::harder_worlds::{Modes, Person};
use crate::judge;
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
}

impl DesignSubject {
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

impl Subject for DesignSubject {
    type World = World;

    fn name(&self) -> String {
        let mut name = self.design.title().to_owned();
        if let Some(p) = self.modes.power {
            name.push_str(&format!(" | {} | {}", p.writer.title(), p.state.slug()));
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

    fn counters(&self) -> Vec<Counter> {
        judge::counters(self.design, &self.modes)
    }

    fn world(&self) -> World {
        let keyed = self.design.sends_keys_with(&self.modes);
        World::new(&self.modes, self.storage, keyed)
    }

    fn life(&self, w: &mut World) -> Result<(), sweep::LifeError> {
        let result = w.boot().and_then(|_| self.durable_loop().run_life(w));
        w.shutdown(&result);
        Ok(result?)
    }

    fn judge(&self, w: &World) -> Verdict {
        judge::judge(&self.script, &self.modes, w)
    }

    fn describe(&self, w: &World) -> String {
        w.describe()
    }

    fn snapshot(&self, w: &World) -> Option<World> {
        w.snapshot()
    }

    fn fingerprint(&self, w: &World) -> Option<sweep::Fingerprint> {
        w.fingerprint()
    }
}
