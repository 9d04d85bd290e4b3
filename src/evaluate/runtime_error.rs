//! What an expression that compiled but failed as it ran says, and the error that raised it:
//! the CEL interpreter's (a missing key, no matching overload) or a parser's (a string that is
//! not a timestamp). The message is what rulesets' status and the logs show, bounded where it
//! quotes object data; the cause is kept for whoever handles the error.

use std::fmt;
use std::sync::Arc;

/// An expression's runtime error: its message, and its cause where there is one (the
/// evaluator's own findings, such as a progress out of range, have none).
#[derive(Debug, Clone)]
pub struct RuntimeError {
    message: String,
    cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl RuntimeError {
    /// The error `cause` raised, saying `message` (the cause's own, bounded, or with context).
    pub(crate) fn caused_by(
        message: String,
        cause: impl std::error::Error + Send + Sync + 'static,
    ) -> RuntimeError {
        RuntimeError {
            message,
            cause: Some(Arc::new(cause)),
        }
    }

    /// What it says.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// An error the evaluator found itself, saying `message`.
impl From<String> for RuntimeError {
    fn from(message: String) -> RuntimeError {
        RuntimeError {
            message,
            cause: None,
        }
    }
}

impl From<&str> for RuntimeError {
    fn from(message: &str) -> RuntimeError {
        RuntimeError::from(message.to_owned())
    }
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RuntimeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|cause| cause as &(dyn std::error::Error + 'static))
    }
}

/// Two runtime errors are equal when they say the same: the same message comes from the same
/// failure.
impl PartialEq for RuntimeError {
    fn eq(&self, other: &RuntimeError) -> bool {
        self.message == other.message
    }
}
