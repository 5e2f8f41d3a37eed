//! Idempotency keys: the receiver's half of doing something exactly once.

use sha2::{Digest, Sha256};

use crate::hash::hex;

/// The idempotency key for one tool call of one run: 32 lowercase hex chars.
///
/// A single process can only promise *at least once* (retry until answered),
/// so exactly-once needs a receiver that recognises a repeat, and that needs
/// a key that stays the same whenever one call is sent again, even from a new
/// process, and differs from every other call's key. The call ID was saved
/// with the model's reply before the call ran, so hashing it with the run ID
/// has both properties: the run ID carries the uniqueness across runs (it is
/// never reused), the call ID within the run.
///
/// Each ID is fed to one SHA-256 as its decimal byte length, `:`, then its
/// bytes, so no two different pairs share an input (`("a:b", "c")` and
/// `("a", "b:c")` get different keys); the first 16 bytes of the digest are
/// returned as hex. Send it in the harness's channel (an `Idempotency-Key`
/// header, MCP `_meta`), never in arguments the model writes.
///
/// ```
/// let k = durable::key("triage-1700000000-abcd1234", "call_1");
/// assert_eq!(k.len(), 32);
/// assert_eq!(k, durable::key("triage-1700000000-abcd1234", "call_1"));
/// assert_ne!(k, durable::key("triage-1700000000-abcd1234", "call_2"));
/// ```
pub fn key(run: &str, call: &str) -> String {
    let mut h = Sha256::new();
    for s in [run, call] {
        h.update(s.len().to_string().as_bytes());
        h.update(b":");
        h.update(s.as_bytes());
    }
    hex(&h.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors_computed_with_python_hashlib() {
        // python3: h = sha256(); for s in (run, call): h.update(f"{len(s.encode())}:".encode() + s.encode())
        assert_eq!(
            key("triage-1700000000-abcd1234", "call_1"),
            "58dc28e3fa4db8b0cf2c8bcb4a7c2497"
        );
        assert_eq!(key("", ""), "390feabc786e369e55b904251d643b52");
        // The length is in bytes, not chars.
        assert_eq!(key("run", "ü"), "5cff12f32c3a81b3c8baca53e0f3cbfe");
    }

    #[test]
    fn length_prefix_separates_the_ids() {
        assert_eq!(key("a:b", "c"), "1c2de18a3ef3c0cdcce3495f7903aff9");
        assert_eq!(key("a", "b:c"), "804536b63b049b4dcd2bcfedd2982e9b");
        assert_ne!(key("a:b", "c"), key("a", "b:c"));
        assert_ne!(key("ab", "c"), key("a", "bc"));
        assert_ne!(key("run", "x"), key("x", "run"));
    }

    #[test]
    fn stable_and_lowercase_hex() {
        let k = key("r", "c");
        assert_eq!(k, key("r", "c"));
        assert_eq!(k.len(), 32);
        assert!(k
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }
}
