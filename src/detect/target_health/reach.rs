//! Which maintenance gates one ruleset can put operations in ([`Reach`]), read from the ruleset
//! or, when it does not compile, from its spec.

use crate::index::GateScope;
use crate::ruleset::{CompiledRuleSet, RuleSetSpec};

use super::Namespaces;

/// Which maintenance gates one ruleset can put operations in: the cluster's, its component's,
/// those of the namespaces it covers and, when it labels operations with a node, every node's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reach {
    /// Its component.
    pub component: String,
    /// Whether it labels the node (or the migration target) of an operation, statically or by
    /// an expression.
    pub nodes: bool,
    /// The namespaces it covers; `None`: every one (and cluster-scoped subjects).
    pub namespaces: Namespaces,
}

/// Whether labels with these keys can name a node.
fn names_nodes<'a>(mut keys: impl Iterator<Item = &'a str>) -> bool {
    keys.any(|k| k == ifo_model::NODE_LABEL || k == ifo_model::TARGET_NODE_LABEL)
}

impl Reach {
    /// The reach of a loaded ruleset (its related parts' labels are its operations' too; a
    /// part's own reach is that of its label expressions).
    pub(crate) fn of(rs: &CompiledRuleSet) -> Reach {
        Reach {
            component: rs.info.component.clone(),
            nodes: names_nodes(
                rs.info
                    .labels
                    .keys()
                    .map(String::as_str)
                    .chain(rs.exprs.label_expressions.iter().map(|(k, _)| k.as_str()))
                    .chain(
                        rs.related.iter().flat_map(|p| {
                            p.exprs.label_expressions.iter().map(|(k, _)| k.as_str())
                        }),
                    ),
            ),
            namespaces: (!rs.namespaces.is_empty())
                .then(|| rs.namespaces.iter().cloned().collect()),
        }
    }

    /// The reach a ruleset would have, read from its spec alone (it does not compile).
    pub(crate) fn of_spec(spec: &RuleSetSpec) -> Reach {
        Reach {
            component: spec.component.clone(),
            nodes: names_nodes(
                spec.labels
                    .keys()
                    .map(String::as_str)
                    .chain(spec.label_expressions.iter().map(|l| l.key.as_str()))
                    .chain(
                        spec.related
                            .iter()
                            .flat_map(|r| r.label_expressions.iter().map(|l| l.key.as_str())),
                    ),
            ),
            namespaces: (!spec.namespaces.is_empty())
                .then(|| spec.namespaces.iter().cloned().collect()),
        }
    }

    /// Whether the ruleset can put an operation in the gate of `scope`.
    pub(super) fn reaches(&self, scope: &GateScope) -> bool {
        match scope {
            GateScope::Cluster => true,
            GateScope::Node(_) => self.nodes,
            GateScope::Component(c) => self.component == *c,
            GateScope::Namespace(ns) => covers(&self.namespaces, Some(ns)),
        }
    }
}

/// Whether a ruleset covering `covered` matters to a question about `namespace`.
pub(super) fn covers(covered: &Namespaces, namespace: Option<&str>) -> bool {
    match (covered, namespace) {
        (Some(set), Some(ns)) => set.contains(ns),
        _ => true,
    }
}
