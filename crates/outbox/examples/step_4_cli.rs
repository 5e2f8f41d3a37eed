//! `cargo run -p outbox --example step_4_cli -- --help`
#[path = "step_3_power.rs"]
mod power;

pub fn app() -> sweep::cli::App {
    sweep::cli::App::new("cargo run -p outbox --example step_4_cli --")
        .subject(power::Payday { synced: false })
        .subject(power::Payday { synced: true })
}

fn main() -> std::process::ExitCode {
    app().main()
}
