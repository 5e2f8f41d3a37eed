//! The `Idempotency-Key` header's limits and quoting, for the survivors
//! mutation testing (`cargo xtask mutants tracker`) found.

use tracker::wire::{check_key, key_header_value, parse_key_header, KeyError, MAX_KEY_BYTES};

#[test]
fn a_key_of_exactly_the_longest_length_is_accepted_and_one_more_byte_is_not() {
    let longest = "k".repeat(MAX_KEY_BYTES);
    assert!(check_key(&longest).is_ok());
    let over = "k".repeat(MAX_KEY_BYTES + 1);
    assert!(matches!(check_key(&over), Err(KeyError::TooLong(n)) if n == MAX_KEY_BYTES + 1));
}

#[test]
fn escaped_quotes_and_backslashes_in_a_quoted_key_are_unescaped() {
    assert_eq!(parse_key_header(r#""a\"b""#).unwrap(), "a\"b");
    assert_eq!(parse_key_header(r#""a\\b""#).unwrap(), "a\\b");
    assert!(matches!(
        parse_key_header(r#""a\nb""#),
        Err(KeyError::Malformed(_))
    ));
}

#[test]
fn a_header_value_escapes_each_quote_and_backslash_and_parses_back() {
    assert_eq!(key_header_value("plain"), "\"plain\"");
    assert_eq!(key_header_value("a\"b"), r#""a\"b""#);
    assert_eq!(key_header_value("a\\b"), r#""a\\b""#);
    for key in ["plain", "a\"b", "a\\b", "\"\\\"", "x y"] {
        assert_eq!(parse_key_header(&key_header_value(key)).unwrap(), key);
    }
}
