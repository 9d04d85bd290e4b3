//! The schemas of the served types, in OpenAPI v2 form (`#/definitions/...`), with the
//! descriptions `kubectl explain` prints.
//!
//! Field names must be exactly those `InFlightOperation::to_json` writes; the tests in
//! `super::tests` serialise real records and fail when either side gains a field the other lacks.
//!
//! The apimachinery types they reference (`ObjectMeta`, `ListMeta`, `Time`, `Condition`,
//! `OwnerReference`, `WatchEvent`, `APIResourceList` and what those use) are copied verbatim from
//! the OpenAPI document of Kubernetes v1.36.3 (`api/openapi-spec/swagger.json`) into
//! `apimachinery.json`: when the aggregator merges our document into the cluster's, definitions
//! identical to its own are shared instead of being renamed.

use crate::api::resource::{GROUP, VERSION};
use crate::operation::{Outcome, Phase};
use serde_json::{Map, Value, json};

/// The definition-name prefix of our types: the group reversed, as Kubernetes names them.
pub const PREFIX: &str = "io.kubevirt.ifo.live.v1alpha1.";
const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.";

const APIMACHINERY: &str = include_str!("apimachinery.json");

/// A `$ref` to a definition, in v2 form (`v3::convert` rewrites it).
pub fn reference(name: &str) -> String {
    format!("#/definitions/{name}")
}

fn ours(name: &str) -> String {
    reference(&format!("{PREFIX}{name}"))
}

fn meta(name: &str) -> String {
    reference(&format!("{META}{name}"))
}

/// An object whose properties are all strings, each with its description; `required` names
/// those that are always set.
fn strings(description: &str, properties: &[(&str, &str)], required: &[&str]) -> Value {
    let properties: Map<String, Value> = properties
        .iter()
        .map(|(name, description)| {
            let property = json!({"description": description, "type": "string"});
            (name.to_string(), property)
        })
        .collect();
    let mut schema =
        json!({"description": description, "type": "object", "properties": properties});
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema
}

/// `x-kubernetes-group-version-kind` of a definition (a list: one Go type may serve several).
pub fn group_version_kind(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

const OBJECT_METADATA_DESCRIPTION: &str = "Standard object metadata. The name is derived from the subject's name, the operation and a short hash of the subject UID, rule set and operation, so it is the same on every replica and after a restart. The uid identifies this occurrence of the operation. creationTimestamp is when the operation started: the time the rule's startTime expression gives (for example the migration's start), or else when it was first detected. Labels under ifo.kubevirt.io/ describe the subject (subject-uid, subject-name, subject-namespace, subject-kind), the subject's first owner (owner-uid, owner-name, owner-kind, owner-group, owner-version), the operation, component and rule set; the rule set can add its own. ownerReferences points to the subject; it is informational only, as these objects are not stored and nothing garbage-collects them. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// One served kind and its list.
struct Kind {
    kind: &'static str,
    description: &'static str,
}

const KINDS: [Kind; 2] = [
    Kind {
        kind: "InFlightOperation",
        description: "InFlightOperation is an operation in flight on a namespaced Kubernetes object, its subject: a virtual machine migrating, an operator upgrading, a backup running. It is detected live by a rule of an OperationRuleSet (ifo.kubevirt.io) and lives in the subject's namespace. The live API serves these objects from memory; they are never stored in etcd and can only be read (get, list, watch). An operation stays Active while its rule matches the subject and becomes Completed when it stops matching, with status.outcome saying how it ended.",
    },
    Kind {
        kind: "InFlightClusterOperation",
        description: "InFlightClusterOperation is an operation in flight on a cluster-scoped Kubernetes object, its subject, such as a node being drained or a cluster operator upgrading. It is detected live by a rule of an OperationRuleSet (ifo.kubevirt.io) and has the same fields and lifecycle as InFlightOperation, without a namespace. The live API serves these objects from memory; they are never stored in etcd and can only be read (get, list, watch).",
    },
];

fn object(kind: &Kind) -> Value {
    json!({
        "description": kind.description,
        "type": "object",
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": {"$ref": meta("ObjectMeta"), "description": OBJECT_METADATA_DESCRIPTION},
            "spec": {
                "$ref": ours("InFlightOperationSpec"),
                "description": "What was detected: the operation, the rule set that detected it and the subject it happens to.",
            },
            "status": {
                "$ref": ours("InFlightOperationStatus"),
                "description": "Where the operation stands: its phase, live message and, once completed, its outcome.",
            },
        },
        "x-kubernetes-group-version-kind": group_version_kind(GROUP, VERSION, kind.kind),
    })
}

