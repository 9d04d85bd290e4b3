//! Whether a gate exists: a gate of a node, namespace or component the cluster does not have is
//! a 404, so that a typo in `kubectl wait … gate/node.worker1` fails instead of reading `Clear`.
//!
//! `cluster` always exists, and so does any gate with operations in flight (a node that is gone
//! still has its gate while operations name it). Otherwise a node or namespace gate exists while
//! the cluster has that node or namespace, and a component gate while a ruleset declares the
//! component. While the server cannot tell (it has not listed the cluster's nodes or namespaces
//! yet, their watch fails, or the initial sync is not done for components), the gate is served
//! `Unknown`: never a 404, never `Clear`. The decision is [`decide`], a pure function of what
//! the server knows of the scope's subject ([`Presence`]).

use crate::index::GateScope;
use crate::inventory::{Inventory, Kind, Presence};

/// Whether a gate exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Existence {
    /// It does: served as its operations and feeds say.
    Exists,
    /// It does not: a GET is a 404 with this message after `not found: `, and lists leave it out.
    NotFound(String),
    /// The server cannot tell yet: served, `Unknown`, with this message.
    Unknown(String),
}

impl Existence {
    /// Whether the gate is served (it exists, or may: then it is `Unknown`).
    pub(crate) fn is_served(&self) -> bool {
        !matches!(self, Existence::NotFound(_))
    }
}

/// Whether the gate of `scope`, with `active` operations in flight, exists, given what the
/// server knows of its subject (`presence`, asked only when it matters).
pub(crate) fn decide(
    scope: &GateScope,
    active: usize,
    presence: impl FnOnce() -> Presence,
) -> Existence {
    let what = match scope {
        GateScope::Cluster => return Existence::Exists,
        _ if active > 0 => return Existence::Exists,
        GateScope::Node(n) => format!("node {n}"),
        GateScope::Namespace(ns) => format!("namespace {ns}"),
        GateScope::Component(c) => format!("component {c}"),
    };
    match presence() {
        Presence::Present => Existence::Exists,
        Presence::Absent => Existence::NotFound(match scope {
            GateScope::Component(c) => format!("no ruleset declares component {c}"),
            _ => format!("the cluster has no {what}"),
        }),
        Presence::Unknown(why) => {
            Existence::Unknown(format!("whether {what} exists is not known: {why}"))
        }
    }
}

/// What the server knows of the subject of `scope` (not of `cluster`, which always exists):
/// from the `inventory` for nodes and namespaces; for a component, whether a ruleset declares
/// it (`declares`), which tells that it does not only once the initial sync is done (`synced`:
/// every ruleset listed and started).
pub(crate) fn presence(
    scope: &GateScope,
    inventory: &Inventory,
    declares: impl FnOnce(&str) -> bool,
    synced: bool,
) -> Presence {
    match scope {
        GateScope::Cluster => Presence::Present,
        GateScope::Node(n) => inventory.presence(Kind::Node, n),
        GateScope::Namespace(ns) => inventory.presence(Kind::Namespace, ns),
        GateScope::Component(c) if declares(c) => Presence::Present,
        GateScope::Component(_) if synced => Presence::Absent,
        GateScope::Component(_) => Presence::Unknown(
            "no ruleset read so far declares it, and the initial sync is not done".to_owned(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: &str) -> GateScope {
        GateScope::Node(n.to_owned())
    }

    #[test]
    fn the_cluster_and_any_scope_with_operations_in_flight_exist_whatever_is_known() {
        let never = || panic!("not asked");
        assert_eq!(decide(&GateScope::Cluster, 0, never), Existence::Exists);
        for scope in [
            node("gone"),
            GateScope::Namespace("gone".into()),
            GateScope::Component("gone".into()),
        ] {
            assert_eq!(decide(&scope, 2, never), Existence::Exists, "{scope}");
        }
    }

    #[test]
    fn an_idle_scope_exists_while_its_subject_does() {
        assert_eq!(
            decide(&node("w1"), 0, || Presence::Present),
            Existence::Exists
        );
        assert_eq!(
            decide(&node("worker1"), 0, || Presence::Absent),
            Existence::NotFound("the cluster has no node worker1".into())
        );
        assert_eq!(
            decide(&GateScope::Namespace("demo".into()), 0, || Presence::Absent),
            Existence::NotFound("the cluster has no namespace demo".into())
        );
        assert_eq!(
            decide(&GateScope::Component("kubevrit".into()), 0, || {
                Presence::Absent
            }),
            Existence::NotFound("no ruleset declares component kubevrit".into())
        );
        assert!(!decide(&node("worker1"), 0, || Presence::Absent).is_served());
    }

    #[test]
    fn an_idle_scope_whose_subject_is_not_known_yet_is_unknown_never_missing() {
        let inventory = Inventory::default();
        let unknown = decide(&node("w1"), 0, || {
            presence(&node("w1"), &inventory, |_| false, true)
        });
        assert_eq!(
            unknown,
            Existence::Unknown(
                "whether node w1 exists is not known: the cluster's nodes have not been listed yet"
                    .into()
            )
        );
        assert!(unknown.is_served());
        inventory.failed(Kind::Namespace, "list failed: forbidden".into());
        let ns = GateScope::Namespace("demo".into());
        assert_eq!(
            decide(&ns, 0, || presence(&ns, &inventory, |_| false, true)),
            Existence::Unknown(
                "whether namespace demo exists is not known: the watch of the cluster's namespaces is failing: list failed: forbidden"
                    .into()
            )
        );
        // Listed: present or absent.
        inventory.listed(Kind::Node, ["w1"]);
        assert_eq!(
            presence(&node("w1"), &inventory, |_| false, true),
            Presence::Present
        );
        assert_eq!(
            presence(&node("w2"), &inventory, |_| false, true),
            Presence::Absent
        );
    }

    #[test]
    fn a_component_exists_while_a_ruleset_declares_it_and_is_unknown_before_the_sync() {
        let inventory = Inventory::default();
        let c = GateScope::Component("kubevirt".into());
        let declares = |c: &str| c == "kubevirt";
        assert_eq!(presence(&c, &inventory, declares, false), Presence::Present);
        let other = GateScope::Component("other".into());
        assert_eq!(
            presence(&other, &inventory, declares, true),
            Presence::Absent
        );
        assert!(matches!(
            decide(&other, 0, || presence(&other, &inventory, declares, false)),
            Existence::Unknown(m) if m.starts_with("whether component other exists is not known: ")
        ));
    }
}
