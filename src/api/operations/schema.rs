//! The OpenAPI definitions of the operations, what `kubectl explain` prints of them: the object
//! and list of each kind, and the spec, subject and status both kinds share.
//!
//! Field names must be exactly those `InFlightOperation::to_json` writes; the tests in
//! `openapi::tests` serialise real records and fail when either side gains a field the other
//! lacks.

use crate::api::openapi::schema::{PREFIX, list, meta, object, ours};
use crate::api::resource::Resource;
use crate::operation::{Outcome, Phase};
use serde_json::{Map, Value, json};
use strum::VariantArray as _;

/// What `kubectl explain` says of `InFlightOperation`.
pub(super) const NAMESPACED: &str = "InFlightOperation is an operation in flight on a namespaced Kubernetes object, its subject: a virtual machine migrating, an operator upgrading, a backup running. It is detected live by a rule of an OperationRuleSet (ifo.kubevirt.io) and lives in the subject's namespace. The live API serves these objects from memory; they are never stored in etcd and can only be read (get, list, watch). An operation stays Active while its rule matches the subject and becomes Completed when it stops matching, with status.outcome saying how it ended.";

/// What `kubectl explain` says of `InFlightClusterOperation`.
pub(super) const CLUSTER: &str = "InFlightClusterOperation is an operation in flight on a cluster-scoped Kubernetes object, its subject, such as a node being drained or a cluster operator upgrading. It is detected live by a rule of an OperationRuleSet (ifo.kubevirt.io) and has the same fields and lifecycle as InFlightOperation, without a namespace. The live API serves these objects from memory; they are never stored in etcd and can only be read (get, list, watch).";

const OBJECT_METADATA_DESCRIPTION: &str = "Standard object metadata. The name is derived from the subject's name, the operation and a short hash of the subject UID, rule set and operation, so it is the same on every replica and after a restart. The uid identifies this occurrence of the operation. creationTimestamp is when the operation started: the time the rule's startTime expression gives (for example the migration's start), or else when it was first detected. Labels under ifo.kubevirt.io/ describe the subject (subject-uid, subject-name, subject-namespace, subject-kind), the subject's first owner (owner-uid, owner-name, owner-kind, owner-group, owner-version), the operation, component and rule set; the rule set can add its own. ownerReferences points to the subject; it is informational only, as these objects are not stored and nothing garbage-collects them. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The definitions of the operations of `resource`, by name: its object and list, and what they
/// share with the other kind's.
pub(super) fn definitions(resource: &Resource) -> Map<String, Value> {
    let kind = resource.kind;
    let mut own = Map::new();
    own.insert(
        "spec".into(),
        json!({
            "$ref": ours("InFlightOperationSpec"),
            "description": "What was detected: the operation, the rule set that detected it and the subject it happens to.",
        }),
    );
    own.insert(
        "status".into(),
        json!({
            "$ref": ours("InFlightOperationStatus"),
            "description": "Where the operation stands: its phase, live message and, once completed, its outcome.",
        }),
    );
    let mut definitions = Map::new();
    definitions.insert(
        format!("{PREFIX}{kind}"),
        object(kind, resource.description, OBJECT_METADATA_DESCRIPTION, own),
    );
    definitions.insert(format!("{PREFIX}{kind}List"), list(kind));
    definitions.insert(format!("{PREFIX}InFlightOperationSpec"), spec());
    definitions.insert(format!("{PREFIX}InFlightOperationSubject"), subject());
    definitions.insert(format!("{PREFIX}InFlightOperationStatus"), status());
    definitions
}

