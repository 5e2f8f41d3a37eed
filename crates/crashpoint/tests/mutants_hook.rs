//! The panic hook the scopes install: injected crashes are silent, every
//! other panic still reaches the hook installed before. One test in its
//! own binary, because the panic hook is the process's.

use std::panic;
use std::sync::atomic::{AtomicUsize, Ordering};

static EARLIER_HOOK_CALLS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn injected_crashes_skip_the_earlier_hook_and_other_panics_do_not() {
    panic::set_hook(Box::new(|_| {
        EARLIER_HOOK_CALLS.fetch_add(1, Ordering::SeqCst);
    }));
    let hit = crashpoint::Hit::new("p", 1);
    let life = crashpoint::crash_at(hit.clone(), || crashpoint::point!("p"));
    assert_eq!(life.outcome.crashed(), Some(&hit));
    assert_eq!(EARLIER_HOOK_CALLS.load(Ordering::SeqCst), 0);
    // install_hook is idempotent: calling it again installs no second hook.
    crashpoint::scope::install_hook();
    let life = crashpoint::record(|| panic!("a real bug"));
    assert_eq!(
        life.outcome,
        crashpoint::Outcome::Panicked("a real bug".to_owned())
    );
    assert_eq!(EARLIER_HOOK_CALLS.load(Ordering::SeqCst), 1);
}
