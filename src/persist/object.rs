//! The persisted copy of an operation: a cluster-scoped `ifo.kubevirt.io/v1alpha1`
//! `InFlightOperation` custom resource, in the schema of the InFlightOperations operator's CRD
//! (so its readers keep working), named like the live object, with its spec and status.
//!
//! What the live object has and the CRD has no field for travels in annotations: the live
//! uid and the exact start time, so that a restart restores the same occurrence. A label marks
//! the copies as ours; no other object is ever changed or deleted.

use std::collections::BTreeMap;
use std::sync::Arc;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde::{Deserialize, Serialize};

use super::Error;
use crate::operation::{InFlightOperation, Outcome, Phase, Subject};

/// The persisted kind's group.
pub(super) const GROUP: &str = "ifo.kubevirt.io";
/// The persisted kind's version.
pub(super) const VERSION: &str = "v1alpha1";
/// `apiVersion` of the copies.
const API_VERSION: &str = "ifo.kubevirt.io/v1alpha1";
/// The persisted kind.
pub(super) const KIND: &str = "InFlightOperation";
/// The persisted kind's resource.
pub(super) const PLURAL: &str = "inflightoperations";
/// The label that marks a copy as written by this server, and its value.
pub(super) const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "ifo-apiserver");
/// The field manager of every write.
pub(super) const FIELD_MANAGER: &str = "ifo-apiserver";
/// The live object's `metadata.uid` (the CR has a uid of its own).
pub(super) const UID_ANNOTATION: &str = "ifo.kubevirt.io/uid";
/// When the operation started, to the nanosecond (`creationTimestamp` is when the CR was
/// written, in whole seconds).
pub(super) const STARTED_ANNOTATION: &str = "ifo.kubevirt.io/started";

/// The persisted kind, for the dynamic client.
pub(super) fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(GROUP, VERSION, KIND), PLURAL)
}

/// `labelSelector` of our copies.
pub(super) fn selector() -> String {
    format!("{}={}", MANAGED_BY.0, MANAGED_BY.1)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Metadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_version: Option<&'a str>,
    labels: BTreeMap<&'a str, &'a str>,
    annotations: BTreeMap<&'static str, String>,
}

/// The copy of `op` to write; `resource_version` for a replace.
pub(super) fn to_object(op: &InFlightOperation, resource_version: Option<&str>) -> DynamicObject {
    let mut labels: BTreeMap<&str, &str> = op.labels.iter().collect();
    labels.insert(MANAGED_BY.0, MANAGED_BY.1);
    let body = op.wire_as(
        API_VERSION,
        KIND,
        Metadata {
            name: &op.name,
            resource_version,
            labels,
            annotations: BTreeMap::from([
                (UID_ANNOTATION, op.uid.clone()),
                (STARTED_ANNOTATION, op.created.to_string()),
            ]),
        },
    );
    serde_json::to_value(&body)
        .and_then(serde_json::from_value)
        .expect("the persisted form is a Kubernetes object")
}

