//! Every disk a power cut may leave: the enumerated crash states of a
//! [`PowerDir`](super::PowerDir), under a persistence model stated here.
//!
//! # The persistence model
//!
//! At a power cut the directory holds its *durable* view (each file's
//! contents as of its last [`Dir::sync`](crate::Dir::sync), every name as of
//! the last [`Dir::sync_dir`](crate::Dir::sync_dir)) plus some of the
//! operations made since, which are *unsynced*. Which of them a real file
//! system may have persisted is what this model allows:
//!
//! 1. **Synced contents and synced names always survive.**
//! 2. **Directory operations persist in program order** (create, rename,
//!    remove): a crash keeps a *prefix* of the unsynced ones — none, the
//!    first, the first two, … all. A journal commits them in order, so a
//!    later rename never survives an earlier one's loss.
//! 3. **A rename is atomic**: it is in the kept prefix whole, or not at all.
//! 4. **The writes of one file persist in order**: a file keeps its durable
//!    contents, or the contents of one of its unsynced writes, every earlier
//!    write having reached the disk first. (A [`Dir::write`](crate::Dir::write)
//!    replaces the contents: truncate, then write.)
//! 5. **The last kept write may be torn at a block boundary**: the file holds
//!    the first `j` blocks of that write's data (`j` = 0 is the empty file
//!    the truncate left), for block multiples below its length. At most
//!    [`PersistenceModel::torn_prefixes`] such prefixes per write are tried:
//!    the shortest ones and the longest one (see [`torn_lengths`]).
//! 6. **Data and names are not ordered with respect to each other**, nor the
//!    files among themselves: a rename may survive while the data it points
//!    at does not (delayed allocation, writeback mode), and one file's data
//!    may survive while another's is lost.
//!
//! A state is one choice per dimension: how long a prefix of the directory
//! operations survives, and for each file with unsynced writes which write
//! (or torn prefix) it holds. The states are numbered in mixed radix, the
//! directory prefix the lowest digit; state 0 keeps nothing unsynced (the
//! pessimistic reading of POSIX), the last one keeps everything (a process
//! crash). Two choices that leave the same disk (say a write to a file whose
//! creation was lost) count once: the list is deduplicated, first occurrence
//! first, so the count is the number of *different* disks.
//!
//! # The bound, and the sample
//!
//! When the product of the choices is at most [`PersistenceModel::bound`]
//! (64 by default), every state is listed. Above it, a deterministic sample
//! is: the four extremes first (nothing kept; everything kept; names kept
//! with no unsynced data; data kept with no unsynced names), then evenly
//! spaced states `k · (total − 1) / (bound − 1)` for `k = 0 … bound − 1`,
//! deduplicated and cut at the bound. [`CutRecord::sampled`] says when a
//! crash was sampled.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::disk_state::DiskState;

/// What a power cut may keep, and how many of the possible disks to list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PersistenceModel {
    /// The block size of a torn write, in bytes: a write persists whole
    /// blocks (512: a disk sector, the unit a disk writes atomically).
    pub block: usize,
    /// At most this many torn prefixes per write (0: writes are never torn).
    pub torn_prefixes: usize,
    /// List every state when there are at most this many combinations per
    /// crash; sample this many otherwise.
    pub bound: usize,
}

impl Default for PersistenceModel {
    /// 512-byte blocks, two torn prefixes per write, 64 states per crash.
    fn default() -> Self {
        PersistenceModel {
            block: 512,
            torn_prefixes: 2,
            bound: 64,
        }
    }
}

/// What one power cut of an enumerating [`PowerDir`](super::PowerDir) had to
/// choose from, and what it chose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CutRecord {
    /// How many different disks the crash could leave (after the sample,
    /// if sampled).
    pub states: usize,
    /// How many combinations the model allowed before deduplication and
    /// sampling (saturating).
    pub combinations: u128,
    /// More combinations than the bound: the states are a sample.
    pub sampled: bool,
    /// The state the cut applied (an index into the list).
    pub chosen: usize,
}

