//! The OpenAPI definitions of the maintenance gates, what `kubectl explain` prints of them: the
//! object and its list, the status, and the operations, stale targets and windows it lists.

use crate::api::openapi::schema::{PREFIX, list, meta, object, ours, strings};
use crate::api::resource::Resource;
use serde_json::{Map, Value, json};

/// What `kubectl explain` says of `MaintenanceGate`.
pub(super) const DESCRIPTION: &str = "MaintenanceGate is a verdict on whether disruptive work (draining or rebooting a node, upgrading a component, a backup window) is safe now in one scope, computed live from the operations in flight. Named cluster (every operation), node.<node> (operations whose ifo.kubevirt.io/node or ifo.kubevirt.io/target-node label names the node, so a migration into or out of it), component.<component> (operations of that component) or namespace.<namespace> (operations on subjects in that namespace). The gate of every node and namespace the cluster has, and of every component a ruleset declares, can be read, with nothing in flight too: `kubectl wait --for=condition=Clear=True maintenancegate/node.worker-1` waits until the node is clear. The gate of one the cluster does not have is NotFound (404) unless operations are in flight in it, and Unknown while the server cannot tell yet. A list holds the cluster gate and every gate with operations in flight, paged by limit and continue. Read-only; never stored.";

/// A subject of a gate's operation, or an object that announces one: kind, name, namespace.
fn subject(description: &str) -> Value {
    strings(
        description,
        &[
            ("kind", "Its kind."),
            ("name", "Its name."),
            (
                "namespace",
                "Its namespace; absent for cluster-scoped objects.",
            ),
        ],
        &[],
    )
}

