//! What is read from the process's environment: `CI`
//! (`sweep::cli::Env::from_process`, `sweep::report::snapshot::blessing`),
//! `CRASHSWEEP_BLESS`, and the arguments (`sweep::cli::main`). In a test
//! binary of its own: it sets variables no other test may see.

use sweep::cli::{App, Env, EXIT_FAILED};
use sweep::{Counter, LifeError, Subject, Verdict};

/// One point, nothing to count: a subject whose every scenario passes.
struct Tally;
impl Subject for Tally {
    type World = u32;
    fn name(&self) -> String {
        "tally".into()
    }
    fn counters(&self) -> Vec<Counter> {
        vec![Counter::new("n")]
    }
    fn world(&self) -> Result<u32, sweep::LifeError> {
        Ok(0)
    }
    fn life(&self, w: &mut u32) -> Result<(), LifeError> {
        *w = 1;
        crashpoint::point!("counted");
        Ok(())
    }
    fn judge(&self, w: &u32) -> Verdict {
        Verdict::new().count("n", u64::from(*w))
    }
}

/// One test, so that nothing else reads the variables while it sets them.
#[test]
fn ci_and_crashsweep_bless_are_read_from_the_environment() {
    std::env::set_var("CI", "from-the-process");
    assert_eq!(Env::from_process().ci.as_deref(), Some("from-the-process"));
    std::env::set_var("CRASHSWEEP_BLESS", "1");
    assert!(!sweep::report::snapshot::blessing(), "never under CI");
    std::env::remove_var("CI");
    assert_eq!(Env::from_process().ci, None);
    assert!(sweep::report::snapshot::blessing());
    // The command line blesses on its --bless flag only: the variable
    // does not rewrite (here: create) its reviewed table behind its back.
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("table.txt");
    let app = App::new("mysweep").subject(Tally).snapshot(&snap);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = app.run(["mysweep"], &Env::from_process(), &mut out, &mut err);
    let err = String::from_utf8(err).unwrap();
    assert_eq!(code, EXIT_FAILED, "{err}");
    assert!(err.contains("table.txt does not exist"), "{err}");
    assert!(err.contains("rerunning this command with --bless"), "{err}");
    assert!(!snap.exists(), "written without --bless");
    std::env::remove_var("CRASHSWEEP_BLESS");
    assert!(!sweep::report::snapshot::blessing());
}

/// `sweep::cli::main` runs the command line on the process's own
/// arguments. Here, in a child process of this test binary, they are
/// libtest's (`NAME --exact --nocapture`), which the sweep's command line
/// refuses: exit 2 and an `error:` line, not a silent success.
#[test]
fn main_runs_on_the_process_arguments() {
    const CHILD: &str = "SWEEP_CLI_MAIN_CHILD";
    const NAME: &str = "main_runs_on_the_process_arguments";
    if std::env::var_os(CHILD).is_some() {
        let code = sweep::cli::main("mysweep", Vec::new());
        println!("child exit: {code:?}");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([NAME, "--exact", "--nocapture"])
        .env(CHILD, "1")
        .env_remove("CI")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "child exit: {:?}",
        std::process::ExitCode::from(sweep::cli::EXIT_USAGE)
    );
    assert!(stdout.contains(&want), "{want} in {stdout}\n{stderr}");
    assert!(stderr.contains("error:"), "{stderr}");
}