/// One unsynced operation, in program order: the log both an in-memory
/// [`PowerDir`](super::PowerDir) and a real directory's record (a process
/// subject's, from the calls its program made) keep between a sync and a
/// cut. Files are nodes (numbers); names map to nodes.
#[derive(Clone, Debug)]
pub enum Op {
    /// A file's contents were replaced (truncate, then write).
    Write {
        /// The file.
        node: u64,
        /// Its new contents.
        data: Arc<[u8]>,
    },
    /// Bytes were written at an offset of a file (a `write` or `pwrite`):
    /// the file grows, zero-filled, if `at` is past its end.
    Patch {
        /// The file.
        node: u64,
        /// Where the bytes go.
        at: u64,
        /// The bytes.
        data: Arc<[u8]>,
    },
    /// A file was cut or extended (zero-filled) to this length.
    SetLen {
        /// The file.
        node: u64,
        /// Its new length in bytes.
        len: u64,
    },
    /// A name was created for a file (a new one, or another name of an
    /// existing one: a hard link).
    Create {
        /// The new name.
        name: String,
        /// The file it names.
        node: u64,
    },
    /// A name was moved over another.
    Rename {
        /// The old name.
        from: String,
        /// The new name (replaced if it existed).
        to: String,
    },
    /// A name was removed.
    Remove {
        /// The name.
        name: String,
    },
}

impl Op {
    /// A directory operation (create, rename, remove), not a file's data.
    pub fn is_entry(&self) -> bool {
        self.node().is_none()
    }

    /// The file whose data this operation changes (`None` for a
    /// directory operation).
    pub fn node(&self) -> Option<u64> {
        match self {
            Op::Write { node, .. } | Op::Patch { node, .. } | Op::SetLen { node, .. } => {
                Some(*node)
            }
            Op::Create { .. } | Op::Rename { .. } | Op::Remove { .. } => None,
        }
    }

    /// The bytes this operation writes (none for a length change or a
    /// directory operation): what a torn write cuts.
    fn written(&self) -> usize {
        match self {
            Op::Write { data, .. } | Op::Patch { data, .. } => data.len(),
            _ => 0,
        }
    }

    /// Apply this data operation to `contents`, keeping only the first
    /// `keep` bytes of what it writes (`None`: all of them). A directory
    /// operation changes nothing.
    pub fn apply(&self, contents: &mut Vec<u8>, keep: Option<usize>) {
        match self {
            Op::Write { data, .. } => {
                let n = keep.unwrap_or(data.len()).min(data.len());
                contents.clear();
                contents.extend_from_slice(&data[..n]);
            }
            Op::Patch { at, data, .. } => {
                let n = keep.unwrap_or(data.len()).min(data.len());
                let at = usize::try_from(*at).unwrap_or(usize::MAX);
                if n == 0 {
                    return;
                }
                let end = at.saturating_add(n);
                if contents.len() < end {
                    contents.resize(end, 0);
                }
                contents[at..end].copy_from_slice(&data[..n]);
            }
            Op::SetLen { len, .. } => {
                contents.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0);
            }
            Op::Create { .. } | Op::Rename { .. } | Op::Remove { .. } => {}
        }
    }

    /// Apply this directory operation to `names` (a data operation
    /// changes nothing).
    pub fn apply_entry(&self, names: &mut Names) {
        match self {
            Op::Create { name, node } => {
                names.insert(name.clone(), *node);
            }
            Op::Rename { from, to } => {
                if let Some(n) = names.remove(from) {
                    names.insert(to.clone(), n);
                }
            }
            Op::Remove { name } => {
                names.remove(name);
            }
            Op::Write { .. } | Op::Patch { .. } | Op::SetLen { .. } => {}
        }
    }
}

/// File names to their files.
pub type Names = BTreeMap<String, u64>;
/// Files to their contents; a file without an entry is empty.
pub type Contents = HashMap<u64, Arc<[u8]>>;

/// What one file may hold after the cut.
#[derive(Clone, Copy, Debug)]
enum Choice {
    /// Its durable contents.
    Durable,
    /// Its unsynced operations up to the one at `last` (an index into the
    /// file's own), that one keeping `keep` bytes of what it writes
    /// (`None`: whole).
    Upto { last: usize, keep: Option<usize> },
}

/// `base` with `ops` applied in order, the last one keeping `keep` bytes.
fn replay(base: Option<&Arc<[u8]>>, ops: &[&Op], keep: Option<usize>) -> Arc<[u8]> {
    if let Some(Op::Write { data, .. }) = ops.last().copied() {
        // A replace needs nothing before it.
        let n = keep.unwrap_or(data.len()).min(data.len());
        return Arc::from(&data[..n]);
    }
    let mut contents = base.map(|b| b.to_vec()).unwrap_or_default();
    if let Some((last, before)) = ops.split_last() {
        for op in before {
            op.apply(&mut contents, None);
        }
        last.apply(&mut contents, keep);
    }
    Arc::from(contents)
}

