//! The served object, `InFlightOperation` or `InFlightClusterOperation`, as owned serde types.
//!
//! Serialising one gives exactly the JSON the server serves (same fields, same omissions), so
//! the server's wire form can be checked against it. Deserialising is lenient (see
//! [`crate::lenient`]): a field that is missing, `null` or of another shape reads as its
//! default instead of failing the whole object.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};

use crate::lenient::lenient_struct;

lenient_struct! {
    /// One operation in flight (or recently completed) on one subject.
    ///
    /// The same type stands for both kinds: `kind` is [`NAMESPACED_KIND`](crate::NAMESPACED_KIND)
    /// when `metadata.namespace` is set and [`CLUSTER_KIND`](crate::CLUSTER_KIND) when it is not,
    /// and the two share every field.
    pub struct InFlightOperation {
        /// [`GROUP_VERSION`](crate::GROUP_VERSION) when served.
        pub api_version: String,
        /// [`NAMESPACED_KIND`](crate::NAMESPACED_KIND) or [`CLUSTER_KIND`](crate::CLUSTER_KIND).
        pub kind: String,
        /// Name, namespace (the subject's), uid, resourceVersion, creationTimestamp (when the
        /// operation started), labels, and one owner reference to the subject. A metadata object
        /// that does not parse as a whole reads as empty: its fields are Kubernetes' own type.
        pub metadata: ObjectMeta,
        /// What is happening and to what: fixed for the life of the operation.
        pub spec: Spec,
        /// Where the operation is: changes while it runs.
        pub status: Status,
    }
}

lenient_struct! {
    /// `spec`: which rule of which ruleset detected which operation on which subject.
    pub struct Spec {
        /// The operation's name in its ruleset (`Migrating`, `Draining`, …).
        pub operation: String,
        /// The OperationRuleSet that detected it.
        pub rule_set: String,
        /// The component the ruleset speaks for (`kubevirt`, `node`, …), for grouping.
        pub component: String,
        /// The object the operation happens to.
        pub subject: SubjectRef,
    }
}

lenient_struct! {
    /// `spec.subject`: enough of the subject to find it again, and its owners so that tools can
    /// walk up from a Pod or VirtualMachineInstance to what the user manages.
    pub struct SubjectRef {
        /// The subject's `apiVersion`.
        pub api_version: String,
        /// The subject's `kind`.
        pub kind: String,
        /// The subject's `metadata.name`.
        pub name: String,
        /// The subject's namespace; absent for cluster-scoped subjects.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub namespace: Option<String>,
        /// The subject's `metadata.uid`: tells a recreated subject of the same name apart.
        pub uid: String,
        /// The subject's own owner references, as the subject had them; absent when it has none.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub owner_references: Vec<OwnerReference>,
    }
}

