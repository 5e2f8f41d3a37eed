//! Writing command lines for a person to paste: a text as one shell word
//! ([`shell_quote`]), and how to run this program again ([`invocation`]).

use std::path::Path;

/// How to run this program again, for hints a person can paste: the name it
/// was invoked by when that finds it on `PATH`, `cargo run -p triage --`
/// when it runs from a cargo build directory, else the path it was invoked
/// by.
pub fn invocation() -> String {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    program_name(Path::new(&argv0), std::env::var_os("PATH").as_deref())
}

/// [`invocation`] for a given `argv[0]` and `PATH`.
pub fn program_name(argv0: &Path, path_var: Option<&std::ffi::OsStr>) -> String {
    let shown = argv0.to_string_lossy();
    if shown.is_empty() {
        return "cargo run -p triage --".to_owned();
    }
    if !shown.contains('/') {
        // Found by the shell on PATH.
        return shell_quote(&shown);
    }
    let Some(file) = argv0.file_name() else {
        return shell_quote(&shown);
    };
    let me = std::fs::canonicalize(argv0).ok();
    if let (Some(me), Some(path_var)) = (&me, path_var) {
        for dir in std::env::split_paths(path_var) {
            if std::fs::canonicalize(dir.join(file)).ok().as_ref() == Some(me) {
                return shell_quote(&file.to_string_lossy());
            }
        }
    }
    // A cargo build directory: target/<profile>/triage beside .fingerprint.
    if let Some(profile_dir) = argv0.parent() {
        let profile = profile_dir
            .file_name()
            .map(|p| p.to_string_lossy().into_owned());
        if profile_dir.join(".fingerprint").is_dir() {
            return match profile.as_deref() {
                Some("debug") => "cargo run -p triage --".to_owned(),
                Some("release") => "cargo run --release -p triage --".to_owned(),
                Some(other) => format!("cargo run --profile {} -p triage --", shell_quote(other)),
                None => "cargo run -p triage --".to_owned(),
            };
        }
    }
    shell_quote(&shown)
}

/// `text` as one shell word: as it is when that is safe, else in single
/// quotes.
pub fn shell_quote(text: &str) -> String {
    let safe = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b));
    if safe {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}