/// The disk a power cut in a named `state` leaves: the durable views with
/// the unsynced operations `state` keeps applied in program order (see
/// [`DiskState`] for each state's choice). The one rule of the named
/// states, for a [`PowerDir`](super::PowerDir) and a real directory alike.
pub fn survivors(
    state: DiskState,
    durable_names: &Names,
    durable_data: &Contents,
    pending: &[Op],
) -> (Names, Contents) {
    let mut names = durable_names.clone();
    let mut data = durable_data.clone();
    let half = pending.len() / 2;
    // Each file's kept data operations, in order.
    let mut kept: BTreeMap<u64, Vec<&Op>> = BTreeMap::new();
    for (i, op) in pending.iter().enumerate() {
        let keep = match state {
            DiskState::Process => true,
            DiskState::LoseUnsynced => false,
            DiskState::KeepEntries => op.is_entry(),
            // Torn: names kept, each file's data torn below.
            DiskState::TornContents => true,
            DiskState::KeepContents => !op.is_entry(),
            DiskState::InOrderHalf => i < half,
        };
        if !keep {
            continue;
        }
        match op.node() {
            Some(node) => kept.entry(node).or_default().push(op),
            None => op.apply_entry(&mut names),
        }
    }
    for (node, ops) in kept {
        // A torn state keeps the first half of the latest write.
        let keep =
            (state == DiskState::TornContents).then(|| ops.last().map_or(0, |op| op.written() / 2));
        let contents = replay(data.get(&node), &ops, keep);
        data.insert(node, contents);
    }
    (names, data)
}

/// The torn lengths tried for a write of `len` bytes: block multiples
/// `j · block < len` (`j` = 0 included), at most `max` of them — the
/// shortest `max − 1` and the longest.
pub fn torn_lengths(len: usize, block: usize, max: usize) -> Vec<usize> {
    if max == 0 || len == 0 || block == 0 {
        return Vec::new();
    }
    let all: Vec<usize> = (0..len.div_ceil(block)).map(|j| j * block).collect();
    if all.len() <= max {
        return all;
    }
    let mut picked: Vec<usize> = all[..max - 1].to_vec();
    picked.push(all[all.len() - 1]);
    picked
}

/// The dimensions of one crash: a directory prefix, and one list of
/// choices per file with unsynced data operations.
pub struct Space<'a> {
    durable_names: &'a Names,
    durable_data: &'a Contents,
    entries: Vec<&'a Op>,
    files: Vec<(u64, Vec<&'a Op>, Vec<Choice>)>,
}

/// A disk, in a form two equal disks share: names to contents.
type Canon = BTreeMap<String, Arc<[u8]>>;

impl<'a> Space<'a> {
    /// The crash of a directory whose disk holds `durable_names` and
    /// `durable_data`, with `pending` unsynced, under `model`.
    pub fn new(
        durable_names: &'a Names,
        durable_data: &'a Contents,
        pending: &'a [Op],
        model: &PersistenceModel,
    ) -> Self {
        let entries = pending.iter().filter(|op| op.is_entry()).collect();
        let mut files: BTreeMap<u64, (Vec<&Op>, Vec<Choice>)> = BTreeMap::new();
        for op in pending {
            let Some(node) = op.node() else { continue };
            let (ops, choices) = files
                .entry(node)
                .or_insert_with(|| (Vec::new(), vec![Choice::Durable]));
            let last = ops.len();
            ops.push(op);
            for len in torn_lengths(op.written(), model.block, model.torn_prefixes) {
                choices.push(Choice::Upto {
                    last,
                    keep: Some(len),
                });
            }
            choices.push(Choice::Upto { last, keep: None });
        }
        Space {
            durable_names,
            durable_data,
            entries,
            files: files
                .into_iter()
                .map(|(node, (ops, choices))| (node, ops, choices))
                .collect(),
        }
    }

