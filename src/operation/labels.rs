//! Labels of a record: built-in, static (`spec.labels`) and dynamic (`labelExpressions`).
//!
//! Label selectors are how users and tools find operations (`-l ifo.kubevirt.io/owner-name=x`),
//! so a label must never be lost just because a name is long or a value contains `/`: values are
//! rewritten into valid label values instead. Only keys can't be repaired without changing what
//! they mean; invalid keys are dropped and reported back to the caller as [`LabelWarning`]s.

use ifo_apimachinery::validation;
use std::fmt;

use super::hash::hash8;
use super::label_set::{Labels, NodeKey, key};
use super::ruleset::RuleSetInfo;
use super::subject::Subject;

const MAX_VALUE_LEN: usize = 63;

/// Where a label came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LabelSource {
    /// The ruleset's static `spec.labels`.
    Static,
    /// One of the ruleset's `labelExpressions`.
    Expression,
}

/// A label that could not be set.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelWarning {
    /// The label key that was not set.
    pub key: String,
    /// Where the label came from, so that the warning points the author at the right field.
    pub source: LabelSource,
}

impl fmt::Display for LabelWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let source = match self.source {
            LabelSource::Static => "spec.labels",
            LabelSource::Expression => "labelExpressions",
        };
        write!(
            f,
            "label key {:?} from {source} is not a valid qualified name; label not set",
            self.key
        )
    }
}

/// The labels of a record, lowest precedence first: `dynamic` (successful label expression
/// results, in order; a later duplicate key wins), then the ruleset's static labels, then the
/// built-ins. Built-ins can't be overridden because tools rely on them to find an operation's
/// subject, owner and ruleset. Every value is passed through [`label_value`]; keys that are not
/// qualified names are left out and returned as warnings.
pub(crate) fn build_labels<'a>(
    subject: &Subject,
    ruleset: &RuleSetInfo,
    operation: &str,
    dynamic: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> (Labels, Vec<LabelWarning>) {
    let mut labels = Labels::default();
    let mut warnings = Vec::new();
    let mut set = |key: &str, value: &str, source: LabelSource| {
        if is_qualified_name(key) {
            let shown = label_value(value);
            let node = NodeKey::of(key).filter(|_| shown != value && is_node_name(value));
            labels.insert(key.to_owned(), shown);
            if let Some(node) = node {
                labels.set_node_name(node, value);
            }
        } else {
            let warning = LabelWarning {
                key: key.to_owned(),
                source,
            };
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
        }
    };
    for (key, value) in dynamic {
        set(key, value, LabelSource::Expression);
    }
    for (key, value) in &ruleset.labels {
        set(key, value, LabelSource::Static);
    }
    for (key, value) in builtin_labels(subject, ruleset, operation) {
        labels.insert(key, label_value(value));
    }
    labels.shrink();
    (labels, warnings)
}

fn builtin_labels<'a>(
    subject: &'a Subject,
    ruleset: &'a RuleSetInfo,
    operation: &'a str,
) -> Vec<(&'static str, &'a str)> {
    let mut out = vec![
        (key::SUBJECT_UID, subject.uid.as_str()),
        (key::SUBJECT_NAME, &subject.name),
        (
            key::SUBJECT_NAMESPACE,
            subject.namespace.as_deref().unwrap_or_default(),
        ),
        (key::SUBJECT_KIND, &subject.kind),
        (key::OPERATION, operation),
        (key::COMPONENT, &ruleset.component),
        (key::RULESET, &ruleset.name),
    ];
    if let Some(owner) = subject.owner_references.first() {
        // `group/version`, or just `version` for the core group; `/` is not allowed in values.
        let (group, version) = owner
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", owner.api_version.as_str()));
        out.extend([
            (key::OWNER_UID, owner.uid.as_str()),
            (key::OWNER_NAME, &owner.name),
            (key::OWNER_KIND, &owner.kind),
            (key::OWNER_GROUP, group),
            (key::OWNER_VERSION, version),
        ]);
    }
    out
}

/// Whether `value` can be a node's name (a DNS-1123 subdomain), and so a node gate's.
fn is_node_name(value: &str) -> bool {
    validation::is_dns1123_subdomain(value).is_empty()
}

/// The node a node label's `value` stands for, as the gates key it: the value itself when it
/// can be a node's name, else the label value it is shown as.
pub(crate) fn gate_node(value: &str) -> String {
    if is_node_name(value) {
        value.to_owned()
    } else {
        label_value(value)
    }
}

