//! Records for the tests of the layers that hold operations.

use std::sync::Arc;

use jiff::Timestamp;

use super::{InFlightOperation, RuleSetInfo, Subject};

/// When test records are detected.
fn test_time() -> Timestamp {
    "2026-11-22T10:00:00Z".parse().unwrap()
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
    let rs = RuleSetInfo {
        name: ruleset.into(),
        component: component.into(),
        ..Default::default()
    };
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
