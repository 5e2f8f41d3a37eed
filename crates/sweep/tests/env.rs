//! `sweep::cli::Env::from_process` reads `CI` from the process's
//! environment. In a test binary of its own: it sets `CI`, which no other
//! test may see.

use sweep::cli::Env;

#[test]
fn from_process_reads_ci_from_the_environment() {
    std::env::set_var("CI", "from-the-process");
    assert_eq!(Env::from_process().ci.as_deref(), Some("from-the-process"));
    std::env::remove_var("CI");
    assert_eq!(Env::from_process().ci, None);
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