/// `value` made into a valid label value.
///
/// Valid values are returned unchanged. Otherwise every character outside `[A-Za-z0-9-_.]`
/// becomes `-` and non-alphanumeric ends are trimmed; if the result is longer than 63 characters
/// it is cut to 54 and `-<hash8>` of the original value is appended, so two long values that
/// share a prefix stay distinct. A value with nothing usable left becomes its hash.
/// Replacing characters alone adds no hash, so values stay readable and selectable by what
/// users expect (`apps/v1` → `apps-v1`), at the cost that such values may coincide.
pub(super) fn label_value(value: &str) -> String {
    if is_valid_label_value(value) {
        return value.to_owned();
    }
    let replaced: String = value
        .chars()
        .map(|c| if is_value_char(c) { c } else { '-' })
        .collect();
    let trimmed = replaced.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    if trimmed.is_empty() {
        return hash8(value);
    }
    if trimmed.len() <= MAX_VALUE_LEN {
        return trimmed.to_owned();
    }
    let hash = hash8(value);
    let keep = MAX_VALUE_LEN - 1 - hash.len();
    let head = trimmed[..keep].trim_end_matches(|c: char| !c.is_ascii_alphanumeric());
    if head.is_empty() {
        hash
    } else {
        format!("{head}-{hash}")
    }
}

/// Kubernetes `IsValidLabelValue`: empty, or ≤ 63 of `[A-Za-z0-9-_.]` starting and ending with
/// an alphanumeric (the messages of why not are `ifo_apimachinery::validation`'s).
pub(super) fn is_valid_label_value(value: &str) -> bool {
    validation::is_valid_label_value(value).is_empty()
}

/// A character a label value may hold.
fn is_value_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// Kubernetes `IsQualifiedName`: `[prefix/]name`, prefix a DNS-1123 subdomain, name ≤ 63 of
/// `[A-Za-z0-9-_.]` starting and ending with an alphanumeric.
pub(super) fn is_qualified_name(key: &str) -> bool {
    validation::is_qualified_name(key).is_empty()
}

