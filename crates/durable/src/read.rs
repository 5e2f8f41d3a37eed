//! Reading a checkpoint's bytes back: the envelope checked field by field,
//! with a typed error for every way it can be wrong.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::envelope::{EnvelopeOwned, FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::run_id::RunId;

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
