//! Which maintenance gates there are: their scopes, how their names are read and checked as
//! Kubernetes checks such names, and which scopes an operation counts in.

use std::fmt;

use hashbrown::Equivalent;

use crate::operation::{InFlightOperation, NodeKey};

/// How many scopes an operation can count in: see [`ScopeRef::by_role`].
pub(super) const ROLES: usize = 5;

/// What one maintenance gate covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum GateScope {
    /// Every operation.
    Cluster,
    /// Operations whose `ifo.kubevirt.io/node` or `ifo.kubevirt.io/target-node` names the node.
    Node(String),
    /// Operations of a component (the ruleset's `spec.component`).
    Component(String),
    /// Operations on subjects in a namespace.
    Namespace(String),
}

/// Why a name is not a gate's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GateNameError {
    /// The part before the first `.` is not a scope.
    #[error(
        "{0:?} is not a maintenance gate: gates are named cluster, node.<node>, component.<component> or namespace.<namespace>"
    )]
    UnknownScope(String),
    /// The scope is known, the value is not a valid name for it.
    #[error(
        "{name:?} is not a maintenance gate: {value:?} is not a valid {scope} name ({rule}); gates are named cluster, node.<node>, component.<component> or namespace.<namespace>"
    )]
    InvalidValue {
        /// The whole name.
        name: String,
        /// The scope it names (`node`).
        scope: &'static str,
        /// What follows the scope.
        value: String,
        /// What a valid value is.
        rule: &'static str,
    },
}

impl GateScope {
    /// The scope a gate name names (`cluster`, `node.<node>`, `component.<c>`,
    /// `namespace.<ns>`), with the value checked as Kubernetes checks such names.
    pub(crate) fn parse(name: &str) -> Result<GateScope, GateNameError> {
        if name == "cluster" {
            return Ok(GateScope::Cluster);
        }
        let unknown = || GateNameError::UnknownScope(name.to_owned());
        let (scope, value) = name.split_once('.').ok_or_else(unknown)?;
        let invalid = |scope, rule| GateNameError::InvalidValue {
            name: name.to_owned(),
            scope,
            value: value.to_owned(),
            rule,
        };
        match scope {
            "node" if is_dns_subdomain(value) => Ok(GateScope::Node(value.to_owned())),
            "node" => Err(invalid("node", DNS_SUBDOMAIN_RULE)),
            "component" if is_component(value) => Ok(GateScope::Component(value.to_owned())),
            "component" => Err(invalid("component", COMPONENT_RULE)),
            "namespace" if is_dns_label(value) => Ok(GateScope::Namespace(value.to_owned())),
            "namespace" => Err(invalid("namespace", DNS_LABEL_RULE)),
            _ => Err(unknown()),
        }
    }

    /// The scopes an active operation counts in: the cluster, its node and migration target,
    /// its component, its namespace. Values that could not name a gate are left out (the
    /// cluster gate still counts the operation).
    pub(crate) fn of(op: &InFlightOperation) -> impl Iterator<Item = GateScope> + '_ {
        ScopeRef::of(op).map(ScopeRef::to_owned)
    }

    /// Whether `op` counts in this scope only as a migration's target (a node gate's message
    /// says so).
    pub(crate) fn is_target_of(&self, op: &InFlightOperation) -> bool {
        match self {
            GateScope::Node(n) => {
                label(op, NodeKey::TARGET_NODE) == Some(n) && label(op, NodeKey::NODE) != Some(n)
            }
            _ => false,
        }
    }
}

impl fmt::Display for GateScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GateScope::Cluster => f.write_str("cluster"),
            GateScope::Node(n) => write!(f, "node.{n}"),
            GateScope::Component(c) => write!(f, "component.{c}"),
            GateScope::Namespace(ns) => write!(f, "namespace.{ns}"),
        }
    }
}

