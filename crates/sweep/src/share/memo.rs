//! The memo of shared lives: a sharded hash map that stops remembering at
//! a cap.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// A hash map split into shards, so parallel scenarios rarely wait on each
/// other's lookups, that stops remembering at `cap` entries (a memo only
/// saves work: a miss runs the life).
pub(super) struct Memo<K, V> {
    shards: Vec<Mutex<HashMap<K, V>>>,
    cap: usize,
    len: AtomicUsize,
}

/// How many leaves' final lives a sweep remembers (each a verdict, about a
/// kilobyte in the designs).
pub(super) const LEAF_MEMO_CAP: usize = 1 << 16;
/// How many final lives of scenarios with children a sweep remembers (each
/// with its hits).
pub(super) const PARENT_MEMO_CAP: usize = 1 << 12;

impl<K: Hash + Eq, V: Clone> Memo<K, V> {
    pub(super) fn new(cap: usize) -> Self {
        Memo {
            shards: (0..64).map(|_| Mutex::new(HashMap::new())).collect(),
            cap,
            len: AtomicUsize::new(0),
        }
    }

    fn shard(&self, k: &K) -> &Mutex<HashMap<K, V>> {
        let mut h = DefaultHasher::new();
        k.hash(&mut h);
        let i = (h.finish() % self.shards.len() as u64) as usize;
        // `i` is below the shard count.
        &self.shards[i]
    }

    pub(super) fn get(&self, k: &K) -> Option<V> {
        let m = self.shard(k).lock().unwrap_or_else(|e| e.into_inner());
        m.get(k).cloned()
    }

    pub(super) fn insert(&self, k: K, v: V) {
        if self.len.load(Ordering::Relaxed) >= self.cap {
            return;
        }
        let mut m = self.shard(&k).lock().unwrap_or_else(|e| e.into_inner());
        if m.insert(k, v).is_none() {
            self.len.fetch_add(1, Ordering::Relaxed);
        }
    }
}
