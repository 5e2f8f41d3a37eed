//! The judge of a process world after the final life: a shell command
//! that prints one JSON object of counters, or a closure, as a [`Verdict`].

use std::ffi::OsStr;
use std::process::{Command, Stdio};

use super::builder::{Judge, Process};
use super::child::{describe_status, without_protocol};
use super::count::Kind;
use super::world::ProcessWorld;
use super::{LOGS_VAR, SERVICE_VAR};
use crate::judge::Verdict;

impl Process {
    pub(super) fn try_judge(&self, world: &ProcessWorld) -> Result<Verdict, String> {
        match &self.judge {
            Judge::Fn(f) => f(world),
            Judge::Command(cmd) => {
                let cmd = world.expand(OsStr::new(cmd)).to_string_lossy().into_owned();
                let mut command = Command::new("sh");
                if let Some(url) = world.service_url() {
                    command.env(SERVICE_VAR, url);
                }
                command
                    .arg("-c")
                    .arg(&cmd)
                    .current_dir(world.dir())
                    .env(LOGS_VAR, world.logs())
                    .envs(self.env.iter().map(|(k, v)| (k, v)));
                self.count.one(Kind::Judge);
                let out = without_protocol(&mut command)
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("the judge `{cmd}` could not start: {e}"))?;
                let stdout = String::from_utf8_lossy(&out.stdout);
                if !out.status.success() {
                    return Err(format!(
                        "the judge `{cmd}` {}; its standard error: {}",
                        describe_status(out.status),
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                parse_counts(&stdout)
                    .map_err(|e| format!("the judge `{cmd}` printed {}: {e}", stdout.trim()))
            }
        }
    }
}

/// The judge's JSON object as counts.
fn parse_counts(stdout: &str) -> Result<Verdict, String> {
    let value: serde_json::Value =
        serde_json::from_str(stdout.trim()).map_err(|e| format!("not JSON ({e})"))?;
    let obj = value.as_object().ok_or("not a JSON object of counters")?;
    let mut v = Verdict::new();
    for (k, n) in obj {
        let n = n
            .as_u64()
            .ok_or_else(|| format!("the counter {k:?} is {n}, not a whole number ≥ 0"))?;
        v = v.count(k, n);
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_numbers_in_an_object() {
        let v = parse_counts(r#"{"b": 2, "a": 0}"#).unwrap();
        assert_eq!(v.counts, [("b".to_owned(), 2), ("a".to_owned(), 0)]);
        for bad in ["[1]", r#"{"a": -1}"#, r#"{"a": 1.5}"#, "nope", ""] {
            assert!(parse_counts(bad).is_err(), "{bad}");
        }
    }
}
