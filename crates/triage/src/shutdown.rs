//! SIGTERM and SIGINT stop the run after the save that records where it
//! stopped.
//!
//! [`Shutdown::install`] registers, for each of the two signals, three
//! async-signal-safe actions with `signal-hook` (in this order, which
//! matters):
//!
//! 1. if the cancel flag is already set, the signal's default action: a
//!    second signal while the run is stopping kills the process, as if no
//!    handler were installed (the run survives that like any crash);
//! 2. remember which signal arrived, for the message;
//! 3. set the cancel flag, which the loop ([`agent::Agent::with_cancel`])
//!    checks before each model call and each tool call: it saves, then
//!    returns [`agent::Error::Cancelled`].
//!
//! The handlers only store to atomics. They are installed with
//! `SA_RESTART`, so a blocking read (the terminal prompt) is not
//! interrupted: a signal during a prompt takes effect at the loop's next
//! step after the answer.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use signal_hook::consts::signal::{SIGINT, SIGTERM};
use signal_hook::flag;

/// The signals that stop a run gracefully.
pub const SIGNALS: [libc::c_int; 2] = [SIGTERM, SIGINT];

/// The cancel flag the loop checks, and which signal set it.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    cancel: Arc<AtomicBool>,
    signal: Arc<AtomicUsize>,
}

impl Shutdown {
    /// Register the handlers for [`SIGNALS`].
    pub fn install() -> io::Result<Shutdown> {
        let shutdown = Shutdown::default();
        for sig in SIGNALS {
            // The order is the order the actions run in: the default
            // action only for a signal that finds the flag already set.
            flag::register_conditional_default(sig, Arc::clone(&shutdown.cancel))?;
            flag::register_usize(sig, Arc::clone(&shutdown.signal), sig as usize)?;
            flag::register(sig, Arc::clone(&shutdown.cancel))?;
        }
        Ok(shutdown)
    }

    /// The flag to hand to [`agent::Agent::with_cancel`].
    pub fn cancel_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// Whether SIGTERM or SIGINT arrived (the cancel flag may also be set
    /// by a hook that stops one run).
    pub fn signalled(&self) -> bool {
        self.signal.load(Ordering::SeqCst) != 0
    }

    /// The name of the signal that asked to stop (`SIGTERM`, `SIGINT`), or
    /// a description if the flag was set some other way.
    pub fn cause(&self) -> &'static str {
        let sig = self.signal.load(Ordering::SeqCst);
        match libc::c_int::try_from(sig) {
            Ok(SIGTERM) => "SIGTERM",
            Ok(SIGINT) => "SIGINT",
            _ => "a shutdown request",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shutdown_never_signalled_names_no_signal() {
        let s = Shutdown::default();
        assert!(!s.cancel_flag().load(Ordering::SeqCst));
        assert_eq!(s.cause(), "a shutdown request");
        assert!(!s.signalled());
        s.signal.store(SIGINT as usize, Ordering::SeqCst);
        assert_eq!(s.cause(), "SIGINT");
        assert!(s.signalled());
    }
}
