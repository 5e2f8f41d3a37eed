//! An object-safe view of any [`Subject`], for a program that keeps
//! subjects of different world types in one list.

use crate::config::Config;
use crate::crash_state::CrashState;
use crate::error::Error;
use crate::report::{Report, ScenarioResult};
use crate::runner::{rerun, rerun_keeping, run};
use crate::subject::{cuts, Subject};

/// An object-safe view of any [`Subject`], so a program can keep subjects of
/// different world types in one list (a command line choosing a variant,
/// as `sweep::cli` does). Every `Subject` is one.
pub trait DynSubject: Sync {
    /// The subject's name.
    fn name(&self) -> String;
    /// [`run`](crate::run) on this subject.
    fn run(&self, config: &Config) -> Result<Report, Error>;
    /// [`rerun`](crate::rerun) on this subject.
    fn rerun(&self, config: &Config, scenario: &str) -> Result<ScenarioResult, Error>;
    /// [`rerun_keeping`](crate::rerun_keeping) on this subject. Default:
    /// [`rerun`](DynSubject::rerun), keeping nothing.
    fn rerun_keeping(
        &self,
        config: &Config,
        scenario: &str,
        _to: &std::path::Path,
    ) -> Result<(ScenarioResult, std::io::Result<bool>), Error> {
        self.rerun(config, scenario).map(|r| (r, Ok(false)))
    }
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
}

impl<S: Subject> DynSubject for S {
    fn name(&self) -> String {
        Subject::name(self)
    }
    fn run(&self, config: &Config) -> Result<Report, Error> {
        run(self, config)
    }
    fn rerun(&self, config: &Config, scenario: &str) -> Result<ScenarioResult, Error> {
        rerun(self, config, scenario)
    }
    fn rerun_keeping(
        &self,
        config: &Config,
        scenario: &str,
        to: &std::path::Path,
    ) -> Result<(ScenarioResult, std::io::Result<bool>), Error> {
        rerun_keeping(self, config, scenario, to)
    }
    fn crash_states(&self) -> Vec<CrashState> {
        cuts(self).crash_states()
    }
    fn default_crash_states(&self) -> Vec<CrashState> {
        cuts(self).default_crash_states()
    }
}