fn list(kind: &Kind) -> Value {
    json!({
        "description": format!("{}List is a list of {}s.", kind.kind, kind.kind),
        "type": "object",
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": {
                "$ref": meta("ListMeta"),
                "description": "Standard list metadata. Its resourceVersion can be passed to a watch to receive every change after this list. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            },
            "items": {
                "description": format!("The {}s.", kind.kind),
                "type": "array",
                "items": {"$ref": ours(kind.kind)},
            },
        },
        "required": ["items"],
        "x-kubernetes-group-version-kind": group_version_kind(GROUP, VERSION, &format!("{}List", kind.kind)),
    })
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
    let phases = Phase::ALL.map(Phase::as_str);
    let outcomes = Outcome::ALL.map(Outcome::as_str);
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

/// The apimachinery definitions, as Kubernetes publishes them, except `WatchEvent`, which lists
/// the group versions whose watches it describes.
fn apimachinery() -> Map<String, Value> {
    let Ok(Value::Object(mut definitions)) = serde_json::from_str(APIMACHINERY) else {
        unreachable!("apimachinery.json is a JSON object (checked by the tests)");
    };
    if let Some(event) = definitions.get_mut(&format!("{META}WatchEvent")) {
        event["x-kubernetes-group-version-kind"] = json!([
            {"group": "", "kind": "WatchEvent", "version": "v1"},
            {"group": GROUP, "kind": "WatchEvent", "version": VERSION},
        ]);
    }
    definitions
}

/// Every definition the documents need, by name.
pub fn all() -> Map<String, Value> {
    let mut definitions = apimachinery();
    for kind in &KINDS {
        definitions.insert(format!("{PREFIX}{}", kind.kind), object(kind));
        definitions.insert(format!("{PREFIX}{}List", kind.kind), list(kind));
    }
    definitions.insert(format!("{PREFIX}InFlightOperationSpec"), spec());
    definitions.insert(format!("{PREFIX}InFlightOperationSubject"), subject());
    definitions.insert(format!("{PREFIX}InFlightOperationStatus"), status());
    definitions.extend(gate_definitions());
    definitions
}

const GATE_DESCRIPTION: &str = "MaintenanceGate is a verdict on whether disruptive work (draining or rebooting a node, upgrading a component, a backup window) is safe now in one scope, computed live from the operations in flight. Named cluster (every operation), node.<node> (operations whose ifo.kubevirt.io/node or ifo.kubevirt.io/target-node label names the node, so a migration into or out of it), component.<component> (operations of that component) or namespace.<namespace> (operations on subjects in that namespace). The gate of every node and namespace the cluster has, and of every component a ruleset declares, can be read, with nothing in flight too: `kubectl wait --for=condition=Clear=True maintenancegate/node.worker-1` waits until the node is clear. The gate of one the cluster does not have is NotFound (404) unless operations are in flight in it, and Unknown while the server cannot tell yet. A list holds the cluster gate and every gate with operations in flight, paged by limit and continue. Read-only; never stored.";