fn spec() -> Value {
    json!({
        "description": "InFlightOperationSpec says what was detected. The operation, rule set and subject identity never change for one occurrence; component and the subject's owner references follow the latest observation.",
        "type": "object",
        "properties": {
            "operation": {
                "description": "Name of the operation, as the matching rule of the OperationRuleSet names it (for example Migrating, Starting, Upgrading). Selectable with --field-selector spec.operation=<name>.",
                "type": "string",
            },
            "ruleSet": {
                "description": "Name of the OperationRuleSet whose rule detected the operation. When two rule sets detect the same operation on one subject, each has its own object. Selectable with --field-selector spec.ruleSet=<name>.",
                "type": "string",
            },
            "component": {
                "description": "Component the operation belongs to, copied from the rule set's spec.component (for example kubevirt); empty when the rule set names none. Selectable with --field-selector spec.component=<name>.",
                "type": "string",
            },
            "subject": {
                "$ref": ours("InFlightOperationSubject"),
                "description": "The Kubernetes object the operation happens to.",
            },
        },
        "required": ["operation", "ruleSet", "component", "subject"],
    })
}

fn subject() -> Value {
    json!({
        "description": "InFlightOperationSubject identifies the Kubernetes object an operation happens to.",
        "type": "object",
        "properties": {
            "apiVersion": {
                "description": "API version of the subject, for example kubevirt.io/v1.",
                "type": "string",
            },
            "kind": {
                "description": "Kind of the subject, for example VirtualMachine. Selectable with --field-selector spec.subject.kind=<kind>.",
                "type": "string",
            },
            "name": {
                "description": "Name of the subject. Selectable with --field-selector spec.subject.name=<name>.",
                "type": "string",
            },
            "namespace": {
                "description": "Namespace of the subject, which is also the namespace of its InFlightOperations. Absent for cluster-scoped subjects, whose operations are InFlightClusterOperations. Selectable with --field-selector spec.subject.namespace=<namespace>.",
                "type": "string",
            },
            "uid": {
                "description": "UID of the subject. With the rule set and the operation name it identifies the operation, so a subject deleted and created again under the same name gets new operations.",
                "type": "string",
            },
            "ownerReferences": {
                "description": "The subject's owner references at its latest observation, copied in full (controller and blockOwnerDeletion included), to navigate from the operation to what owns the subject (for example from a VirtualMachineInstance to its VirtualMachine). Absent when the subject has no owners.",
                "type": "array",
                "items": {"$ref": meta("OwnerReference")},
                "x-kubernetes-list-type": "atomic",
            },
        },
        "required": ["apiVersion", "kind", "name", "uid"],
    })
}

