//! What to select: the plugin's filters become server-side field and label selectors, so the
//! server sends only what is asked for (and RBAC applies to exactly that request).

use super::op::Op;

use ifo_model::{NODE_LABEL, TARGET_NODE_LABEL};

/// Which operations to show, from the command line. Sent to the server as selectors rather than
/// applied here, so that only what is asked for crosses the network and RBAC is checked against
/// exactly that request; [`Filters::matches`] applies the same fields again to watch events, where
/// an object can stop matching.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// `metadata.name`.
    pub name: Option<String>,
    /// `spec.operation`.
    pub operation: Option<String>,
    /// `spec.component`.
    pub component: Option<String>,
    /// `spec.subject.kind`.
    pub kind: Option<String>,
    /// `spec.subject.name`.
    pub subject: Option<String>,
    /// A label selector, passed through.
    pub selector: Option<String>,
    /// A node: the `ifo.kubevirt.io/node` or the `ifo.kubevirt.io/target-node` label. Applied
    /// here, not by the server: a label selector cannot say "either label".
    pub node: Option<String>,
    /// Only `status.phase=Active`.
    pub active_only: bool,
}

impl Filters {
    fn fields(&self) -> Vec<(&'static str, &str)> {
        let mut fields = Vec::new();
        if self.active_only {
            fields.push(("status.phase", "Active"));
        }
        fields.extend(given([
            ("metadata.name", &self.name),
            ("spec.operation", &self.operation),
            ("spec.component", &self.component),
            ("spec.subject.kind", &self.kind),
            ("spec.subject.name", &self.subject),
        ]));
        fields
    }

    /// The field selector for the list or watch, if any.
    pub fn field_selector(&self) -> Option<String> {
        let fields = self.fields();
        (!fields.is_empty()).then(|| {
            fields
                .iter()
                .map(|(path, value)| {
                    format!("{path}={}", ifo_apimachinery::fields::escape_value(value))
                })
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// The label selector for the list or watch, if any (blank counts as none).
    pub fn label_selector(&self) -> Option<&str> {
        self.selector.as_deref().filter(|s| !s.trim().is_empty())
    }

    /// Whether `op` concerns the `--node`, if one is asked for.
    pub fn on_node(&self, op: &Op) -> bool {
        self.node.as_deref().is_none_or(|node| {
            [NODE_LABEL, TARGET_NODE_LABEL]
                .iter()
                .any(|key| op.labels.get(*key).is_some_and(|v| v == node))
        })
    }

    /// Whether `op` satisfies the field filters and the node (the label selector is the
    /// server's to apply). Used on watch events, where an object that stopped matching must be
    /// dropped.
    pub fn matches(&self, op: &Op) -> bool {
        self.on_node(op)
            && self.fields().iter().all(|(path, value)| {
                let actual = match *path {
                    "metadata.name" => &op.name,
                    "status.phase" => &op.status.phase,
                    "spec.operation" => &op.spec.operation,
                    "spec.component" => &op.spec.component,
                    "spec.subject.kind" => &op.spec.subject.kind,
                    "spec.subject.name" => &op.spec.subject.name,
                    _ => return false,
                };
                actual == value
            })
    }

    /// A short description for messages, e.g. `operation=Migrating, kind=VirtualMachine`.
    pub fn describe(&self) -> String {
        given([
            ("operation", &self.operation),
            ("component", &self.component),
            ("kind", &self.kind),
            ("subject", &self.subject),
            ("selector", &self.selector),
            ("node", &self.node),
        ])
        .map(|(name, value)| format!("{name}={value}"))
        .collect::<Vec<_>>()
        .join(", ")
    }
}

/// The filters of `named` that are given, with their names.
fn given<'a, const N: usize>(
    named: [(&'static str, &'a Option<String>); N],
) -> impl Iterator<Item = (&'static str, &'a str)> {
    named
        .into_iter()
        .filter_map(|(name, value)| Some((name, value.as_deref()?)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::tests::op;

    #[test]
    fn builds_field_selectors() {
        assert_eq!(Filters::default().field_selector(), None);
        let f = Filters {
            operation: Some("Migrating".into()),
            kind: Some("VirtualMachine".into()),
            active_only: true,
            ..Default::default()
        };
        assert_eq!(
            f.field_selector().unwrap(),
            "status.phase=Active,spec.operation=Migrating,spec.subject.kind=VirtualMachine"
        );
        let f = Filters {
            component: Some("a,b=c\\".into()),
            ..Default::default()
        };
        assert_eq!(f.field_selector().unwrap(), "spec.component=a\\,b\\=c\\\\");
    }

    #[test]
    fn label_selector_is_passed_through_unless_blank() {
        let mut f = Filters {
            selector: Some("a=b,c!=d".into()),
            ..Default::default()
        };
        assert_eq!(f.label_selector(), Some("a=b,c!=d"));
        f.selector = Some("  ".into());
        assert_eq!(f.label_selector(), None);
    }

    #[test]
    fn matches_like_the_server() {
        let active = op(Some("ns"), "VirtualMachine", "vm1", "Migrating", "Active");
        let done = op(
            Some("ns"),
            "VirtualMachine",
            "vm1",
            "Migrating",
            "Completed",
        );
        let f = Filters {
            active_only: true,
            operation: Some("Migrating".into()),
            ..Default::default()
        };
        assert!(f.matches(&active));
        assert!(!f.matches(&done));
        let f = Filters {
            kind: Some("Node".into()),
            ..Default::default()
        };
        assert!(!f.matches(&active));
        assert!(Filters::default().matches(&done));
    }

    #[test]
    fn a_node_matches_the_node_or_a_migrations_target_node() {
        let mut on_source = op(
            Some("ns"),
            "VirtualMachineInstance",
            "vmi1",
            "LiveMigrating",
            "Active",
        );
        on_source
            .labels
            .insert(NODE_LABEL.into(), "worker-1".into());
        let mut into_target = on_source.clone();
        into_target
            .labels
            .insert(NODE_LABEL.into(), "worker-2".into());
        into_target
            .labels
            .insert(TARGET_NODE_LABEL.into(), "worker-1".into());
        let elsewhere = op(Some("ns"), "VirtualMachine", "vm2", "Starting", "Active");
        let f = Filters {
            node: Some("worker-1".into()),
            ..Default::default()
        };
        assert!(f.matches(&on_source));
        assert!(f.matches(&into_target));
        assert!(!f.matches(&elsewhere));
        assert!(Filters::default().matches(&elsewhere));
        // Never sent to the server as a selector: the server cannot say "either label".
        assert_eq!(f.label_selector(), None);
        assert_eq!(f.field_selector(), None);
        assert_eq!(f.describe(), "node=worker-1");
    }

    #[test]
    fn describes_itself() {
        let f = Filters {
            operation: Some("Migrating".into()),
            selector: Some("a=b".into()),
            ..Default::default()
        };
        assert_eq!(f.describe(), "operation=Migrating, selector=a=b");
    }
}
