//! Types shared by label and field selectors.
//!
//! Both selector kinds reject bad input with a plain message that becomes the `message` of a
//! `400 BadRequest` Status, and both are forwarded to a SubjectAccessReview as a list of
//! `{key, operator, values}` requirements (`resourceAttributes.labelSelector.requirements` /
//! `fieldSelector.requirements`), which is the shape [`SarRequirement`] serializes to.

use serde::Serialize;

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

/// One selector requirement as `authorization.k8s.io/v1` expects it in a SubjectAccessReview:
/// `operator` is one of `In`, `NotIn`, `Exists`, `DoesNotExist`; `values` is omitted when empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SarRequirement {
    pub key: String,
    pub operator: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sar_requirement_json() {
        let r = SarRequirement {
            key: "a".into(),
            operator: "Exists",
            values: vec![],
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"key":"a","operator":"Exists"}"#
        );
        let r = SarRequirement {
            key: "a".into(),
            operator: "In",
            values: vec!["x".into()],
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"key":"a","operator":"In","values":["x"]}"#
        );
    }

    #[test]
    fn error_message() {
        let e = SelectorError::new("boom");
        assert_eq!(e.message(), "boom");
        assert_eq!(e.to_string(), "boom");
    }
}