/// A [`GateScope`] borrowed from an operation, to find its scopes without building their names:
/// it hashes as the `GateScope` it names (the same variants in the same order, strings hashed
/// as strings), which a test checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum ScopeRef<'a> {
    Cluster,
    Node(&'a str),
    Component(&'a str),
    Namespace(&'a str),
}

impl<'a> ScopeRef<'a> {
    /// See [`GateScope::of`].
    pub(super) fn of(op: &'a InFlightOperation) -> impl Iterator<Item = ScopeRef<'a>> + 'a {
        Self::by_role(op).into_iter().flatten()
    }

    /// The scopes of `op` by the role it has in them: the cluster, its node, its migration's
    /// target node (when another), its component, its namespace.
    pub(super) fn by_role(op: &'a InFlightOperation) -> [Option<ScopeRef<'a>>; ROLES] {
        Self::named_by(op).map(|scope| scope.filter(|s| s.is_valid()))
    }

    /// The same before their names are checked ([`ScopeRef::is_valid`]): the index looks them
    /// up as they are, and checks only a name it does not hold yet (it holds valid ones only),
    /// so an operation that joins scopes that exist reads none of their names through. A
    /// target node equal to the node is none, whether the name is valid or not.
    pub(super) fn named_by(op: &'a InFlightOperation) -> [Option<ScopeRef<'a>>; ROLES] {
        let node = label(op, NodeKey::NODE);
        let target = label(op, NodeKey::TARGET_NODE).filter(|t| Some(*t) != node);
        [
            Some(ScopeRef::Cluster),
            node.map(ScopeRef::Node),
            target.map(ScopeRef::Node),
            Some(ScopeRef::Component(&op.component)),
            op.namespace.as_deref().map(ScopeRef::Namespace),
        ]
    }

    /// Whether its name is one a gate can have.
    pub(super) fn is_valid(self) -> bool {
        match self {
            ScopeRef::Cluster => true,
            ScopeRef::Node(n) => is_dns_subdomain(n),
            ScopeRef::Component(c) => is_component(c),
            ScopeRef::Namespace(ns) => is_dns_label(ns),
        }
    }

    pub(super) fn to_owned(self) -> GateScope {
        match self {
            ScopeRef::Cluster => GateScope::Cluster,
            ScopeRef::Node(n) => GateScope::Node(n.to_owned()),
            ScopeRef::Component(c) => GateScope::Component(c.to_owned()),
            ScopeRef::Namespace(ns) => GateScope::Namespace(ns.to_owned()),
        }
    }
}

impl Equivalent<GateScope> for ScopeRef<'_> {
    fn equivalent(&self, key: &GateScope) -> bool {
        match (self, key) {
            (ScopeRef::Cluster, GateScope::Cluster) => true,
            (ScopeRef::Node(a), GateScope::Node(b))
            | (ScopeRef::Component(a), GateScope::Component(b))
            | (ScopeRef::Namespace(a), GateScope::Namespace(b)) => *a == b.as_str(),
            _ => false,
        }
    }
}

/// A node label of `op`, unless empty: read at the place the labels keep for it
/// ([`Labels::node`]), since every change the index applies reads them.
///
/// [`Labels::node`]: crate::operation::Labels::node
pub(super) fn label(op: &InFlightOperation, key: NodeKey) -> Option<&str> {
    op.labels.node(key).filter(|v| !v.is_empty())
}

const DNS_SUBDOMAIN_RULE: &str = "lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters";
const DNS_LABEL_RULE: &str = "lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters";
const COMPONENT_RULE: &str = "letters, digits, '-', '_' and '.', starting and ending with a letter or digit, at most 63 characters";

fn alnum_ends(s: &str, inner: impl Fn(u8) -> bool, edge: impl Fn(u8) -> bool) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(&first), Some(&last)) => edge(first) && edge(last) && b.iter().all(|&c| inner(c)),
        _ => false,
    }
}

fn lower_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// Kubernetes `IsDNS1123Label`.
fn is_dns_label(s: &str) -> bool {
    s.len() <= 63 && alnum_ends(s, |c| lower_alnum(c) || c == b'-', lower_alnum)
}

/// Kubernetes `IsDNS1123Subdomain`, what a Node's name is (no limit of 63 on a part between
/// dots: that is DNS's, which Kubernetes does not apply to object names).
fn is_dns_subdomain(s: &str) -> bool {
    ifo_apimachinery::validation::is_dns1123_subdomain(s).is_empty()
}

/// A label value that is not empty: what a component name can be in a gate's name.
fn is_component(s: &str) -> bool {
    s.len() <= 63
        && alnum_ends(
            s,
            |c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'),
            |c| c.is_ascii_alphanumeric(),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hashbrown::HashMap;

    #[test]
    fn names_parse_and_print_back() {
        for name in [
            "cluster",
            "node.worker-1",
            "node.ip-10-0-0-1.ec2.internal",
            // A part longer than 63 characters is a valid object name.
            "node.a-node-whose-name-is-longer-than-any-dns-label-may-be-sixty-four-or-more",
            "component.kubevirt",
            "component.OpenShift_Virt",
            "namespace.demo",
        ] {
            assert_eq!(GateScope::parse(name).unwrap().to_string(), name);
        }
        assert_eq!(
            GateScope::parse("node.w1"),
            Ok(GateScope::Node("w1".into()))
        );
    }

    #[test]
    fn a_borrowed_scope_finds_the_scope_it_names_and_no_other() {
        let owned = [
            GateScope::Cluster,
            GateScope::Node("w1".into()),
            GateScope::Component("w1".into()),
            GateScope::Namespace("w1".into()),
            GateScope::Node("w2".into()),
        ];
        let map: HashMap<GateScope, usize> = owned.iter().cloned().zip(0..).collect();
        let borrowed = [
            ScopeRef::Cluster,
            ScopeRef::Node("w1"),
            ScopeRef::Component("w1"),
            ScopeRef::Namespace("w1"),
            ScopeRef::Node("w2"),
        ];
        for (i, scope) in borrowed.into_iter().enumerate() {
            assert_eq!(map.get(&scope), Some(&i), "{scope:?}");
            assert_eq!(scope.to_owned(), owned[i]);
        }
        assert_eq!(map.get(&ScopeRef::Namespace("w2")), None);
    }

    #[test]
    fn malformed_names_say_which_scopes_exist() {
        for name in ["", "clusters", "pod.x", "node", "cluster.x"] {
            let err = GateScope::parse(name).unwrap_err();
            assert!(
                matches!(err, GateNameError::UnknownScope(_)),
                "{name}: {err:?}"
            );
            assert!(err.to_string().contains("node.<node>"), "{err}");
        }
        for name in [
            "node.",
            "node.Worker",
            "node.a_b",
            "namespace.a.b",
            "component.-x",
            "namespace.",
        ] {
            let err = GateScope::parse(name).unwrap_err();
            assert!(
                matches!(err, GateNameError::InvalidValue { .. }),
                "{name}: {err:?}"
            );
            assert!(err.to_string().contains("namespace.<namespace>"), "{err}");
        }
        let long = format!("namespace.{}", "a".repeat(64));
        assert!(GateScope::parse(&long).is_err());
    }
}