lenient_struct! {
    /// `status`: the phase, and once completed, how and when it ended.
    ///
    /// `phase` and `outcome` are strings, not enums, so that a reader built against this version
    /// still shows a phase or outcome a later server adds.
    pub struct Status {
        /// `Active` or `Completed`.
        pub phase: String,
        /// What the rule's message expression said last; absent when it said nothing.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub message: Option<String>,
        /// How a completed operation ended (`Succeeded`, `Failed`, `SubjectDeleted`, …); absent
        /// while active.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub outcome: Option<String>,
        /// When the rule last matched (whole seconds, UTC). The server always sets it; it is an
        /// option so that an object without it still reads.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub last_detected: Option<Time>,
        /// When the operation completed; absent while active.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub completed: Option<Time>,
        /// The rulesets that detect this operation.
        pub detected_by: Vec<String>,
        /// The subject's `metadata.generation` when last seen; absent for subjects without one.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub subject_generation: Option<i64>,
        /// How far along the operation is, in percent (0 to 100), when its rule reports it.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub progress: Option<f64>,
        /// When the operation is expected to end, from what its rule's operations took before (or
        /// the progress it reports); absent until known.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expected_end: Option<Time>,
        /// By when nine in ten operations like it have ended, given how long it has run (from
        /// history only): the band's far edge.
        #[serde(rename = "expectedEndP90", skip_serializing_if = "Option::is_none")]
        pub expected_end_p90: Option<Time>,
        /// What `expectedEnd` is based on: `History` or `Progress`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub estimate: Option<String>,
        /// While the operation is ending (no rule detects it any more, the debounce grace runs):
        /// when it turns `Completed` unless a rule detects it again. Absent otherwise.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub grace_period_end: Option<Time>,
        /// `Stalled` (status `True`) while the operation is stalled, with the reason, and
        /// `Detected=False` (reason `GracePeriod`) while it is ending; empty otherwise.
        pub conditions: Vec<Condition>,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// An object as the server serves it, with every optional field present.
    fn served() -> Value {
        json!({
            "apiVersion": "live.ifo.kubevirt.io/v1alpha1",
            "kind": "InFlightOperation",
            "metadata": {
                "name": "vm1-migrating-abcd", "namespace": "ns1", "uid": "u-1",
                "resourceVersion": "12", "creationTimestamp": "2026-11-22T10:30:00Z",
                "labels": {"ifo.kubevirt.io/operation": "Migrating"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1",
                                     "kind": "VirtualMachineInstance", "name": "vm1",
                                     "uid": "s-1"}],
            },
            "spec": {
                "operation": "Migrating", "ruleSet": "kubevirt", "component": "kubevirt",
                "subject": {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                            "name": "vm1", "namespace": "ns1", "uid": "s-1",
                            "ownerReferences": [{"apiVersion": "kubevirt.io/v1",
                                                 "kind": "VirtualMachine", "name": "vm1",
                                                 "uid": "o-1", "controller": true,
                                                 "blockOwnerDeletion": true}]},
            },
            "status": {
                "phase": "Completed", "message": "done", "outcome": "Succeeded",
                "lastDetected": "2026-11-22T10:31:00Z", "completed": "2026-11-22T10:32:00Z",
                "detectedBy": ["kubevirt"], "subjectGeneration": 4, "conditions": [],
            },
        })
    }

    #[test]
    fn a_served_object_round_trips() {
        let op: InFlightOperation = serde_json::from_value(served()).unwrap();
        assert_eq!(op.spec.rule_set, "kubevirt");
        assert_eq!(op.spec.subject.owner_references[0].uid, "o-1");
        assert_eq!(
            op.status.completed.as_ref().map(|t| t.0),
            Some("2026-11-22T10:32:00Z".parse().unwrap())
        );
        assert_eq!(serde_json::to_value(&op).unwrap(), served());
    }

    #[test]
    fn absent_fields_stay_absent() {
        let mut v = served();
        v["metadata"].as_object_mut().unwrap().remove("namespace");
        v["kind"] = json!("InFlightClusterOperation");
        let subject = v["spec"]["subject"].as_object_mut().unwrap();
        subject.remove("namespace");
        subject.remove("ownerReferences");
        let status = v["status"].as_object_mut().unwrap();
        for key in ["message", "outcome", "completed", "subjectGeneration"] {
            status.remove(key);
        }
        status["phase"] = json!("Active");
        let op: InFlightOperation = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(op.spec.subject.namespace, None);
        assert_eq!(op.status.outcome, None);
        assert_eq!(serde_json::to_value(&op).unwrap(), v);
    }

    #[test]
    fn odd_fields_read_as_defaults() {
        let mut v = served();
        v["spec"]["operation"] = json!(3);
        v["spec"]["subject"] = json!([]);
        v["status"]["lastDetected"] = json!("yesterday");
        v["status"]["subjectGeneration"] = json!("four");
        v["status"]["detectedBy"] = json!(null);
        let op: InFlightOperation = serde_json::from_value(v).unwrap();
        assert_eq!(op.spec.operation, "");
        assert_eq!(op.spec.rule_set, "kubevirt");
        assert_eq!(op.spec.subject, SubjectRef::default());
        assert_eq!(op.status.last_detected, None);
        assert_eq!(op.status.subject_generation, None);
        assert!(op.status.detected_by.is_empty());
        assert_eq!(op.status.phase, "Completed");

        let op: InFlightOperation =
            serde_json::from_value(json!({"metadata": {"name": 3}, "spec": null})).unwrap();
        assert_eq!(op.metadata, ObjectMeta::default());
        assert_eq!(op.spec, Spec::default());
        let op: InFlightOperation = serde_json::from_value(json!({})).unwrap();
        assert_eq!(op, InFlightOperation::default());
    }
}
