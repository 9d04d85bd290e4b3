//! The record's API object, as borrowed structs serialised straight to JSON: no intermediate
//! `serde_json::Value` (whose maps cost hundreds of bytes each), so a new resourceVersion is
//! written out in one pass.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde::Serialize;

use super::label_set::Labels;
use super::progress::EstimateBasis;
use super::record::{API_VERSION, Ending, InFlightOperation};
use super::time::format_time;

/// An object with this record's `spec` and `status`: the live object (`M` = [`Metadata`]), or
/// another form of it with metadata of its own (the persisted copy).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Object<'a, M = Metadata<'a>> {
    api_version: &'static str,
    kind: &'static str,
    metadata: M,
    spec: Spec<'a>,
    status: Status<'a>,
}

/// The owner reference to the subject is informational only (no `controller`, no
/// `blockOwnerDeletion`): the record is not stored in etcd, so nothing garbage-collects it, but
/// it lets tools navigate from the operation to its subject.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    uid: &'a str,
    resource_version: String,
    creation_timestamp: String,
    labels: &'a Labels,
    owner_references: [OwnerRef<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OwnerRef<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: &'a str,
}

/// `spec`: the same in the live object and in its persisted copy.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec<'a> {
    operation: &'a str,
    rule_set: &'a str,
    component: &'a str,
    subject: SubjectRef<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubjectRef<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    uid: &'a str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    owner_references: &'a [OwnerReference],
}

/// `status`: the same in the live object and in its persisted copy.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    phase: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    last_detected: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed: Option<String>,
    detected_by: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    subject_generation: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_end: Option<String>,
    /// By when nine in ten operations like it have ended (history only).
    #[serde(rename = "expectedEndP90", skip_serializing_if = "Option::is_none")]
    expected_end_p90: Option<String>,
    /// What `expected_end` is based on: `History` or `Progress`.
    #[serde(skip_serializing_if = "Option::is_none")]
    estimate: Option<&'static str>,
    /// While the operation is ending (see [`Ending`]): when its grace runs out.
    #[serde(skip_serializing_if = "Option::is_none")]
    grace_period_end: Option<String>,
    /// `Stalled` (status `True`) while the operation is stalled and `Detected=False` while it
    /// is ending, else empty. Always present so clients written for the CRD form find the
    /// field.
    conditions: Vec<Condition<'a>>,
}

/// A `metav1.Condition`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Condition<'a> {
    #[serde(rename = "type")]
    type_: &'static str,
    status: &'static str,
    reason: &'a str,
    message: Cow<'a, str>,
    last_transition_time: String,
}

impl Condition<'_> {
    /// No rule detects the operation since `ending.since`; it completes at `ending.at`.
    fn not_detected(ending: &Ending) -> Condition<'static> {
        let since = format_time(ending.since);
        let at = format_time(ending.at);
        Condition {
            type_: "Detected",
            status: "False",
            reason: "GracePeriod",
            message: Cow::Owned(format!(
                "no rule has detected it since {since}; it completes at {at} unless detected again"
            )),
            last_transition_time: since,
        }
    }
}

impl InFlightOperation {
    /// The API object's `metadata` at `resource_version`.
    pub fn wire_metadata(&self, resource_version: u64) -> Metadata<'_> {
        Metadata {
            name: &self.name,
            namespace: self.namespace.as_deref(),
            uid: &self.uid,
            resource_version: resource_version.to_string(),
            creation_timestamp: format_time(self.created),
            labels: &self.labels,
            owner_references: [OwnerRef {
                api_version: &self.subject.api_version,
                kind: &self.subject.kind,
                name: &self.subject.name,
                uid: &self.subject.uid,
            }],
        }
    }

    /// The full API object at `resource_version`.
    pub fn wire(&self, resource_version: u64) -> Object<'_> {
        let mut status = self.wire_status();
        if let Some(ending) = &self.ending {
            status.grace_period_end = Some(format_time(ending.at));
            status.conditions.push(Condition::not_detected(ending));
        }
        Object {
            api_version: API_VERSION,
            kind: self.kind(),
            metadata: self.wire_metadata(resource_version),
            spec: self.wire_spec(),
            status,
        }
    }

    /// This record's `spec` and `status` as an object of another `apiVersion` and `kind`: the
    /// persisted copy, whose schema (the operator's CRD) has neither a grace period end, nor
    /// conditions of this shape, nor an estimate's band or `Grace` basis, so it is written
    /// without them. An ending operation's copy keeps no expected end: the grace is the live
    /// API's, and a copy written again only for it would cost every operation one more write.
    pub fn wire_as<M>(
        &self,
        api_version: &'static str,
        kind: &'static str,
        metadata: M,
    ) -> Object<'_, M> {
        let mut status = self.wire_status();
        status.expected_end_p90 = None;
        if status.estimate == Some(EstimateBasis::Grace.as_str()) {
            status.estimate = None;
            status.expected_end = None;
        }
        Object {
            api_version,
            kind,
            metadata,
            spec: self.wire_spec(),
            status,
        }
    }

    /// The object's `spec`.
    fn wire_spec(&self) -> Spec<'_> {
        Spec {
            operation: &self.operation,
            rule_set: &self.ruleset,
            component: &self.component,
            subject: SubjectRef {
                api_version: &self.subject.api_version,
                kind: &self.subject.kind,
                name: &self.subject.name,
                namespace: self.subject.namespace.as_deref(),
                uid: &self.subject.uid,
                owner_references: &self.subject.owner_references,
            },
        }
    }

    /// The object's `status`.
    fn wire_status(&self) -> Status<'_> {
        Status {
            phase: self.phase.as_str(),
            message: self.message.as_deref(),
            outcome: self.outcome.map(|o| o.as_str()),
            last_detected: format_time(self.last_detected),
            completed: self.completed.map(format_time),
            detected_by: &self.detected_by,
            subject_generation: self.subject_generation,
            progress: self.progress(),
            expected_end: self.expected_end().map(format_time),
            expected_end_p90: self
                .expectation
                .as_ref()
                .and_then(|e| e.p90_end)
                .map(format_time),
            estimate: self.expectation.as_ref().map(|e| e.basis.as_str()),
            grace_period_end: None,
            conditions: Vec::from_iter(self.stall().map(|stall| Condition {
                type_: "Stalled",
                status: "True",
                reason: &stall.reason,
                message: Cow::Borrowed(&stall.message),
                last_transition_time: format_time(stall.since),
            })),
        }
    }
}
