//! What label and field selectors share: both reject bad input with a plain message that
//! becomes the `message` of a `400 BadRequest` Status, and both have the same size limits.
//!
//! kube-apiserver bounds a selector only by the request's header size (1 MiB). A server that
//! keeps each watch's selectors parsed for the watch's life cannot: a user allowed a thousand
//! watches would pin a thousand parsed megabyte selectors. These limits are far above what
//! people and controllers write (a label value is at most 63 characters).

/// Longest selector, in bytes.
pub const MAX_BYTES: usize = 32 * 1024;
/// Most requirements (terms) in one selector.
pub const MAX_REQUIREMENTS: usize = 64;
/// Most values in one `in`/`notin` set.
pub const MAX_VALUES: usize = 256;

/// Heap bytes of one allocation beyond what it holds (the allocator's bookkeeping), for
/// estimates of what a parsed selector keeps.
pub(crate) const ALLOCATION_OVERHEAD: usize = 16;

/// The error for a selector over [`MAX_BYTES`], or `None`. `what` is `label` or `field`.
pub(crate) fn check_bytes(what: &str, selector: &str) -> Result<(), SelectorError> {
    if selector.len() > MAX_BYTES {
        return Err(SelectorError::new(format!(
            "{what} selector is {} bytes long: the limit is {MAX_BYTES} bytes",
            selector.len()
        )));
    }
    Ok(())
}

/// The error for a selector of more than [`MAX_REQUIREMENTS`] requirements.
pub(crate) fn check_requirements(what: &str, count: usize) -> Result<(), SelectorError> {
    if count > MAX_REQUIREMENTS {
        return Err(SelectorError::new(format!(
            "{what} selector has {count} requirements: the limit is {MAX_REQUIREMENTS}"
        )));
    }
    Ok(())
}

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
