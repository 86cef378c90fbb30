//! API keys: read from the environment variable a scenario names, never printed.

use std::fmt;

/// An API key. Its `Debug` and `Display` print `[redacted]`; the only way to the bytes is
/// [`ApiKey::expose`], used when building the `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

/// Why a key could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The variable is not set (or empty).
    #[error(
        "environment variable {var} is not set (it is named by {by}): export it, or remove api_key_env for a server that needs no key"
    )]
    Missing {
        /// The environment variable's name, as `api_key_env` gives it.
        var: String,
        /// Which part of the scenario names it.
        by: String,
    },
    /// The variable is not valid Unicode.
    #[error("environment variable {var} (named by {by}) is not valid Unicode")]
    NotUnicode {
        /// The environment variable's name, as `api_key_env` gives it.
        var: String,
        /// Which part of the scenario names it.
        by: String,
    },
}

impl ApiKey {
    /// Reads the key from `var`; `by` names the scenario section, for the error.
    #[expect(
        clippy::disallowed_methods,
        reason = "API keys are the one thing read from the environment; they never reach a decision"
    )]
    pub fn from_env(var: &str, by: &str) -> Result<ApiKey, KeyError> {
        match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => Ok(ApiKey(v.trim().to_owned())),
            Ok(_) | Err(std::env::VarError::NotPresent) => Err(KeyError::Missing {
                var: var.to_owned(),
                by: by.to_owned(),
            }),
            Err(std::env::VarError::NotUnicode(_)) => Err(KeyError::NotUnicode {
                var: var.to_owned(),
                by: by.to_owned(),
            }),
        }
    }

    /// A key from a string (tests).
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced, for messages that quote a
    /// server's answer (which could, in principle, echo the key back).
    pub fn scrub(&self, text: &str) -> String {
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "[redacted]")
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_never_print() {
        let key = ApiKey::new("sk-sentinel-123");
        assert_eq!(format!("{key:?}"), "ApiKey([redacted])");
        assert_eq!(format!("{key}"), "[redacted]");
        assert_eq!(key.scrub("echo sk-sentinel-123!"), "echo [redacted]!");
    }

    #[test]
    fn a_missing_variable_is_named() {
        let err = ApiKey::from_env("HEARSAY_TEST_SURELY_UNSET_VAR", "[brains.gemini]")
            .expect_err("unset");
        let msg = err.to_string();
        assert!(
            msg.contains("HEARSAY_TEST_SURELY_UNSET_VAR") && msg.contains("[brains.gemini]"),
            "{msg}"
        );
    }
}
