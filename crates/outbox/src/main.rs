//! `cargo run -p outbox -- --help`: the relay's sweep through `sweep::cli`.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    outbox::app().main()
}
