//! The maintenance gate, `MaintenanceGate`: a verdict per scope (the cluster, a node, a
//! component, a namespace) on whether operations are in flight there, as owned serde types for
//! the server that computes it and the plugin that reads it.
//!
//! Deserialising is lenient (see [`crate::lenient`]), as the operations' is: an odd field reads
//! as its default rather than failing the whole object.

use crate::ConditionStatus;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use strum::{Display, EnumString, IntoStaticStr};

use crate::lenient::lenient_struct;

/// Kind of the gate.
pub const GATE_KIND: &str = "MaintenanceGate";
/// Its resource.
pub const GATE_PLURAL: &str = "maintenancegates";
/// The condition that says whether the scope is clear: `True` nothing in flight and every feed
/// current, `False` operations in flight, `Unknown` when the server cannot vouch for the scope.
pub const CLEAR_CONDITION: &str = "Clear";
/// The condition that says whether an operation in the scope is stalled (its rule reports it,
/// or it runs well past what its rule's operations normally take).
pub const GATE_STALLED_CONDITION: &str = "Stalled";
/// The condition of a node's gate that says the maintenance guard is overridden there: `True`
/// while the node's override lets every eviction through whatever `Clear` says, `False` once
/// its end has passed. Absent while the node has no override.
pub const GATE_OVERRIDDEN_CONDITION: &str = "Overridden";

lenient_struct! {
    /// One gate. `Op` is how its operations are held: [`GateOperation`] as read from the wire; the
    /// server serialises them straight from its records instead (the same JSON).
    pub struct MaintenanceGate<Op = GateOperation> {
        /// [`GROUP_VERSION`](crate::GROUP_VERSION).
        pub api_version: String,
        /// [`GATE_KIND`].
        pub kind: String,
        /// Name (`cluster`, `node.<node>`, `component.<c>`, `namespace.<ns>`), uid,
        /// resourceVersion. No generation: nothing writes a gate.
        pub metadata: ObjectMeta,
        /// The verdict.
        pub status: GateStatus<Op>,
    }
}

lenient_struct! {
    /// `status`: the verdict and what it rests on.
    pub struct GateStatus<Op = GateOperation> {
        /// [`CLEAR_CONDITION`].
        pub conditions: Vec<Condition>,
        /// How many operations are in flight in the scope.
        pub active_operations: u64,
        /// The oldest of them, oldest first, at most 50.
        pub operations: Vec<Op>,
        /// When the last of them is expected to end; absent when one has no estimate.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expected_clear_time: Option<Time>,
        /// The earliest time from which the scope is expected to stay clear, read off the p90
        /// ends of the operations in flight, or why none can be promised.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub next_window: Option<GateWindow>,
        /// The same read off their median ends (`status.expectedEnd`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub next_window_p50: Option<GateWindow>,
        /// The operations announced in the scope before they start (a CronJob's next run),
        /// soonest first: every start up to `scheduledThrough`. Not in flight: they count in
        /// no verdict.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub scheduled: Vec<GateScheduled>,
        /// Every scheduled start up to this time is listed (24 hours ahead, or the last one
        /// listed when there are more than 50).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub scheduled_through: Option<Time>,
        /// The watched targets feeding the scope that are not current.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        pub stale_targets: Vec<StaleTarget>,
    }
}

/// What a gate says of its scope, as its `Clear` condition's status carries it: the one reading
/// of that status for the server that writes it and the clients that read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `True`: nothing in flight, and the server vouches for the scope.
    Clear,
    /// `False`: operations in flight.
    InFlight,
    /// `Unknown` (or no verdict at all): the server cannot vouch for the scope.
    Unknown,
}

impl Verdict {
    /// The `Clear` condition's status that says it.
    pub fn status(self) -> &'static str {
        match self {
            Verdict::Clear => ConditionStatus::True,
            Verdict::InFlight => ConditionStatus::False,
            Verdict::Unknown => ConditionStatus::Unknown,
        }
        .as_str()
    }

    /// What a `Clear` condition's `status` says; anything but `True` and `False` is unknown.
    pub fn of_status(status: &str) -> Verdict {
        match ConditionStatus::of(status) {
            ConditionStatus::True => Verdict::Clear,
            ConditionStatus::False => Verdict::InFlight,
            ConditionStatus::Unknown => Verdict::Unknown,
        }
    }
}

