//! An API key that never shows itself.

use std::fmt;

use super::ProviderError;

/// A provider's API key. It has no `Display`; its `Debug` prints
/// `ApiKey([redacted])`, so a key never reaches a log, an error or a
/// checkpoint by way of formatting.
///
/// ```
/// use agent::provider::ApiKey;
///
/// let key = ApiKey::new("sk-secret-123").unwrap();
/// assert_eq!(format!("{key:?}"), "ApiKey([redacted])");
/// assert!(ApiKey::new("").is_err());
/// assert!(ApiKey::new("sk-1\r\nX-Evil: 1").is_err());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key; refused if empty or if it holds whitespace or control
    /// characters (it goes into a header). The error does not repeat it.
    pub fn new(key: impl Into<String>) -> Result<ApiKey, ProviderError> {
        let key = key.into();
        if key.is_empty() {
            return Err(ProviderError::Config("the API key is empty".into()));
        }
        if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ProviderError::Config(
                "the API key holds whitespace or control characters (it goes into an HTTP header)"
                    .into(),
            ));
        }
        Ok(ApiKey(key))
    }

    /// The key itself, for the request header.
    #[cfg_attr(not(any(feature = "openai", feature = "anthropic")), allow(dead_code))]
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}