/// The key and source of each warning, in order.
#[cfg(test)]
pub(crate) fn warned_keys(warnings: &[LabelWarning]) -> Vec<(&str, LabelSource)> {
    warnings
        .iter()
        .map(|w| (w.key.as_str(), w.source))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::test_ruleset;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn built_in_keys_are_the_prefix_and_a_name() {
        for (key, _) in builtin_labels(&subject(), &ruleset(), "Migrating") {
            let name = key.strip_prefix(ifo_model::LABEL_PREFIX);
            assert!(
                name.is_some_and(|n| !n.is_empty() && !n.contains('/')),
                "{key}"
            );
            assert!(
                matches!(
                    super::super::label_set::shared_key(key.to_owned()),
                    crate::operation::LabelKey::Borrowed(_)
                ),
                "{key} is not shared"
            );
        }
    }

    fn subject() -> Subject {
        Subject {
            api_version: "kubevirt.io/v1".into(),
            kind: "VirtualMachineInstance".into(),
            name: "vm1".into(),
            namespace: Some("ns1".into()),
            uid: "uid-1".into(),
            generation: Some(3),
            owner_references: vec![OwnerReference {
                api_version: "kubevirt.io/v1".into(),
                kind: "VirtualMachine".into(),
                name: "vm1".into(),
                uid: "owner-1".into(),
                ..Default::default()
            }],
        }
    }

    fn ruleset() -> RuleSetInfo {
        test_ruleset("kubevirt", "virt")
            .with_labels(&[("team", "static"), ("ifo.kubevirt.io/operation", "hijack")])
    }

    #[test]
    fn builtins_win_over_static_over_dynamic() {
        let dynamic = [
            ("team", "dynamic"),
            ("tier", "gold"),
            ("ifo.kubevirt.io/ruleset", "hijack"),
        ];
        let (labels, warnings) = build_labels(&subject(), &ruleset(), "Migrating", dynamic);
        assert!(warnings.is_empty());
        let l = |k: &str| labels.get(k);
        assert_eq!(l("team"), Some("static"));
        assert_eq!(l("tier"), Some("gold"));
        assert_eq!(l("ifo.kubevirt.io/operation"), Some("Migrating"));
        assert_eq!(l("ifo.kubevirt.io/ruleset"), Some("kubevirt"));
        assert_eq!(l("ifo.kubevirt.io/component"), Some("virt"));
        assert_eq!(l("ifo.kubevirt.io/subject-uid"), Some("uid-1"));
        assert_eq!(l("ifo.kubevirt.io/subject-name"), Some("vm1"));
        assert_eq!(l("ifo.kubevirt.io/subject-namespace"), Some("ns1"));
        assert_eq!(
            l("ifo.kubevirt.io/subject-kind"),
            Some("VirtualMachineInstance")
        );
        assert_eq!(l("ifo.kubevirt.io/owner-uid"), Some("owner-1"));
        assert_eq!(l("ifo.kubevirt.io/owner-name"), Some("vm1"));
        assert_eq!(l("ifo.kubevirt.io/owner-kind"), Some("VirtualMachine"));
        assert_eq!(l("ifo.kubevirt.io/owner-group"), Some("kubevirt.io"));
        assert_eq!(l("ifo.kubevirt.io/owner-version"), Some("v1"));
    }

    #[test]
    fn core_group_owner_and_cluster_subject() {
        let mut s = subject();
        s.namespace = None;
        s.owner_references[0].api_version = "v1".into();
        let (labels, _) = build_labels(&s, &ruleset(), "Op", []);
        assert_eq!(&labels["ifo.kubevirt.io/owner-group"], "");
        assert_eq!(&labels["ifo.kubevirt.io/owner-version"], "v1");
        assert_eq!(&labels["ifo.kubevirt.io/subject-namespace"], "");
        s.owner_references.clear();
        let (labels, _) = build_labels(&s, &ruleset(), "Op", []);
        assert!(!labels.iter().any(|(k, _)| k.contains("owner-")));
    }

    #[test]
    fn invalid_keys_are_reported_not_silently_dropped() {
        let mut rs = ruleset();
        rs.labels.insert("Bad Key".into(), "x".into());
        rs.labels.insert("UPPER.example.com/x".into(), "x".into());
        let dynamic = [("a/b/c", "x"), ("-lead", "x"), ("ok.example.com/fine", "y")];
        let (labels, warnings) = build_labels(&subject(), &rs, "Op", dynamic);
        assert_eq!(&labels["ok.example.com/fine"], "y");
        assert!(!labels.contains_key("Bad Key"));
        assert_eq!(
            warned_keys(&warnings),
            [
                ("a/b/c", LabelSource::Expression),
                ("-lead", LabelSource::Expression),
                ("Bad Key", LabelSource::Static),
                ("UPPER.example.com/x", LabelSource::Static),
            ]
        );
        assert!(warnings[0].to_string().contains("labelExpressions"));
    }

    #[test]
    fn values_are_made_valid_and_stay_distinct() {
        assert_eq!(label_value("Fine_value.1"), "Fine_value.1");
        assert_eq!(label_value(""), "");
        assert_eq!(label_value("apps/v1"), "apps-v1");
        assert_eq!(
            label_value("/leading and trailing/"),
            "leading-and-trailing"
        );
        let long_a = format!("{}a", "x".repeat(100));
        let long_b = format!("{}b", "x".repeat(100));
        let (a, b) = (label_value(&long_a), label_value(&long_b));
        assert_ne!(a, b);
        for v in [&a, &b] {
            assert!(is_valid_label_value(v), "{v}");
            assert_eq!(v.len(), 63);
            assert!(v.starts_with(&"x".repeat(54)));
        }
        let odd = label_value("///");
        assert!(is_valid_label_value(&odd) && !odd.is_empty());
        let long_subject = subject_with_name(&"n".repeat(253));
        let (labels, _) = build_labels(&long_subject, &ruleset(), "Op", []);
        assert!(labels.iter().all(|(_, v)| is_valid_label_value(v)));
        assert_eq!(labels["ifo.kubevirt.io/subject-name"].len(), 63);
        // Already-valid values are fixed points, so repeating never changes a value.
        assert_eq!(label_value(&a), a);
        assert_eq!(label_value("ünïcødé"), "n-c-d");
    }

    fn subject_with_name(name: &str) -> Subject {
        Subject {
            name: name.into(),
            ..subject()
        }
    }

    #[test]
    fn qualified_names() {
        for ok in ["a", "app.kubernetes.io/name", "x_y.z-1", "a.b/C"] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        let too_long = "a".repeat(64);
        for bad in [
            "",
            "/a",
            "a/",
            "A.b/c",
            "a/b/c",
            "-a",
            "a-",
            too_long.as_str(),
            "a b",
        ] {
            assert!(!is_qualified_name(bad), "{bad}");
        }
    }
}
