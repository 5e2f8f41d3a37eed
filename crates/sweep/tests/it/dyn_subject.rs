//! `DynSubject`'s crash states: the blanket view of a `Subject` forwards
//! them, and a hand-written `DynSubject` gets `process` and "the first
//! state" by default. Also `CrashState::name`.

use sweep::{
    power::{CrashState, PowerCuts},
    report::ScenarioResult,
    Config, Counter, DynSubject, Error, LifeError, Report, Subject, Verdict,
};

const LOSE: CrashState = CrashState::named("lose");

/// A subject whose first state, and so its default (the trait's own
/// `default_crash_states`), is not `process`.
struct LoseFirst;

impl Subject for LoseFirst {
    type World = ();
    fn name(&self) -> String {
        "lose first".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("n")]
    }
    fn world(&self) -> Result<(), sweep::LifeError> {
        Ok(())
    }
    fn life(&self, _: &mut ()) -> Result<(), LifeError> {
        crashpoint::point!("p");
        Ok(())
    }
    fn judge(&self, _: &()) -> Verdict {
        Verdict::new().count("n", 0)
    }

    fn power_cuts(&self) -> Option<&dyn sweep::power::PowerCuts<()>> {
        Some(self)
    }
}

impl sweep::power::PowerCuts<()> for LoseFirst {
    fn crash_states(&self) -> Vec<CrashState> {
        vec![LOSE, CrashState::PROCESS]
    }
}

#[test]
fn the_view_of_a_subject_forwards_its_states() {
    let s: &dyn DynSubject = &LoseFirst;
    assert_eq!(s.crash_states(), vec![LOSE, CrashState::PROCESS]);
    assert_eq!(s.default_crash_states(), vec![LOSE]);
}

/// The methods every `DynSubject` must write, forwarding to `LoseFirst`.
macro_rules! required_by_hand {
    ($name:literal) => {
        fn name(&self) -> String {
            $name.into()
        }
        fn run(&self, config: &Config) -> Result<Report, Error> {
            sweep::run(&LoseFirst, config)
        }
        fn rerun(&self, config: &Config, scenario: &str) -> Result<ScenarioResult, Error> {
            sweep::rerun(&LoseFirst, config, scenario)
        }
    };
}

/// A `DynSubject` written by hand with the crash states it says, and the
/// trait's default for its default states.
struct ByHand(Vec<CrashState>);

impl DynSubject for ByHand {
    required_by_hand!("by hand");
    fn crash_states(&self) -> Vec<CrashState> {
        self.0.clone()
    }
}

/// Implements only the required methods: the trait's defaults.
struct Bare;

impl DynSubject for Bare {
    required_by_hand!("bare");
}

#[test]
fn a_hand_written_dyn_subject_defaults_to_process_and_its_first_state() {
    assert_eq!(Bare.crash_states(), vec![CrashState::PROCESS]);
    assert_eq!(Bare.default_crash_states(), vec![CrashState::PROCESS]);
    let two = ByHand(vec![LOSE, CrashState::PROCESS]);
    assert_eq!(two.default_crash_states(), vec![LOSE]);
}

#[test]
fn a_state_is_its_name() {
    assert_eq!(LOSE.name(), "lose");
    assert_eq!(CrashState::PROCESS.name(), "process");
    assert_eq!(CrashState::new("power-cut").unwrap().name(), "power-cut");
}

#[test]
fn a_subjects_default_state_is_its_first() {
    assert_eq!(PowerCuts::default_crash_states(&LoseFirst), vec![LOSE]);
    let r = sweep::run(&LoseFirst, &Config::default()).unwrap();
    assert!(r.scenarios.iter().all(|s| s.scenario.state == LOSE));
}
