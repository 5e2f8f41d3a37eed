//! The fingerprint of a world: a fast 128-bit hash of what a life can
//! observe and, apart, of what only the judge counts — the key of shared
//! lives' memo.

use std::fmt;
use std::hash::{Hash, Hasher};

/// A hash of a world: what a life can observe, and separately what only the
/// judge counts (128 bits each). Build one with [`Fingerprint::new`] and feed
/// it every part of the world.
///
/// ```
/// use sweep::sharing::Fingerprint;
/// let a = Fingerprint::new().observe(&"checkpoint bytes").judge(&3u64);
/// let b = Fingerprint::new().observe(&"checkpoint bytes").judge(&4u64);
/// assert_ne!(a, b);
/// assert_eq!(a, Fingerprint::new().observe(&"checkpoint bytes").judge(&3u64));
/// ```
#[derive(Clone, Debug)]
pub struct Fingerprint {
    observed: TwoHashers,
    judged: TwoHashers,
}

/// A fast 128-bit hash of a world's parts (two multiply-rotate lanes over
/// 8-byte words, finished with murmur3's avalanche): fixed keys, so the same
/// world hashes the same in every thread and run; not cryptographic — worlds
/// are not chosen by an adversary.
#[derive(Clone, Debug)]
struct TwoHashers {
    a: u64,
    b: u64,
    len: u64,
}

const K1: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;

