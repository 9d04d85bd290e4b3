//! Records for the tests of the layers that hold operations.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;

use super::{InFlightOperation, RuleSetInfo, Subject};

/// When test records are detected.
fn test_time() -> Timestamp {
    "2026-11-22T10:00:00Z".parse().unwrap()
}

/// The ruleset `name` of `component` as its operations carry it: no static labels, no
/// generation, not exclusive (see the builders below for those).
pub(crate) fn test_ruleset(name: &str, component: &str) -> RuleSetInfo {
    RuleSetInfo {
        name: name.into(),
        component: component.into(),
        ..Default::default()
    }
}

impl RuleSetInfo {
    /// With the static labels `labels`.
    pub(crate) fn with_labels(self, labels: &[(&str, &str)]) -> RuleSetInfo {
        let labels: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        RuleSetInfo { labels, ..self }
    }

    /// Compiled from the ruleset's `generation`.
    pub(crate) fn at_generation(self, generation: i64) -> RuleSetInfo {
        RuleSetInfo {
            generation: Some(generation),
            ..self
        }
    }

    /// With `spec.exclusive` as `exclusive`.
    pub(crate) fn exclusive(self, exclusive: bool) -> RuleSetInfo {
        RuleSetInfo { exclusive, ..self }
    }
}

/// A subject: `kind` of `api_version`, named `name` in `namespace`, with uid `uid-<name>`.
pub(crate) fn test_subject(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> Subject {
    Subject {
        api_version: api_version.into(),
        kind: kind.into(),
        name: name.into(),
        namespace: namespace.map(str::to_owned),
        uid: format!("uid-{name}"),
        ..Default::default()
    }
}

/// An active `operation` on `subject`, detected at [`test_time`] by the ruleset named
/// `ruleset` of `component`, with the label expression results `labels`.
pub(crate) fn test_active(
    subject: &Subject,
    (ruleset, component): (&str, &str),
    operation: &str,
    labels: &[(&str, &str)],
) -> InFlightOperation {
    let rs = test_ruleset(ruleset, component);
    let at = test_time();
    let (record, _) =
        InFlightOperation::new_active(&rs, operation, subject, at, at, None, labels.to_vec());
    record
}

/// Operation `Op` of ruleset `rs` on pod `subject` in namespace `ns`.
pub(crate) fn test_record(subject: &str) -> Arc<InFlightOperation> {
    let pod = test_subject("v1", "Pod", Some("ns"), subject);
    Arc::new(test_active(&pod, ("rs", ""), "Op", &[]))
}

/// Asserts that `text` says each of `parts`.
#[track_caller]
pub(crate) fn assert_says(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "{part:?} missing from:\n{text}");
    }
}
