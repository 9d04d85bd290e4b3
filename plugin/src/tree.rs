//! `tree`: operations grouped by component → namespace → subject, each subject with its
//! operations (phase, age, message) aligned across the whole tree.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use jiff::Timestamp;

use super::format::age;
use super::op::Op;

/// Label of the group of cluster-scoped subjects.
pub const CLUSTER_SCOPE: &str = "(cluster-scoped)";
/// Label of operations without a component.
pub const NO_COMPONENT: &str = "(none)";

type Subjects<'a> = BTreeMap<(String, String), Vec<&'a Op>>;

/// component → namespace → (subject kind, subject name) → operations (oldest first).
pub fn group(ops: &[Op]) -> BTreeMap<String, BTreeMap<String, Subjects<'_>>> {
    let mut tree: BTreeMap<String, BTreeMap<String, Subjects<'_>>> = BTreeMap::new();
    for op in ops {
        let component = if op.spec.component.is_empty() {
            NO_COMPONENT.to_owned()
        } else {
            op.spec.component.clone()
        };
        let namespace = op
            .namespace
            .clone()
            .unwrap_or_else(|| CLUSTER_SCOPE.to_owned());
        tree.entry(component)
            .or_default()
            .entry(namespace)
            .or_default()
            .entry((op.spec.subject.kind.clone(), op.spec.subject.name.clone()))
            .or_default()
            .push(op);
    }
    for namespaces in tree.values_mut() {
        for subjects in namespaces.values_mut() {
            for ops in subjects.values_mut() {
                ops.sort_by(|a, b| {
                    (a.created, &a.spec.operation).cmp(&(b.created, &b.spec.operation))
                });
            }
        }
    }
    tree
}

fn branch(last: bool) -> (&'static str, &'static str) {
    if last {
        ("└── ", "    ")
    } else {
        ("├── ", "│   ")
    }
}

/// The operations as a tree: component, namespace, subject, then one aligned line per operation
/// (oldest first) with its phase, age and message.
pub fn render(ops: &[Op], now: Timestamp) -> String {
    let tree = group(ops);
    let op_width = ops
        .iter()
        .map(|o| o.spec.operation.chars().count())
        .max()
        .unwrap_or(0);
    let phase_width = ops
        .iter()
        .map(|o| o.status.phase.chars().count())
        .max()
        .unwrap_or(0);
    let age_width = ops
        .iter()
        .map(|o| age(now, o.created).len())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (component, namespaces) in &tree {
        let _ = writeln!(out, "{component}");
        let ns_count = namespaces.len();
        for (i, (namespace, subjects)) in namespaces.iter().enumerate() {
            let (ns_branch, ns_indent) = branch(i + 1 == ns_count);
            let _ = writeln!(out, "{ns_branch}{namespace}");
            let subject_count = subjects.len();
            for (j, ((kind, name), subject_ops)) in subjects.iter().enumerate() {
                let (s_branch, s_indent) = branch(j + 1 == subject_count);
                let mut line = format!("{ns_indent}{s_branch}{kind}/{name}");
                if let Some(owner) = subject_ops[0].spec.subject.owner_references.first() {
                    let _ = write!(line, "  (owner {}/{})", owner.kind, owner.name);
                }
                let _ = writeln!(out, "{line}");
                let op_count = subject_ops.len();
                for (k, op) in subject_ops.iter().enumerate() {
                    let (o_branch, _) = branch(k + 1 == op_count);
                    let line = format!(
                        "{ns_indent}{s_indent}{o_branch}{:<op_width$}  {:<phase_width$}  {:>age_width$}  {}",
                        op.spec.operation,
                        op.status.phase,
                        age(now, op.created),
                        op.message().replace(['\n', '\r'], " "),
                    );
                    let _ = writeln!(out, "{}", line.trim_end());
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::tests::op;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn groups_component_namespace_subject() {
        let mut ops = vec![
            op(Some("ns2"), "VirtualMachine", "vm3", "Starting", "Active"),
            op(Some("ns1"), "VirtualMachine", "vm1", "Migrating", "Active"),
            op(Some("ns1"), "VirtualMachine", "vm1", "Starting", "Active"),
            op(None, "Node", "n1", "Draining", "Active"),
        ];
        ops[3].spec.component = String::new();
        let tree = group(&ops);
        assert_eq!(tree.keys().collect::<Vec<_>>(), ["(none)", "kubevirt"]);
        assert_eq!(tree["kubevirt"].keys().collect::<Vec<_>>(), ["ns1", "ns2"]);
        let vm1 = &tree["kubevirt"]["ns1"][&("VirtualMachine".into(), "vm1".into())];
        assert_eq!(vm1.len(), 2);
        assert_eq!(
            tree["(none)"][CLUSTER_SCOPE].keys().next().unwrap(),
            &("Node".to_string(), "n1".to_string())
        );
    }

    #[test]
    fn renders_an_aligned_tree() {
        let now: Timestamp = "2026-01-01T10:00:45Z".parse().unwrap();
        let mut ops = vec![
            op(Some("ns1"), "VirtualMachine", "vm1", "Migrating", "Active"),
            op(Some("ns1"), "VirtualMachine", "vm1", "Starting", "Active"),
            op(Some("ns1"), "VirtualMachine", "vm2", "Starting", "Active"),
            op(
                Some("ns2"),
                "VirtualMachine",
                "vm3",
                "Stopping",
                "Completed",
            ),
        ];
        ops[1].status.message = None;
        ops[1].created = Some("2026-01-01T10:00:40Z".parse().unwrap());
        let text = render(&ops, now);
        let want = "\
kubevirt
├── ns1
│   ├── VirtualMachine/vm1
│   │   ├── Migrating  Active     45s  msg
│   │   └── Starting   Active      5s
│   └── VirtualMachine/vm2
│       └── Starting   Active     45s  msg
└── ns2
    └── VirtualMachine/vm3
        └── Stopping   Completed  45s  msg
";
        assert_eq!(text, want, "\n{text}");
    }

    #[test]
    fn shows_the_subjects_owner() {
        let now: Timestamp = "2026-01-01T10:00:45Z".parse().unwrap();
        let mut o = op(
            Some("ns1"),
            "VirtualMachineInstance",
            "vm1",
            "Migrating",
            "Active",
        );
        o.spec.subject.owner_references.push(OwnerReference {
            kind: "VirtualMachine".into(),
            name: "vm1".into(),
            uid: "u".into(),
            ..OwnerReference::default()
        });
        assert!(
            render(&[o], now).contains("VirtualMachineInstance/vm1  (owner VirtualMachine/vm1)")
        );
    }
}
