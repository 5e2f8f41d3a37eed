//! Content hashes: how a run records the files it wrote, so a resume can
//! tell whether they still hold what it wrote
//! ([`Error::WorkspaceChanged`](crate::Error::WorkspaceChanged)).

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes` as 64 lowercase hex chars: how the state records
/// each file a run wrote, so a resume can tell whether the workspace still
/// matches.
///
/// ```
/// let h = durable::hash::sha256_hex(b"hello\n");
/// assert_eq!(h.len(), 64);
/// ```
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_hex_matches_python() {
        assert_eq!(
            sha256_hex(b"hello\n"),
            "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
        );
    }
}
