//! The locks of the in-memory directories, and their deterministic temp
//! names.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::dir::{check_name, LockGuard, TEMP_ATTEMPTS};

/// The locks of an in-memory directory ([`MemDir`], `PowerDir`): which names
/// are held, by which guard. Clones share the table; a power cut clears it,
/// since no process survives one.
#[derive(Clone, Default)]
pub(crate) struct LockTable(Arc<Mutex<LockState>>);

#[derive(Default)]
struct LockState {
    /// Held names, with the token of the guard that holds each.
    held: BTreeMap<String, u64>,
    next_token: u64,
}

impl LockTable {
    fn state(&self) -> MutexGuard<'_, LockState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take `name`, or fail with `WouldBlock` naming it as `shown`.
    pub(crate) fn acquire(&self, name: &str, shown: &str) -> io::Result<LockGuard> {
        let mut st = self.state();
        if st.held.contains_key(name) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{shown} is locked"),
            ));
        }
        st.next_token += 1;
        let token = st.next_token;
        st.held.insert(name.to_owned(), token);
        Ok(LockGuard::new(TableLock {
            table: Arc::clone(&self.0),
            name: name.to_owned(),
            token,
        }))
    }

    /// Release every lock: the power went out.
    pub(crate) fn clear(&self) {
        self.state().held.clear();
    }

    /// The names held now, sorted.
    pub(crate) fn held(&self) -> Vec<String> {
        self.state().held.keys().cloned().collect()
    }
}

/// The token inside a [`LockTable`] guard: releases the name on drop, unless
/// a power cut already did and someone else took it since.
struct TableLock {
    table: Arc<Mutex<LockState>>,
    name: String,
    token: u64,
}

impl Drop for TableLock {
    fn drop(&mut self) {
        let mut st = self.table.lock().unwrap_or_else(|e| e.into_inner());
        if st.held.get(&self.name) == Some(&self.token) {
            st.held.remove(&self.name);
        }
    }
}

/// The next free temp name `<prefix><n>.tmp` of an in-memory directory
/// (deterministic: a counter, so sweeps stay byte-identical), trying at most
/// [`TEMP_ATTEMPTS`] names.
pub(crate) fn next_temp_name(
    prefix: &str,
    counter: &mut u64,
    taken: impl Fn(&str) -> bool,
) -> io::Result<String> {
    for _ in 0..TEMP_ATTEMPTS {
        *counter += 1;
        let name = format!("{prefix}{counter}.tmp");
        check_name(&name)?;
        if !taken(&name) {
            return Ok(name);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!("no free temp name for prefix {prefix:?} after {TEMP_ATTEMPTS} tries"),
    ))
}
