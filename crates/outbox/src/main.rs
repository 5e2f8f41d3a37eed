//! `cargo run -p outbox -- --help`: the relay's sweep through `sweep::cli`.

fn main() -> std::process::ExitCode {
    outbox::app().main()
}
