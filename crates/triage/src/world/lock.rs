//! The state directory's own lock ([`STATE_LOCK`]),
//! held while a command picks or creates a run: a start waits for it, up to
//! a minute.

use std::io;
use std::time::Duration;

use durable::dir::LockGuard;
use durable::Dir;

use super::{StateDir, STATE_LOCK};
use crate::exit::{Exit, Failure};
use crate::files::io_failure;

impl StateDir {
    /// Take the state directory's lock, waiting for another command that
    /// is picking or creating a run (which takes milliseconds) to finish.
    pub fn lock(&self) -> Result<LockGuard, Failure> {
        let path = self.dir.path_of(STATE_LOCK);
        let mut waited = Duration::ZERO;
        let step = Duration::from_millis(5);
        loop {
            match self.dir.lock(STATE_LOCK) {
                Ok(guard) => return Ok(guard),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && waited < STATE_LOCK_WAIT => {
                    std::thread::sleep(step);
                    waited += step;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    return Err(Failure::new(
                        Exit::Locked,
                        "state_locked",
                        format!(
                            "the state directory is locked by another process: {} (waited {} s)",
                            path.display(),
                            STATE_LOCK_WAIT.as_secs()
                        ),
                    )
                    .hint("another triage is picking or creating a run there and does not finish; stop it, then rerun"))
                }
                Err(e) => return Err(io_failure("lock", &path, &e)),
            }
        }
    }
}

/// How long a start waits for the state directory's lock.
const STATE_LOCK_WAIT: Duration = Duration::from_secs(60);