impl<Op> GateStatus<Op> {
    /// The `Clear` condition.
    pub fn clear(&self) -> Option<&Condition> {
        self.condition(CLEAR_CONDITION)
    }

    /// What the `Clear` condition says (unknown without one).
    pub fn verdict(&self) -> Verdict {
        self.clear()
            .map_or(Verdict::Unknown, |c| Verdict::of_status(&c.status))
    }

    /// The condition of type `type_`.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// [`GateWindow::reason`]: why the window starts when it does, or why none can be promised.
/// Served as the variant's name; a reader keeps a name a later server adds as a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, IntoStaticStr, EnumString, Display)]
pub enum WindowReason {
    /// Nothing is in flight; the window is open since the scope last cleared.
    NothingInFlight,
    /// The window starts when the last operation in flight is expected to end.
    ExpectedEnds,
    /// The window starts when scheduled operations are expected to end (those in flight end
    /// before).
    AfterScheduled,
    /// When a scheduled operation of the scope next starts is not known.
    ScheduleUnknown,
    /// No window while the scope is `Unknown`.
    ScopeUnknown,
    /// An operation in flight has no expected end.
    NoExpectedEnd,
    /// An operation in flight runs past what its rule's operations take (overdue by history):
    /// nothing says when it ends.
    RunningLate,
    /// The window asked for would reach past the end of the scheduled operations the gate
    /// lists (`scheduledThrough`): what starts after it is not known, so it is not promised
    /// (`kubectl ifo plan`'s answer; a gate's own window ends where its list ends).
    NotListed,
}

impl WindowReason {
    /// The name served in `reason`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

lenient_struct! {
    /// When the scope is expected to be clear from, at one confidence: `start` when a window
    /// can be promised, else why not; `end` when a scheduled operation is expected to close
    /// it. Operations that no rule announces may start at any time.
    pub struct GateWindow {
        /// `p90` (the operations' p90 ends) or `p50` (their median ends).
        pub confidence: String,
        /// When the window starts; absent when none can be promised.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub start: Option<Time>,
        /// When it is expected to close: the start of the first scheduled operation after it;
        /// absent when none is listed (see `scheduledThrough`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub end: Option<Time>,
        /// A [`WindowReason`]: `NothingInFlight`, `ExpectedEnds`, `AfterScheduled` (with a
        /// start), `ScheduleUnknown`, `ScopeUnknown`, `NoExpectedEnd`, `RunningLate` (without).
        pub reason: String,
        /// In words, naming the operation the start (or its absence) comes from.
        pub message: String,
    }
}

lenient_struct! {
    /// One operation in flight in a gate's scope.
    pub struct GateOperation {
        /// Namespace of the `InFlightOperation`; absent for an `InFlightClusterOperation`.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub namespace: Option<String>,
        /// Its name.
        pub name: String,
        /// `InFlightOperation` or `InFlightClusterOperation`.
        pub kind: String,
        /// What it happens to.
        pub subject: GateSubject,
        /// The operation (`Migrating`).
        pub operation: String,
        /// Its component.
        pub component: String,
        /// When it started.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub start_time: Option<Time>,
        /// When it is expected to end: the end of its debounce grace when no rule detects it any
        /// more, else its `status.expectedEnd`; absent without an estimate.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expected_end: Option<Time>,
        /// How far along it is, percent (its `status.progress`).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub progress: Option<f64>,
        /// Whether it is stalled (its `Stalled` condition is `True`).
        pub stalled: bool,
    }
}

lenient_struct! {
    /// An operation announced in a gate's scope before it starts.
    pub struct GateScheduled {
        /// The object that announces it (a CronJob).
        pub subject: GateSubject,
        /// The operation (`Running`).
        pub operation: String,
        /// Its component.
        pub component: String,
        /// The ruleset whose rule announces it.
        pub rule_set: String,
        /// When it is expected to start; absent when that is not known (`message` says why).
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expected_start: Option<Time>,
        /// Its start plus the median duration of its rule's operations; absent until the rule
        /// learned enough of them.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expected_end: Option<Time>,
        /// Its start plus their 90th percentile.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub expected_end_p90: Option<Time>,
        /// The cron schedule it comes from (`0 2 * * *`); absent when its object names a time.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub schedule: Option<String>,
        /// The time zone the schedule is read in.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub time_zone: Option<String>,
        /// Why its next start is not known (its object's schedule cannot be read, or its rule's
        /// schedule failed on the object): no window can be promised in the scope meanwhile.
        #[serde(skip_serializing_if = "String::is_empty")]
        pub message: String,
    }
}

impl GateScheduled {
    /// When it is expected to start, when that is known.
    pub fn start(&self) -> Option<jiff::Timestamp> {
        self.expected_start.as_ref().map(|t| t.0)
    }

