//! What label and field selectors share: both reject bad input with a plain message that
//! becomes the `message` of a `400 BadRequest` Status.

/// A selector that could not be parsed or is not supported. The message is the one
/// kube-apiserver would put into the `400 BadRequest` Status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SelectorError {
    message: String,
}

impl SelectorError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// The message to report to the client.
    pub fn message(&self) -> &str {
        &self.message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_message() {
        let e = SelectorError::new("boom");
        assert_eq!(e.message(), "boom");
        assert_eq!(e.to_string(), "boom");
    }
}
