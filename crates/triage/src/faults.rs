//! A test hook for a disk that answers with errors: the environment variable
//! `TRIAGE_TRACKER_FAULTS` (e.g. `write#1,write#2`) makes those calls of
//! the tracker's file store fail once each — `ENOSPC` on a create or write,
//! `EIO` on an fsync, a rename, or anything else — as a full or failing
//! disk would, through `durable::testing::FaultDir`. Hits count from this
//! process's first call (`create`, `write`, `fsync`, `rename`, `fsync-dir`,
//! `read`, `remove`, `list`, `lock`). Unset or empty: the directory as is.

use std::sync::Arc;

use durable::testing::{Fault, FaultDir};
use durable::{Dir, DiskDir};

use crate::exit::Failure;

/// The variable the hook reads.
pub const ENV: &str = "TRIAGE_TRACKER_FAULTS";

/// The tracker's directory, failing where `TRIAGE_TRACKER_FAULTS` says.
pub fn tracker_dir(dir: Arc<DiskDir>) -> Result<Arc<dyn Dir>, Failure> {
    let spec = std::env::var(ENV).unwrap_or_default();
    if spec.trim().is_empty() {
        return Ok(dir);
    }
    let mut faults = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let fault = Fault::parse(part).ok_or_else(|| {
            Failure::run(
                "usage",
                format!("{ENV}: {part:?} is not CALL#K, the k-th call of a kind (e.g. write#1, fsync#2)"),
            )
        })?;
        faults.push(fault);
    }
    let faulty = FaultDir::new((*dir).clone());
    faulty.fail_all(&faults);
    Ok(Arc::new(faulty))
}
