//! An InFlightOperation (or InFlightClusterOperation) as the plugin reads it: the API object
//! read through the shared model (`ifo_model::InFlightOperation`, lenient: a missing or odd field
//! is empty, never an error), the metadata it prints taken out of `ObjectMeta`'s options, and
//! the object itself for `-o json|yaml`.

use std::collections::BTreeMap;

use ifo_model::{ConditionStatus, InFlightOperation};
use jiff::Timestamp;
use serde::Deserialize;
use serde_json::Value;

pub use ifo_model::{
    APISERVICE, CLUSTER_KIND, CLUSTER_PLURAL, GROUP, NAMESPACED_KIND, NAMESPACED_PLURAL, Spec,
    Status, SubjectRef, VERSION,
};

/// One served operation, ready to print (its fields without control characters).
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// `metadata.name` (empty when missing).
    pub name: String,
    /// `metadata.namespace`; `None` for an InFlightClusterOperation.
    pub namespace: Option<String>,
    /// `metadata.creationTimestamp`: when the operation started.
    pub created: Option<Timestamp>,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `spec`; an empty `subject.namespace` reads as none, as for `metadata.namespace`.
    pub spec: Spec,
    /// `status`.
    pub status: Status,
    /// The API object as served: `-o json|yaml` print it verbatim, fields this version of the
    /// model does not know included.
    pub raw: Value,
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

impl Op {
    /// Reads a served object; anything that is not an object reads as an empty operation. Every
    /// field but `raw` is [sanitized](crate::sanitize): printable as it is.
    pub fn from_json(raw: Value) -> Op {
        let InFlightOperation {
            metadata,
            mut spec,
            mut status,
            ..
        } = InFlightOperation::deserialize(&crate::sanitize::value(&raw)).unwrap_or_default();
        // The message keeps its lines (the detail view prints them).
        if let Some(message) = raw.pointer("/status/message").and_then(Value::as_str) {
            status.message = Some(crate::sanitize::text(message));
        }
        spec.subject.namespace = non_empty(spec.subject.namespace);
        Op {
            name: metadata.name.unwrap_or_default(),
            namespace: non_empty(metadata.namespace),
            created: metadata.creation_timestamp.map(|t| t.0),
            labels: metadata.labels.unwrap_or_default(),
            spec,
            status,
            raw,
        }
    }

    /// `status.message`, empty when there is none.
    pub fn message(&self) -> &str {
        self.status.message.as_deref().unwrap_or_default()
    }

    /// `status.outcome`, empty while active.
    pub fn outcome(&self) -> &str {
        self.status.outcome.as_deref().unwrap_or_default()
    }

    /// `status.lastDetected`.
    pub fn last_detected(&self) -> Option<Timestamp> {
        self.status.last_detected.as_ref().map(|t| t.0)
    }

    /// `status.completed`; `None` while active.
    pub fn completed(&self) -> Option<Timestamp> {
        self.status.completed.as_ref().map(|t| t.0)
    }

    /// `status.progress`: percent done, when the rule reports it.
    pub fn progress(&self) -> Option<f64> {
        self.status.progress.filter(|p| p.is_finite())
    }

    /// `status.expectedEnd`: when the operation is expected to end.
    pub fn expected_end(&self) -> Option<Timestamp> {
        self.status.expected_end.as_ref().map(|t| t.0)
    }

    /// The far edge of the expected end's band (`status.expectedEndP90`), from history.
    pub fn expected_end_p90(&self) -> Option<Timestamp> {
        self.status.expected_end_p90.as_ref().map(|t| t.0)
    }

    /// The `Stalled` condition while it is `True`: (reason, message).
    pub fn stall(&self) -> Option<(&str, &str)> {
        self.status
            .conditions
            .iter()
            .find(|c| c.type_ == "Stalled" && ConditionStatus::holds(&c.status))
            .map(|c| (c.reason.as_str(), c.message.as_str()))
    }

    /// `status.gracePeriodEnd`: set while an active operation is ending (no rule detects it,
    /// it completes then unless detected again).
    pub fn ending_at(&self) -> Option<Timestamp> {
        self.status.grace_period_end.as_ref().map(|t| t.0)
    }

    /// Whether the operation is on a cluster-scoped subject (an InFlightClusterOperation).
    pub fn is_cluster_scoped(&self) -> bool {
        self.namespace.is_none()
    }