fn avalanche(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

impl TwoHashers {
    fn new() -> Self {
        TwoHashers {
            a: 0x2545_f491_4f6c_dd1d,
            b: 0x1656_67b1_9e37_79f9,
            len: 0,
        }
    }

    fn word(&mut self, w: u64) {
        self.a = (self.a ^ w).wrapping_mul(K1).rotate_left(29);
        self.b = (self.b.rotate_left(23) ^ w).wrapping_mul(K2) ^ self.a;
    }

    fn value(&self) -> u128 {
        let hi = avalanche(self.a ^ self.len.wrapping_mul(K2));
        let lo = avalanche(self.b ^ hi.rotate_left(17));
        (u128::from(hi) << 64) | u128::from(lo)
    }
}

impl Hasher for TwoHashers {
    fn finish(&self) -> u64 {
        let v = self.value();
        (v >> 64) as u64 ^ v as u64
    }
    fn write(&mut self, bytes: &[u8]) {
        self.len = self.len.wrapping_add(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.word(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // Up to 7 bytes, and their count in the top byte.
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            w[7] = rest.len() as u8;
            self.word(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.len = self.len.wrapping_add(8);
        self.word(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

impl fmt::Write for TwoHashers {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        Hasher::write(self, s.as_bytes());
        Ok(())
    }
}

impl Default for Fingerprint {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialEq for Fingerprint {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Fingerprint {}

impl Fingerprint {
    /// An empty fingerprint.
    pub fn new() -> Self {
        Fingerprint {
            observed: TwoHashers::new(),
            judged: TwoHashers::new(),
        }
    }

    /// Add something a life can observe (files, a service's records).
    pub fn observe<T: Hash + ?Sized>(mut self, part: &T) -> Self {
        part.hash(&mut self.observed);
        self
    }

    /// Add something a life can observe, by its `Debug` text (for types
    /// without `Hash`; the text must tell different values apart).
    pub fn observe_debug(mut self, part: &dyn fmt::Debug) -> Self {
        // Writing into a hasher cannot fail.
        let _ = fmt::write(&mut self.observed, format_args!("{part:?}\u{0}"));
        self
    }

    /// Add something only the judge counts (tallies the program never reads).
    pub fn judge<T: Hash + ?Sized>(mut self, part: &T) -> Self {
        part.hash(&mut self.judged);
        self
    }

    /// Add something only the judge counts, by its `Debug` text.
    pub fn judge_debug(mut self, part: &dyn fmt::Debug) -> Self {
        let _ = fmt::write(&mut self.judged, format_args!("{part:?}\u{0}"));
        self
    }

    /// A hasher for what a life observes, for parts that hash themselves.
    pub fn observer(&mut self) -> &mut dyn Hasher {
        &mut self.observed
    }

    /// The hash of what a life observes.
    pub fn observed(&self) -> u128 {
        self.observed.value()
    }

    /// The hash of what only the judge counts.
    pub fn judged(&self) -> u128 {
        self.judged.value()
    }

    /// Both hashes: the key of a world in the runner's memo.
    pub(crate) fn key(&self) -> (u128, u128) {
        (self.observed(), self.judged())
    }
}

#[cfg(test)]
mod tests {
    //! The world hash against an independent implementation of the same
    //! algorithm (the values below were computed by a Python rendering of
    //! [`TwoHashers`] and of murmur3's `fmix64`), and the distinctions a
    //! fingerprint must make. A weaker hash would only make collisions
    //! likelier — and a collision silently gives one world another's
    //! results — so the exact values are pinned.
    use std::collections::HashSet;
    use std::hash::Hasher;

    use super::*;

    #[test]
    fn avalanche_is_murmur3_fmix64() {
        assert_eq!(avalanche(0), 0);
        assert_eq!(avalanche(1), 0xb456_bcfc_34c2_cb2c);
        assert_eq!(avalanche(0x0123_4567_89ab_cdef), 0x87cb_fbfe_8902_2cea);
    }

    #[test]
    fn the_hash_of_known_inputs() {
        let h = TwoHashers::new();
        assert_eq!(h.value(), 0xb800_bd6c_0247_2607_2f69_1515_eed1_ac29);
        let mut h = TwoHashers::new();
        h.write_u64(0);
        assert_eq!(h.value(), 0xdcc1_00ec_4bcc_671f_966e_9c2d_66bd_6392);
        let mut h = TwoHashers::new();
        h.write_u64(1);
        h.write_u64(2);
        assert_eq!(h.value(), 0xacce_5ad9_c59c_4c48_eef5_27ea_922d_4854);
        // One whole word, then two bytes and their count.
        let mut h = TwoHashers::new();
        h.write(b"abcdefghij");
        assert_eq!(h.value(), 0xedc5_9c5e_1bc2_0a90_ee3e_f1e9_9f38_aaf5);
        // A 64-bit hash is the two halves folded.
        assert_eq!(h.finish(), 0x03fb_6db7_84fa_a065);
    }

    #[test]
    fn different_parts_give_different_fingerprints() {
        let mut seen = HashSet::new();
        for n in 0..2_000u64 {
            assert!(
                seen.insert(Fingerprint::new().observe(&n).observed()),
                "u64 {n}"
            );
            let n = n as usize;
            assert!(
                seen.insert(Fingerprint::new().observe(&(n, 1u8)).observed()),
                "usize {n}"
            );
            assert!(
                seen.insert(
                    Fingerprint::new()
                        .observe_debug(&format!("s{n}"))
                        .observed()
                ),
                "debug {n}"
            );
        }
        // The same parts split differently are different worlds.
        let split = |a: &str, b: &str| Fingerprint::new().observe(a).observe(b).observed();
        assert_ne!(split("ab", "c"), split("a", "bc"));
        // What the judge counts is hashed apart from what a life observes.
        let fp = Fingerprint::new().judge(&7u64);
        assert_eq!(fp.observed(), TwoHashers::new().value());
        assert_ne!(fp.judged(), fp.observed());
        assert_eq!(
            Fingerprint::new().judge_debug(&7u64).judged(),
            Fingerprint::new().observe_debug(&7u64).observed()
        );
    }

    #[test]
    fn the_observer_is_the_observed_hasher() {
        let mut fp = Fingerprint::new();
        fp.observer().write_u64(1);
        fp.observer().write_u64(2);
        assert_eq!(fp.observed(), 0xacce_5ad9_c59c_4c48_eef5_27ea_922d_4854);
    }
}