/// The definitions of the gates (`resource`), by name.
pub(super) fn definitions(resource: &Resource) -> Map<String, Value> {
    let kind = resource.kind;
    let mut own = Map::new();
    own.insert(
        "status".into(),
        json!({
            "$ref": ours("MaintenanceGateStatus"),
            "description": "The verdict and what it rests on.",
        }),
    );
    let object = object(
        kind,
        resource.description,
        "Standard object metadata: the gate's name, a uid derived from it, and the resourceVersion of the latest change of its verdict. Gates have no generation.",
        own,
    );
    let status = json!({
        "description": "MaintenanceGateStatus says whether the scope is clear of operations in flight, and if not, which and until when.",
        "type": "object",
        "properties": {
            "conditions": {
                "description": "Clear: True when nothing is in flight in the scope and every watched target feeding it is current (reason NothingInFlight); False when operations are in flight (reason OperationsInFlight, the message names the first few); Unknown when the server cannot vouch for the scope (reason Stale: a target feeding it is not being watched, or the server has not finished its initial sync; reason ExistenceUnknown: the server cannot tell yet whether the scope's node, namespace or component exists; the message says which). Unknown never satisfies a wait for True. Stalled: True when an operation in the scope is stalled (reason OperationsStalled, the message names the first few and why: what their rule reports, or OverdueByHistory for one running well past what its rule's operations normally take), else False (reason NothingStalled). Overridden, on a node's gate only while the node carries the annotation ifo.kubevirt.io/maintenance-override: True while the override lets every eviction of the node's pods through the maintenance guard whatever Clear says (reason OverrideSet without an end, OverrideSetUntil until the end ifo.kubevirt.io/maintenance-override-until gives, an RFC 3339 time; the message gives the reason, since when and until when, and lastTransitionTime is since when it is set), False once its end has passed (reason OverrideEnded, lastTransitionTime its end) or when that end is not an RFC 3339 time (reason InvalidOverrideEnd, a duration among them: the override is not in force). lastTransitionTime is when the verdict last changed.",
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
            "nextWindow": {
                "$ref": ours("MaintenanceGateWindow"),
                "description": "The earliest time from which the scope is expected to be clear, read off the p90 ends of the operations in flight (each one's expectedEndP90; the end of its grace while it is ending; its end extrapolated from its progress, which has no band) and of the scheduled operations that start before it opens (start plus their rule's p90 duration), and until when (the next scheduled start), or why no window can be promised. Operations no rule announces may start at any time.",
            },
            "nextWindowP50": {
                "$ref": ours("MaintenanceGateWindow"),
                "description": "The same read off their median ends (expectedEnd): half of such windows start later.",
            },
            "scheduled": {
                "description": "The operations announced in the scope before they start (a CronJob's next run, a Velero Schedule's next backup, a Forklift cutover), soonest first: every start up to scheduledThrough. Not in flight: they count in no verdict and the maintenance guard ignores them. A node's gate lists none: the node of a scheduled operation is not known before it starts.",
                "type": "array",
                "items": {"$ref": ours("MaintenanceGateScheduledOperation")},
                "x-kubernetes-list-type": "atomic",
            },
            "scheduledThrough": {
                "$ref": meta("Time"),
                "description": "Every scheduled start up to this time is listed: 24 hours ahead, or the last start listed when there are more than 50. Absent on a node's gate.",
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
            "subject": subject("The object the operation happens to."),
            "operation": {"description": "The operation, as its rule names it.", "type": "string"},
            "component": {"description": "The component the operation belongs to.", "type": "string"},
            "startTime": {"$ref": meta("Time"), "description": "When the operation started."},
            "expectedEnd": {"$ref": meta("Time"), "description": "When the operation is expected to end: the end of its debounce grace when no rule detects it any more, else its status.expectedEnd. Absent without an estimate."},
            "progress": {"description": "How far along the operation is, in percent (0 to 100), when its rule reports it.", "type": "number", "format": "double"},
            "stalled": {"description": "Whether the operation is stalled (its Stalled condition is True).", "type": "boolean"},
        },
        "required": ["name", "kind", "subject", "operation", "component", "stalled"],
    });
    let scheduled = json!({
        "description": "MaintenanceGateScheduledOperation is an operation a rule announces before it starts, from the object's cron schedule or a time it names.",
        "type": "object",
        "properties": {
            "subject": subject("The object that announces it (a CronJob)."),
            "operation": {"description": "The operation, as its rule names it.", "type": "string"},
            "component": {"description": "The component it belongs to.", "type": "string"},
            "ruleSet": {"description": "The OperationRuleSet whose rule announces it.", "type": "string"},
            "expectedStart": {"$ref": meta("Time"), "description": "When it is expected to start."},
            "expectedEnd": {"$ref": meta("Time"), "description": "Its start plus the median duration it is expected to take: its object's own runs once 6 of them succeeded (for a schedule whose durationsOf names another rule, the runs that rule counts toward the object by its durationsBy label), else its rule's operations (or those its durationsOf names); absent until 6 of them succeeded."},
            "expectedEndP90": {"$ref": meta("Time"), "description": "Its start plus their 90th percentile."},
            "schedule": {"description": "The cron schedule it comes from; absent when its object names a time.", "type": "string"},
            "timeZone": {"description": "The time zone the schedule is read in (UTC when the object names none).", "type": "string"},
            "message": {"description": "Why its next start is not known (its object's schedule cannot be read, or its rule's schedule failed on the object; expectedStart is then absent): no window can be promised in the scope meanwhile.", "type": "string"},
        },
        "required": ["subject", "operation", "component", "ruleSet"],
    });
    let stale = strings(
        "MaintenanceGateStaleTarget is a watched target feeding a gate's scope whose data is not current.",
        &[
            ("resource", "The target, as <resource>.<group>/<version>."),
            ("reason", "Why it is not current."),
        ],
        &["resource", "reason"],
    );
    let window = json!({
        "description": "MaintenanceGateWindow says from when a gate's scope is expected to be clear, at one confidence, or why that cannot be promised.",
        "type": "object",
        "properties": {
            "confidence": {"description": "p90: read off the operations' p90 ends; p50: off their median ends.", "type": "string"},
            "start": {"$ref": meta("Time"), "description": "When the window starts: since when the scope is clear (the Clear condition's lastTransitionTime) when nothing is in flight, else when the last operation in flight is expected to end, rounded up to the second; past a scheduled operation that starts before then, when that one is expected to end. Absent when no window can be promised."},
            "end": {"$ref": meta("Time"), "description": "When the window is expected to close: the start of the first scheduled operation after it. Absent when none is listed (up to scheduledThrough)."},
            "reason": {"description": "NothingInFlight, ExpectedEnds or AfterScheduled (with a start); ScopeUnknown (the Clear condition is Unknown: what is in flight is not known), NoExpectedEnd (an operation in flight has no expected end at this confidence, or a scheduled one that starts before the window opens has no learned duration), ScheduleUnknown (when a scheduled operation of the scope next starts is not known) or RunningLate (an operation runs past what its rule's operations take, overdue by history: nothing says when it ends), without one.", "type": "string"},
            "message": {"description": "In words, naming the operation the start, or its absence, comes from.", "type": "string"},
        },
        "required": ["confidence", "reason", "message"],
    });
    let mut definitions = Map::new();
    definitions.insert(format!("{PREFIX}{kind}"), object);
    definitions.insert(format!("{PREFIX}{kind}List"), list(kind));
    definitions.insert(format!("{PREFIX}MaintenanceGateStatus"), status);
    definitions.insert(format!("{PREFIX}MaintenanceGateOperation"), operation);
    definitions.insert(
        format!("{PREFIX}MaintenanceGateScheduledOperation"),
        scheduled,
    );
    definitions.insert(format!("{PREFIX}MaintenanceGateStaleTarget"), stale);
    definitions.insert(format!("{PREFIX}MaintenanceGateWindow"), window);
    definitions
}