    /// Its expected end at `confidence` (`p90`, else the median).
    pub fn end_at(&self, p90: bool) -> Option<&Time> {
        if p90 {
            self.expected_end_p90.as_ref()
        } else {
            self.expected_end.as_ref()
        }
    }
}

lenient_struct! {
    /// The subject of a gate's operation.
    pub struct GateSubject {
        /// Its kind.
        pub kind: String,
        /// Its name.
        pub name: String,
        /// Its namespace; absent for cluster-scoped subjects.
        #[serde(skip_serializing_if = "Option::is_none")]
        pub namespace: Option<String>,
    }
}

impl GateSubject {
    /// `namespace/name`, or `name` alone when cluster-scoped.
    pub fn reference(&self) -> String {
        crate::reference(self.namespace.as_deref(), &self.name)
    }
}

lenient_struct! {
    /// A watched target that feeds a gate's scope and is not current.
    pub struct StaleTarget {
        /// `<resource>.<group>/<version>` (`virtualmachines.kubevirt.io/v1`).
        pub resource: String,
        /// Why it is not current.
        pub reason: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_served_gate_round_trips_and_odd_fields_read_as_defaults() {
        let served = json!({
            "apiVersion": "live.ifo.kubevirt.io/v1alpha1",
            "kind": "MaintenanceGate",
            "metadata": {"name": "node.w1", "resourceVersion": "7"},
            "status": {
                "conditions": [{"type": "Clear", "status": "False", "reason": "OperationsInFlight",
                                "message": "VirtualMachine demo/vm-0 Migrating",
                                "lastTransitionTime": "2026-11-22T10:00:00Z"}],
                "activeOperations": 1,
                "operations": [{"namespace": "demo", "name": "vm-0-migrating-1", "kind": "InFlightOperation",
                                "subject": {"kind": "VirtualMachine", "name": "vm-0", "namespace": "demo"},
                                "operation": "Migrating", "component": "kubevirt",
                                "startTime": "2026-11-22T10:00:00Z",
                                "expectedEnd": "2026-11-22T10:04:00Z", "progress": 45.5,
                                "stalled": false}],
                "expectedClearTime": "2026-11-22T10:04:00Z",
                "nextWindow": {"confidence": "p90", "start": "2026-11-22T10:06:00Z",
                               "reason": "ExpectedEnds", "message": "m"},
                "nextWindowP50": {"confidence": "p50", "reason": "RunningLate", "message": "m"},
            },
        });
        let gate: MaintenanceGate = serde_json::from_value(served.clone()).unwrap();
        assert_eq!(gate.status.clear().unwrap().status, "False");
        let window = gate.status.next_window.as_ref().unwrap();
        assert_eq!(
            (window.reason.parse(), window.start.is_some()),
            (Ok(WindowReason::ExpectedEnds), true)
        );
        assert_eq!(serde_json::to_value(&gate).unwrap(), served);
        let odd: MaintenanceGate =
            serde_json::from_value(json!({"status": {"activeOperations": "x", "conditions": 3}}))
                .unwrap();
        assert_eq!(odd.status, GateStatus::default());
    }
}