    fn radices(&self) -> impl Iterator<Item = u128> + '_ {
        std::iter::once(self.entries.len() as u128 + 1)
            .chain(self.files.iter().map(|(_, _, c)| c.len() as u128))
    }

    /// The number of combinations (saturating).
    pub fn combinations(&self) -> u128 {
        self.radices().fold(1u128, |acc, r| acc.saturating_mul(r))
    }

    /// The digits of combination `index`, the directory prefix first.
    fn digits(&self, mut index: u128) -> Vec<usize> {
        self.radices()
            .map(|r| {
                let d = index % r;
                index /= r;
                d as usize
            })
            .collect()
    }

    /// The disk that the combination with these digits leaves.
    fn disk(&self, digits: &[usize]) -> (Names, Contents) {
        let mut names = self.durable_names.clone();
        for op in &self.entries[..digits[0]] {
            op.apply_entry(&mut names);
        }
        let mut data = self.durable_data.clone();
        for ((node, ops, choices), &d) in self.files.iter().zip(&digits[1..]) {
            match choices[d] {
                Choice::Durable => {}
                Choice::Upto { last, keep } => {
                    let contents = replay(self.durable_data.get(node), &ops[..=last], keep);
                    data.insert(*node, contents);
                }
            }
        }
        // Only what a name reaches is on the disk.
        let live: BTreeSet<u64> = names.values().copied().collect();
        data.retain(|n, d| live.contains(n) && !d.is_empty());
        (names, data)
    }

    fn canon(names: &Names, data: &Contents) -> Canon {
        names
            .iter()
            .map(|(name, n)| {
                let d = data.get(n).cloned().unwrap_or_else(|| Arc::from(&[][..]));
                (name.clone(), d)
            })
            .collect()
    }

    /// The combinations listed, in order: all of them under the bound, the
    /// documented sample above it.
    fn indices(&self, bound: usize) -> (Vec<u128>, bool) {
        let total = self.combinations();
        let bound = bound.max(1);
        if total <= bound as u128 {
            return ((0..total).collect(), false);
        }
        let radices: Vec<u128> = self.radices().collect();
        let max_digits: Vec<u128> = radices.iter().map(|r| r - 1).collect();
        let number = |digits: &[u128]| {
            digits
                .iter()
                .zip(&radices)
                .rev()
                .fold(0u128, |acc, (d, r)| {
                    acc.saturating_mul(*r).saturating_add(*d)
                })
        };
        let mut names_only = vec![0u128; max_digits.len()];
        names_only[0] = max_digits[0];
        let mut data_only = max_digits.clone();
        data_only[0] = 0;
        let mut picked = vec![0, total - 1, number(&names_only), number(&data_only)];
        let steps = (bound as u128).saturating_sub(1).max(1);
        for k in 0..bound as u128 {
            picked.push(k.saturating_mul(total - 1) / steps);
        }
        (picked, true)
    }

    /// The different disks this crash may leave, in the documented order,
    /// and whether they are a sample.
    pub fn states(&self, bound: usize) -> (Vec<(Names, Contents)>, bool) {
        let (indices, sampled) = self.indices(bound);
        let mut seen: BTreeSet<Canon> = BTreeSet::new();
        let mut out = Vec::new();
        for i in indices {
            if out.len() >= bound.max(1) {
                break;
            }
            let (names, data) = self.disk(&self.digits(i));
            if seen.insert(Self::canon(&names, &data)) {
                out.push((names, data));
            }
        }
        (out, sampled)
    }

    /// Disk `want` of those `model` allows (the last if there are fewer;
    /// `None` if there is none) and what a cut that keeps it chose from.
    pub fn choose(
        &self,
        model: &PersistenceModel,
        want: usize,
    ) -> (Option<(Names, Contents)>, CutRecord) {
        let combinations = self.combinations();
        let (mut states, sampled) = self.states(model.bound);
        let chosen = want.min(states.len().saturating_sub(1));
        let record = CutRecord {
            states: states.len(),
            combinations,
            sampled,
            chosen,
        };
        let disk = (chosen < states.len()).then(|| states.swap_remove(chosen));
        (disk, record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_lengths_are_block_multiples_below_the_length_bounded() {
        assert_eq!(torn_lengths(0, 512, 2), Vec::<usize>::new());
        assert_eq!(torn_lengths(100, 512, 2), [0]);
        assert_eq!(torn_lengths(512, 512, 2), [0]);
        assert_eq!(torn_lengths(513, 512, 2), [0, 512]);
        assert_eq!(torn_lengths(2000, 512, 2), [0, 1536]);
        assert_eq!(torn_lengths(2000, 512, 3), [0, 512, 1536]);
        assert_eq!(torn_lengths(2000, 512, 0), Vec::<usize>::new());
    }
}
