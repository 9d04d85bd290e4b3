//! The live InFlightOperations API (`live.ifo.kubevirt.io`): its names and the shape of its
//! object, in one place for the server that serves it and the kubectl plugin that reads it, so
//! the two cannot drift apart.

mod condition;
mod gate;
mod lenient;
mod object;
mod stale_cause;
mod window;

pub use condition::ConditionStatus;
pub use gate::{
    CLEAR_CONDITION, GATE_KIND, GATE_OVERRIDDEN_CONDITION, GATE_PLURAL, GATE_STALLED_CONDITION,
    GateOperation, GateScheduled, GateStatus, GateSubject, GateWindow, MaintenanceGate,
    StaleTarget, Verdict, WindowReason,
};
pub use object::{InFlightOperation, Spec, Status, SubjectRef};
pub use stale_cause::{
    CauseGroup, FIRST_LIST_PENDING, GROUP_FROM, NOT_WATCHED, StaleCause, group_by_cause,
};
pub use window::{Fit, fit};

/// `namespace/name`, or `name` alone for a cluster-scoped object: how messages and logs name an
/// object.
pub fn reference(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_owned(),
    }
}

/// The API group the APIService registers.
pub const GROUP: &str = "live.ifo.kubevirt.io";
/// The served version.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` of the served objects.
pub const GROUP_VERSION: &str = "live.ifo.kubevirt.io/v1alpha1";
/// The APIService's name: `<version>.<group>`.
pub const APISERVICE: &str = "v1alpha1.live.ifo.kubevirt.io";

/// Kind of operations on namespaced subjects (served in the subject's namespace).
pub const NAMESPACED_KIND: &str = "InFlightOperation";
/// Kind of operations on cluster-scoped subjects.
pub const CLUSTER_KIND: &str = "InFlightClusterOperation";
/// Resource of [`NAMESPACED_KIND`].
pub const NAMESPACED_PLURAL: &str = "inflightoperations";
/// Resource of [`CLUSTER_KIND`].
pub const CLUSTER_PLURAL: &str = "inflightclusteroperations";

/// Prefix of every label the server sets (`ifo.kubevirt.io/operation`, …).
pub const LABEL_PREFIX: &str = "ifo.kubevirt.io/";
/// The label naming the node an operation concerns (a migration's source node): its operations
/// hold the node's maintenance gate (`node.<node>`), and the plugin's `--node` selects on it.
pub const NODE_LABEL: &str = "ifo.kubevirt.io/node";
/// The label naming the node a live migration goes to: it holds that node's gate too.
pub const TARGET_NODE_LABEL: &str = "ifo.kubevirt.io/target-node";
/// The label that says how long an operation holds its [`NODE_LABEL`] node's gate: set to
/// [`STARTED_BEFORE_CORDON`], only while it started before the node was cordoned.
pub const NODE_HOLD_LABEL: &str = "ifo.kubevirt.io/node-hold";
/// The [`NODE_HOLD_LABEL`] value of an operation that holds its node only if it started before
/// the node was cordoned: one that started on a cordoned node (its subject placed there past
/// the cordon) holds nothing there.
pub const STARTED_BEFORE_CORDON: &str = "started-before-cordon";

/// Fields a field selector may name (the rest is a 400, never ignored); each is the dotted path
/// of a string in the wire object.
pub const SELECTABLE_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "spec.operation",
    "spec.ruleSet",
    "spec.component",
    "spec.subject.kind",
    "spec.subject.name",
    "spec.subject.namespace",
    "status.phase",
    "status.outcome",
];

/// How every `Warning` the server sends about a target it is not watching begins: the answer
/// may be incomplete, and clients that gate maintenance on it must not trust it.
pub const INCOMPLETE_WARNING: &str = "operations may be incomplete";

/// The Node annotation that lets evictions of the node's pods through the maintenance guard
/// while its gate is not clear; its value says why (e.g. `"hardware failure, INC-4711"`).
pub const MAINTENANCE_OVERRIDE_ANNOTATION: &str = "ifo.kubevirt.io/maintenance-override";

/// The Node annotation that ends the node's maintenance override: an RFC 3339 time (e.g.
/// `"2026-11-22T18:00:00Z"`) after which the guard holds evictions again, with no other change
/// to the Node.
pub const MAINTENANCE_OVERRIDE_UNTIL_ANNOTATION: &str =
    "ifo.kubevirt.io/maintenance-override-until";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composed_names_agree() {
        assert_eq!(GROUP_VERSION, format!("{GROUP}/{VERSION}"));
        assert_eq!(APISERVICE, format!("{VERSION}.{GROUP}"));
    }
}