    /// The kind the object was served as, derived from the scope so that it holds even for an
    /// object without `kind`.
    pub fn kind(&self) -> &'static str {
        if self.is_cluster_scoped() {
            CLUSTER_KIND
        } else {
            NAMESPACED_KIND
        }
    }

    /// Whether the operation is still going on: what `check` and `wait` count.
    pub fn is_active(&self) -> bool {
        self.status.phase == "Active"
    }

    /// `resource.group/name`, as `kubectl get -o name` prints it.
    pub fn qualified_name(&self) -> String {
        let plural = if self.is_cluster_scoped() {
            "inflightclusteroperation"
        } else {
            "inflightoperation"
        };
        format!("{plural}.{GROUP}/{}", self.name)
    }

    /// Identity of the object across events: (namespace, name).
    pub fn key(&self) -> (String, String) {
        (
            self.namespace.clone().unwrap_or_default(),
            self.name.clone(),
        )
    }

    /// `Kind/name` of the subject.
    pub fn subject_ref(&self) -> String {
        format!("{}/{}", self.spec.subject.kind, self.spec.subject.name)
    }
}

/// The order lists are printed in: namespace (cluster-scoped first), subject kind and name,
/// then the oldest operation first.
pub fn sort(ops: &mut [Op]) {
    fn key(o: &Op) -> impl Ord + '_ {
        (
            &o.namespace,
            &o.spec.subject.kind,
            &o.spec.subject.name,
            o.created,
            &o.spec.operation,
            &o.name,
        )
    }
    ops.sort_by(|a, b| key(a).cmp(&key(b)));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A served object with the given fields (tests of every module build on it).
    pub(crate) fn op(
        ns: Option<&str>,
        kind: &str,
        subject: &str,
        operation: &str,
        phase: &str,
    ) -> Op {
        let mut metadata = json!({
            "name": format!("{}-{}-0000", subject, operation.to_lowercase()),
            "creationTimestamp": "2026-01-01T10:00:00Z",
            "labels": {"ifo.kubevirt.io/operation": operation},
        });
        if let Some(ns) = ns {
            metadata["namespace"] = json!(ns);
        }
        Op::from_json(json!({
            "apiVersion": "live.ifo.kubevirt.io/v1alpha1",
            "kind": if ns.is_some() { NAMESPACED_KIND } else { CLUSTER_KIND },
            "metadata": metadata,
            "spec": {"operation": operation, "ruleSet": "rs", "component": "kubevirt",
                     "subject": {"apiVersion": "v1", "kind": kind, "name": subject,
                                 "namespace": ns, "uid": format!("uid-{subject}")}},
            "status": {"phase": phase, "message": "msg", "lastDetected": "2026-01-01T10:05:00Z",
                       "detectedBy": ["rs"]},
        }))
    }

    #[test]
    fn reads_a_served_object() {
        let o = op(Some("ns1"), "VirtualMachine", "vm1", "Migrating", "Active");
        assert_eq!(o.name, "vm1-migrating-0000");
        assert_eq!(o.namespace.as_deref(), Some("ns1"));
        assert_eq!(o.spec.subject.kind, "VirtualMachine");
        assert_eq!(o.spec.subject.namespace.as_deref(), Some("ns1"));
        assert_eq!(o.created, Some("2026-01-01T10:00:00Z".parse().unwrap()));
        assert_eq!(o.status.detected_by, ["rs"]);
        assert!(o.is_active());
        assert_eq!(o.kind(), NAMESPACED_KIND);
        assert_eq!(
            o.qualified_name(),
            "inflightoperation.live.ifo.kubevirt.io/vm1-migrating-0000"
        );
    }

    #[test]
    fn odd_objects_are_read_without_failing() {
        let o = Op::from_json(json!({"metadata": {"name": 3, "labels": {"a": 1}}, "spec": []}));
        assert_eq!(o.name, "");
        assert!(o.labels.is_empty());
        assert!(o.is_cluster_scoped());
        assert_eq!(o.created, None);
        let o = Op::from_json(json!(null));
        assert_eq!(o.status.phase, "");
    }

    #[test]
    fn sorts_by_namespace_subject_and_start() {
        let mut ops = vec![
            op(Some("b"), "VirtualMachine", "vm1", "Starting", "Active"),
            op(Some("a"), "VirtualMachine", "vm2", "Migrating", "Active"),
            op(None, "Node", "n1", "Draining", "Active"),
            op(Some("a"), "VirtualMachine", "vm1", "Migrating", "Active"),
        ];
        sort(&mut ops);
        let order: Vec<_> = ops.iter().map(|o| o.spec.subject.name.as_str()).collect();
        assert_eq!(order, ["n1", "vm1", "vm2", "vm1"]);
    }
}
