//! An InFlightOperation (or InFlightClusterOperation) as the plugin reads it: the fields it
//! prints, taken leniently from the API object (a missing or odd field is empty, never an error),
//! and the object itself for `-o json|yaml`.

use std::collections::BTreeMap;

use jiff::Timestamp;
use serde_json::Value;

pub use ifo_model::{
    APISERVICE, CLUSTER_KIND, CLUSTER_PLURAL, GROUP, NAMESPACED_KIND, NAMESPACED_PLURAL, VERSION,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub kind: String,
    pub name: String,
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubjectRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub namespace: Option<String>,
    pub uid: String,
    pub owners: Vec<OwnerRef>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`; `None` for an InFlightClusterOperation.
    pub namespace: Option<String>,
    /// `metadata.creationTimestamp`: when the operation started.
    pub created: Option<Timestamp>,
    pub labels: BTreeMap<String, String>,
    pub operation: String,
    pub ruleset: String,
    pub component: String,
    pub subject: SubjectRef,
    pub phase: String,
    pub message: String,
    pub outcome: String,
    pub last_detected: Option<Timestamp>,
    pub completed: Option<Timestamp>,
    pub detected_by: Vec<String>,
    pub subject_generation: Option<i64>,
    /// The API object as served.
    pub raw: Value,
}

fn text(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for key in path {
        cur = &cur[*key];
    }
    cur.as_str().unwrap_or_default().to_owned()
}

fn time(v: &Value, path: &[&str]) -> Option<Timestamp> {
    let s = text(v, path);
    s.parse().ok()
}

fn non_empty(s: String) -> Option<String> {
    (!s.is_empty()).then_some(s)
}

impl Op {
    pub fn from_json(raw: Value) -> Op {
        let labels = raw["metadata"]["labels"]
            .as_object()
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        let s = &raw["spec"]["subject"];
        let owners = s["ownerReferences"]
            .as_array()
            .map(|refs| {
                refs.iter()
                    .map(|r| OwnerRef {
                        kind: text(r, &["kind"]),
                        name: text(r, &["name"]),
                        uid: text(r, &["uid"]),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let subject = SubjectRef {
            api_version: text(s, &["apiVersion"]),
            kind: text(s, &["kind"]),
            name: text(s, &["name"]),
            namespace: non_empty(text(s, &["namespace"])),
            uid: text(s, &["uid"]),
            owners,
        };
        let detected_by = raw["status"]["detectedBy"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Op {
            name: text(&raw, &["metadata", "name"]),
            namespace: non_empty(text(&raw, &["metadata", "namespace"])),
            created: time(&raw, &["metadata", "creationTimestamp"]),
            labels,
            operation: text(&raw, &["spec", "operation"]),
            ruleset: text(&raw, &["spec", "ruleSet"]),
            component: text(&raw, &["spec", "component"]),
            subject,
            phase: text(&raw, &["status", "phase"]),
            message: text(&raw, &["status", "message"]),
            outcome: text(&raw, &["status", "outcome"]),
            last_detected: time(&raw, &["status", "lastDetected"]),
            completed: time(&raw, &["status", "completed"]),
            detected_by,
            subject_generation: raw["status"]["subjectGeneration"].as_i64(),
            raw,
        }
    }

    pub fn is_cluster_scoped(&self) -> bool {
        self.namespace.is_none()
    }

    pub fn kind(&self) -> &'static str {
        if self.is_cluster_scoped() {
            CLUSTER_KIND
        } else {
            NAMESPACED_KIND
        }
    }

    pub fn is_active(&self) -> bool {
        self.phase == "Active"
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
        format!("{}/{}", self.subject.kind, self.subject.name)
    }
}

/// The order lists are printed in: namespace (cluster-scoped first), subject kind and name,
/// then the oldest operation first.
pub fn sort(ops: &mut [Op]) {
    ops.sort_by(|a, b| {
        (
            &a.namespace,
            &a.subject.kind,
            &a.subject.name,
            a.created,
            &a.operation,
            &a.name,
        )
            .cmp(&(
                &b.namespace,
                &b.subject.kind,
                &b.subject.name,
                b.created,
                &b.operation,
                &b.name,
            ))
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A served object with the given fields (tests of every module build on it).
    pub fn op(ns: Option<&str>, kind: &str, subject: &str, operation: &str, phase: &str) -> Op {
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
        assert_eq!(o.subject.kind, "VirtualMachine");
        assert_eq!(o.subject.namespace.as_deref(), Some("ns1"));
        assert_eq!(o.created, Some("2026-01-01T10:00:00Z".parse().unwrap()));
        assert_eq!(o.detected_by, ["rs"]);
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
        assert_eq!(o.phase, "");
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
        let order: Vec<_> = ops.iter().map(|o| o.subject.name.as_str()).collect();
        assert_eq!(order, ["n1", "vm1", "vm2", "vm1"]);
    }
}