fn gate_definitions() -> Map<String, Value> {
    let gate = Kind {
        kind: "MaintenanceGate",
        description: GATE_DESCRIPTION,
    };
    let mut object = object(&gate);
    let properties = object["properties"]
        .as_object_mut()
        .expect("an object schema");
    properties.remove("spec");
    properties["metadata"]["description"] = json!(
        "Standard object metadata: the gate's name, a uid derived from it, and the resourceVersion of the latest change of its verdict. Gates have no generation."
    );
    properties["status"] = json!({
        "$ref": ours("MaintenanceGateStatus"),
        "description": "The verdict and what it rests on.",
    });
    let status = json!({
        "description": "MaintenanceGateStatus says whether the scope is clear of operations in flight, and if not, which and until when.",
        "type": "object",
        "properties": {
            "conditions": {
                "description": "Clear: True when nothing is in flight in the scope and every watched target feeding it is current (reason NothingInFlight); False when operations are in flight (reason OperationsInFlight, the message names the first few); Unknown when the server cannot vouch for the scope (reason Stale: a target feeding it is not being watched, or the server has not finished its initial sync; reason ExistenceUnknown: the server cannot tell yet whether the scope's node, namespace or component exists; the message says which). Unknown never satisfies a wait for True. Stalled: True when an operation in the scope is stalled (reason OperationsStalled, the message names the first few and why: what their rule reports, or OverdueByHistory for one running well past what its rule's operations normally take), else False (reason NothingStalled). Overridden, on a node's gate only while the node carries the annotation ifo.kubevirt.io/maintenance-override: True while the override lets every eviction of the node's pods through the maintenance guard whatever Clear says (reason OverrideSet without an end, OverrideSetUntil until the end ifo.kubevirt.io/maintenance-override-until gives, an RFC 3339 time or a duration after that annotation was written; the message gives the reason, since when and until when, and lastTransitionTime is since when it is set), False once its end has passed (reason OverrideEnded, lastTransitionTime its end) or when that end is neither a time nor a duration (reason InvalidOverrideEnd: the override is not in force). lastTransitionTime is when the verdict last changed.",
                "type": "array",
                "items": {"$ref": meta("Condition")},
                "x-kubernetes-list-map-keys": ["type"],
                "x-kubernetes-list-type": "map",
            },
            "activeOperations": {
                "description": "How many operations are in flight in the scope.",
                "type": "integer",
                "format": "int64",
            },
            "operations": {
                "description": "The operations in flight in the scope, oldest first, at most 50.",
                "type": "array",
                "items": {"$ref": ours("MaintenanceGateOperation")},
                "x-kubernetes-list-type": "atomic",
            },
            "expectedClearTime": {
                "$ref": meta("Time"),
                "description": "When the last operation in flight is expected to end: the latest of their expectedEnd. Absent when nothing is in flight or when any of them has no estimate.",
            },
            "staleTargets": {
                "description": "The watched targets feeding the scope whose data is not current, and why. Absent when every one is current.",
                "type": "array",
                "items": {"$ref": ours("MaintenanceGateStaleTarget")},
                "x-kubernetes-list-type": "atomic",
            },
        },
    });
    let operation = json!({
        "description": "MaintenanceGateOperation is one operation in flight in a gate's scope: the InFlightOperation (or InFlightClusterOperation) to read for details.",
        "type": "object",
        "properties": {
            "namespace": {"description": "Namespace of the InFlightOperation; absent for an InFlightClusterOperation.", "type": "string"},
            "name": {"description": "Name of the InFlightOperation or InFlightClusterOperation.", "type": "string"},
            "kind": {"description": "InFlightOperation or InFlightClusterOperation.", "type": "string"},
            "subject": strings(
                "The object the operation happens to.",
                &[
                    ("kind", "Kind of the subject."),
                    ("name", "Name of the subject."),
                    ("namespace", "Namespace of the subject; absent for cluster-scoped subjects."),
                ],
                &[],
            ),
            "operation": {"description": "The operation, as its rule names it.", "type": "string"},
            "component": {"description": "The component the operation belongs to.", "type": "string"},
            "startTime": {"$ref": meta("Time"), "description": "When the operation started."},
            "expectedEnd": {"$ref": meta("Time"), "description": "When the operation is expected to end: the end of its debounce grace when no rule detects it any more, else its status.expectedEnd. Absent without an estimate."},
            "progress": {"description": "How far along the operation is, in percent (0 to 100), when its rule reports it.", "type": "number", "format": "double"},
            "stalled": {"description": "Whether the operation is stalled (its Stalled condition is True).", "type": "boolean"},
        },
        "required": ["name", "kind", "subject", "operation", "component", "stalled"],
    });
    let stale = strings(
        "MaintenanceGateStaleTarget is a watched target feeding a gate's scope whose data is not current.",
        &[
            ("resource", "The target, as <resource>.<group>/<version>."),
            ("reason", "Why it is not current."),
        ],
        &["resource", "reason"],
    );
    let mut definitions = Map::new();
    definitions.insert(format!("{PREFIX}MaintenanceGate"), object);
    definitions.insert(format!("{PREFIX}MaintenanceGateList"), list(&gate));
    definitions.insert(format!("{PREFIX}MaintenanceGateStatus"), status);
    definitions.insert(format!("{PREFIX}MaintenanceGateOperation"), operation);
    definitions.insert(format!("{PREFIX}MaintenanceGateStaleTarget"), stale);
    definitions
}
