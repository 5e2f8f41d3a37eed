//! An object-safe view of any [`Subject`], for a program that keeps
//! subjects of different world types in one list.

use crate::config::Config;
use crate::crash_state::CrashState;
use crate::error::Error;
use crate::progress::Progress;
use crate::report::{Report, ScenarioResult};
use crate::runner::{run_counted, run_one, run_with, Stats};
use crate::scenario::Scenario;
use crate::subject::Subject;

/// An object-safe view of any [`Subject`], so a program can keep subjects of
/// different world types in one list (a command line choosing a variant).
pub trait DynSubject: Sync {
    /// The subject's name.
    fn name(&self) -> String;
    /// [`run_with`] on this subject.
    fn sweep(&self, config: &Config, progress: &(dyn Fn(Progress) + Sync))
        -> Result<Report, Error>;
    /// [`run_one`] on this subject.
    fn scenario(&self, scenario: &Scenario) -> ScenarioResult;
    /// [`PowerCuts::crash_states`](crate::power::PowerCuts::crash_states):
    /// the states this subject can be swept in (`process` alone for a
    /// subject without [`Subject::power_cuts`]).
    fn crash_states(&self) -> Vec<CrashState> {
        vec![CrashState::PROCESS]
    }
    /// [`PowerCuts::default_crash_states`](crate::power::PowerCuts::default_crash_states):
    /// the states a sweep that names none runs.
    fn default_crash_states(&self) -> Vec<CrashState> {
        self.crash_states().into_iter().take(1).collect()
    }
    /// [`run_counted`] on this subject.
    fn sweep_counted(
        &self,
        config: &Config,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<(Report, Stats), Error>;
}

impl<S: Subject> DynSubject for S {
    fn name(&self) -> String {
        Subject::name(self)
    }
    fn sweep(
        &self,
        config: &Config,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<Report, Error> {
        run_with(self, config, progress)
    }
    fn scenario(&self, scenario: &Scenario) -> ScenarioResult {
        run_one(self, scenario)
    }
    fn crash_states(&self) -> Vec<CrashState> {
        crate::subject::cuts(self).crash_states()
    }
    fn default_crash_states(&self) -> Vec<CrashState> {
        crate::subject::cuts(self).default_crash_states()
    }
    fn sweep_counted(
        &self,
        config: &Config,
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Result<(Report, Stats), Error> {
        run_counted(self, config, progress)
    }
}
