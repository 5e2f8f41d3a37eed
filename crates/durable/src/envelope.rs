//! The file's layout: durable's envelope around the user's state, and the
//! version of that layout.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::run_id::RunId;

/// The version of the checkpoint file format (durable's envelope) this build
/// writes and reads. A file of another version is refused with
/// [`Error::UnsupportedVersion`](crate::Error::UnsupportedVersion) instead of being misread.
///
/// Version 1 was the agent's state written flat, with no envelope; version 2
/// wraps any state type: `{"version": 2, "run": …, "resumes": …, "state": …,
/// "epoch": …}` (`epoch` came later within version 2: a file without it reads
/// as epoch 0).
/// A state type that changes meaning keeps its own version inside `S`.
pub const FORMAT_VERSION: u32 = 2;

/// The file's layout: durable's envelope, with the user's state inside.
#[derive(Serialize)]
pub(crate) struct EnvelopeRef<'a, S> {
    pub(crate) version: u32,
    pub(crate) run: &'a str,
    #[serde(skip_serializing_if = "is_zero")]
    pub(crate) resumes: u32,
    pub(crate) state: &'a S,
    pub(crate) epoch: u64,
}

#[derive(Deserialize)]
pub(crate) struct EnvelopeOwned<S> {
    /// Checked before, from the raw JSON; named so it is not "unknown".
    #[allow(dead_code)]
    pub(crate) version: u64,
    pub(crate) run: String,
    #[serde(default)]
    pub(crate) resumes: u32,
    pub(crate) state: S,
    #[serde(default)]
    pub(crate) epoch: u64,
}

/// The one field the fencing check before each rename reads.
#[derive(Deserialize)]
pub(crate) struct EpochOnly {
    #[serde(default)]
    pub(crate) epoch: u64,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Parse a checkpoint's bytes into the state of `run`, with a typed error
/// for every way it can be wrong. Never panics, whatever the bytes.
pub(crate) fn parse<S: DeserializeOwned>(
    bytes: &[u8],
    run: &RunId,
    path: &Path,
) -> Result<EnvelopeOwned<S>> {
    let corrupt = |reason: String| Error::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        if e.is_eof() {
            Error::Truncated {
                path: path.to_path_buf(),
            }
        } else {
            corrupt(format!("invalid JSON: {e}"))
        }
    })?;
    let Value::Object(fields) = &value else {
        return Err(corrupt("not a JSON object".to_owned()));
    };
    match fields.get("version") {
        None => return Err(corrupt("no \"version\" field".to_owned())),
        Some(v) => match v.as_u64() {
            Some(version) if version == u64::from(FORMAT_VERSION) => {}
            Some(version) => {
                return Err(Error::UnsupportedVersion {
                    path: path.to_path_buf(),
                    version,
                })
            }
            None => return Err(corrupt(format!("\"version\" is {v}, not a number"))),
        },
    }
    if !fields.contains_key("state") {
        return Err(corrupt("no \"state\" field".to_owned()));
    }
    let mut unknown = None;
    let envelope: EnvelopeOwned<S> = serde_ignored::deserialize(value, |field| {
        unknown.get_or_insert_with(|| field.to_string());
    })
    .map_err(|e| corrupt(format!("wrong shape: {e}")))?;
    if let Some(field) = unknown {
        return Err(Error::UnknownField {
            path: path.to_path_buf(),
            field,
        });
    }
    if envelope.run != run.as_str() {
        return Err(corrupt(format!(
            "it holds run {:?}, not {:?}",
            envelope.run,
            run.as_str()
        )));
    }
    Ok(envelope)
}