fn status() -> Value {
    let phases: Vec<&str> = Phase::VARIANTS.iter().map(|p| p.as_str()).collect();
    let outcomes: Vec<&str> = Outcome::VARIANTS.iter().map(|o| o.as_str()).collect();
    json!({
        "description": "InFlightOperationStatus says where an operation stands.",
        "type": "object",
        "properties": {
            "phase": {
                "description": "Active while the rule matches the subject, and for a short grace period after it stops matching: if it matches again within the grace, it is the same occurrence going on. Completed once the grace has passed, or at once when the subject is deleted or the rule set removed; status.outcome then says how it ended. A completed operation is shown once and then deleted, unless the server is configured to retain completed operations for a while. Selectable with --field-selector status.phase=<phase>.\n\nPossible enum values:\n - `\"Active\"` the operation is in flight.\n - `\"Completed\"` the operation ended; see status.outcome.",
                "type": "string",
                "enum": phases,
            },
            "message": {
                "description": "Live, human-readable progress of the operation (the MESSAGE column), from the rule's message expression, evaluated again on every change of the subject while the operation is active (for example \"to node-9\" for a migration). Absent when the rule has no message expression or it gives an empty string; when the expression fails, the last message is kept.",
                "type": "string",
            },
            "outcome": {
                "description": "How the operation ended; absent while it is Active. Selectable with --field-selector status.outcome=<outcome>.\n\nPossible enum values:\n - `\"Succeeded\"`, `\"Failed\"`, `\"Canceled\"`, `\"Superseded\"` as the rule's outcome expression reported when the rule stopped matching; `\"Superseded\"` also when, in an exclusive rule set, the next operation started at the moment this one stopped matching and its expression did not say how it ended.\n - `\"SubjectDeleted\"` the subject was deleted while the operation was active.\n - `\"RuleSetRemoved\"` the rule set was deleted, became invalid or no longer has the rule.\n - `\"Unknown\"` the rule stopped matching and no outcome expression said how the operation ended.",
                "type": "string",
                "enum": outcomes,
            },
            "lastDetected": {
                "$ref": meta("Time"),
                "description": "When the rule last matched the subject and something shown in this object changed (message, labels, subject). Matches that change nothing do not move it. Once completed: the last time the rule matched.",
            },
            "completed": {
                "$ref": meta("Time"),
                "description": "When the operation ended: when its rule first stopped matching (not when the grace period ran out), or when the subject or the rule set went away. Absent while the operation is Active.",
            },
            "detectedBy": {
                "description": "Names of the OperationRuleSets that detected this occurrence: always the one in spec.ruleSet. A list for compatibility with the InFlightOperation schema of ifo.kubevirt.io.",
                "type": "array",
                "items": {"type": "string"},
                "x-kubernetes-list-type": "atomic",
            },
            "subjectGeneration": {
                "description": "metadata.generation of the subject at its latest observation; absent when the subject has no generation.",
                "type": "integer",
                "format": "int64",
            },
            "progress": {
                "description": "How far along the operation is, in percent (0 to 100), from the rule's progress expression, evaluated again on every change of the subject while the operation is active. Absent when the rule has no progress expression; when the expression fails or gives a value that is not a percentage, the last progress is kept and the error is shown on the rule set.",
                "type": "number",
                "format": "double",
            },
            "expectedEnd": {
                "$ref": meta("Time"),
                "description": "When the operation is expected to end, the same for every reader: while it is ending (no rule detects it any more), the end of its debounce grace; once the rule reports at least 10 % progress, the time elapsed extrapolated from it; else, once its rule has at least 5 operations that succeeded, its start plus the median of those durations that are longer than the time it has already run (so a long-running operation is not overdue by a median it has passed; until the median, the median). status.estimate says which. Absent while none is known, and once completed.",
            },
            "expectedEndP90": {
                "$ref": meta("Time"),
                "description": "The far edge of the expected end's band, when status.estimate is History: by when nine in ten of the rule's operations that succeeded and ran longer than this one has so far had ended (kubectl get shows both: ~2m (≤5m)). Absent otherwise.",
            },
            "estimate": {
                "description": "What status.expectedEnd is based on.\n\nPossible enum values:\n - `\"Grace\"` the end of the debounce grace of an operation no rule detects any more.\n - `\"History\"` start plus the median of the durations of the rule's operations that succeeded, among those longer than the time elapsed.\n - `\"Progress\"` the time elapsed, extrapolated by the progress the rule reports.",
                "type": "string",
                "enum": ["Grace", "History", "Progress"],
            },
            "gracePeriodEnd": {
                "$ref": meta("Time"),
                "description": "Set while the operation is ending: no rule detects it any more and it is Active only for the rest of its debounce grace. It turns Completed at this time unless a rule detects it again. For a maintenance verdict this is its expected end. Absent otherwise.",
            },
            "conditions": {
                "description": "Conditions of the operation, in the standard Kubernetes form. `Stalled` (status True) while the operation is stalled: reported by the rule's stalled expression (reason: the one the rule gives when it is a CamelCase word, else ReportedByRule with the rule's text as the message), or running longer than 1.5 times the 99th percentile of the durations of its rule's operations that succeeded (reason OverdueByHistory). While the operation is ending, Detected=False with reason GracePeriod: lastTransitionTime is when its rules stopped matching, the message says when it completes. Empty otherwise.",
                "type": "array",
                "items": {"$ref": meta("Condition")},
                "x-kubernetes-list-map-keys": ["type"],
                "x-kubernetes-list-type": "map",
            },
        },
        "required": ["phase"],
    })
}