/// Whether `object` is a copy this server wrote.
pub(super) fn is_ours(object: &DynamicObject) -> bool {
    object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(MANAGED_BY.0))
        .is_some_and(|v| v == MANAGED_BY.1)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecIn {
    operation: String,
    #[serde(default)]
    rule_set: String,
    #[serde(default)]
    component: String,
    subject: SubjectIn,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SubjectIn {
    api_version: String,
    kind: String,
    name: String,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    owner_references: Vec<OwnerReference>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusIn {
    phase: String,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    outcome: Option<String>,
    #[serde(default)]
    last_detected: Option<Timestamp>,
    #[serde(default)]
    completed: Option<Timestamp>,
    #[serde(default)]
    detected_by: Vec<String>,
    #[serde(default)]
    subject_generation: Option<i64>,
}

/// The live record a copy of ours holds, for a restart to continue from.
pub(super) fn from_object(object: &DynamicObject) -> Result<Arc<InFlightOperation>, Error> {
    let name = object.metadata.name.clone().unwrap_or_default();
    let invalid = |why: String| Error::InvalidCopy {
        name: name.clone(),
        why,
    };
    let annotation = |key: &str| {
        object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .ok_or_else(|| invalid(format!("no {key} annotation")))
    };
    let uid = annotation(UID_ANNOTATION)?.clone();
    let created: Timestamp = annotation(STARTED_ANNOTATION)?
        .parse()
        .map_err(|e| invalid(format!("{STARTED_ANNOTATION}: {e}")))?;
    let field = |key: &str| object.data.get(key).cloned().unwrap_or_default();
    let spec: SpecIn =
        serde_json::from_value(field("spec")).map_err(|e| invalid(format!("spec: {e}")))?;
    let status: StatusIn =
        serde_json::from_value(field("status")).map_err(|e| invalid(format!("status: {e}")))?;
    let phase = status
        .phase
        .parse::<Phase>()
        .map_err(|_| invalid(format!("unknown phase {:?}", status.phase)))?;
    let outcome = status
        .outcome
        .map(|o| {
            o.parse::<Outcome>()
                .map_err(|_| invalid(format!("unknown outcome {o:?}")))
        })
        .transpose()?;
    let labels = object
        .metadata
        .labels
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k != MANAGED_BY.0)
        .collect();
    let subject = Subject {
        api_version: spec.subject.api_version,
        kind: spec.subject.kind,
        name: spec.subject.name,
        namespace: spec.subject.namespace.filter(|ns| !ns.is_empty()),
        uid: spec.subject.uid,
        generation: status.subject_generation,
        owner_references: spec.subject.owner_references,
    };
    Ok(Arc::new(InFlightOperation {
        name,
        uid,
        namespace: subject.namespace.clone(),
        created,
        labels,
        subject,
        operation: spec.operation,
        ruleset: spec.rule_set,
        component: spec.component,
        phase,
        message: status.message,
        outcome,
        last_detected: status.last_detected.unwrap_or(created),
        completed: status.completed,
        subject_generation: status.subject_generation,
        detected_by: status.detected_by,
        // Evaluated again on the next event of the subject.
        progress: None,
        stalled: None,
        expectation: None,
        // A restored operation is judged again by its next evaluation.
        ending: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operation::test_record;

    #[test]
    fn the_copy_has_the_live_spec_and_status_and_reads_back_as_the_same_record() {
        let mut op = (*test_record("vm-1")).clone();
        op.created = "2026-11-22T10:00:00.123456789Z".parse().unwrap();
        op.last_detected = "2026-11-22T10:00:05Z".parse().unwrap();
        op.message = Some("copying".into());
        let copy = to_object(&op, Some("42"));
        let json = serde_json::to_value(&copy).unwrap();
        let live = op.to_json(7);
        assert_eq!(json["apiVersion"], "ifo.kubevirt.io/v1alpha1");
        assert_eq!(json["kind"], "InFlightOperation");
        assert_eq!(json["metadata"]["name"], live["metadata"]["name"]);
        assert_eq!(json["metadata"]["resourceVersion"], "42");
        assert!(
            json["metadata"].get("namespace").is_none(),
            "cluster-scoped"
        );
        assert_eq!(json["spec"], live["spec"]);
        assert_eq!(json["status"], live["status"]);
        for (k, v) in live["metadata"]["labels"].as_object().unwrap() {
            assert_eq!(&json["metadata"]["labels"][k], v, "label {k}");
        }
        assert_eq!(
            json["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "ifo-apiserver"
        );
        assert!(is_ours(&copy));
        assert_eq!(*from_object(&copy).unwrap(), op);
    }

    /// What the CRD of `deploy/persist/` accepts: every status field a copy carries is in its
    /// schema, with a value its enum allows (the server writes with `fieldValidation` unset:
    /// an unknown field would be dropped, a value out of an enum refused).
    #[test]
    fn every_status_field_a_copy_carries_fits_the_persisted_crd() {
        let crd: serde_json::Value =
            serde_saphyr::from_str(include_str!("../../deploy/persist/crd.yaml")).unwrap();
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"];
        let mut op = (*test_record("vm-1")).clone();
        op.progress = Some(50.0);
        let at: jiff::Timestamp = "2026-11-22T10:05:00Z".parse().unwrap();
        let mut copies = Vec::new();
        for basis in [
            crate::operation::EstimateBasis::History,
            crate::operation::EstimateBasis::Progress,
            crate::operation::EstimateBasis::Grace,
        ] {
            op.expectation = Some(crate::operation::Expectation {
                end: at,
                basis,
                p90_end: Some(at),
                overdue: None,
            });
            op.ending = (basis == crate::operation::EstimateBasis::Grace).then_some(
                crate::operation::Ending {
                    since: op.last_detected,
                    at,
                },
            );
            copies.push(serde_json::to_value(to_object(&op, None)).unwrap());
        }
        op.phase = Phase::Completed;
        op.outcome = Some(Outcome::Superseded);
        op.expectation = None;
        copies.push(serde_json::to_value(to_object(&op, None)).unwrap());
        for copy in copies {
            for (field, value) in copy["status"].as_object().unwrap() {
                let declared = &schema[field];
                assert!(
                    declared.is_object(),
                    "status.{field} is not in the CRD: {copy:#}"
                );
                if let Some(allowed) = declared["enum"].as_array() {
                    assert!(
                        allowed.contains(value),
                        "status.{field}: {value} not in {allowed:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_completed_copy_reads_back_completed() {
        let mut op = (*test_record("vm-1")).clone();
        op.phase = Phase::Completed;
        op.outcome = Some(Outcome::Failed);
        op.completed = Some("2026-11-22T10:01:00Z".parse().unwrap());
        assert_eq!(*from_object(&to_object(&op, None)).unwrap(), op);
    }

    #[test]
    fn copies_of_others_and_broken_copies_are_told_apart() {
        let mut copy = to_object(&test_record("vm-1"), None);
        copy.metadata.labels.as_mut().unwrap().remove(MANAGED_BY.0);
        assert!(!is_ours(&copy));
        copy.metadata.annotations = None;
        let err = from_object(&copy).unwrap_err().to_string();
        assert!(err.contains("ifo.kubevirt.io/uid"), "{err}");
        let mut copy = to_object(&test_record("vm-1"), None);
        copy.data["status"]["phase"] = "Running".into();
        let err = from_object(&copy).unwrap_err().to_string();
        assert!(err.contains("Running"), "{err}");
    }
}
