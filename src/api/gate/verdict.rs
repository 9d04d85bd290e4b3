//! A gate as served, computed on the spot from the operations the index holds in its scope and
//! from what the server knows of its own data. The verdict is judged below the API (see [`crate::gate`]), from one source for each fact;
//! this renders it: the `Clear` condition's status, reason and message, the `Stalled`
//! condition, the operations, the windows.

use std::sync::Arc;

use ifo_model::{
    CLEAR_CONDITION, GATE_KIND, GATE_STALLED_CONDITION, GROUP_VERSION, GateStatus, MaintenanceGate,
    StaleTarget,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde::Serialize;

pub(crate) use super::scheduled::Scheduled;
use super::window;
use crate::api::incomplete::causes;
use crate::detect::Stale;
use crate::gate::{Feeds, Judged, Verdict};
use crate::index::{GateEntry, GateMembers};
use crate::operation::InFlightOperation;

/// Operations a `False` verdict's message names before it says how many more there are.
pub(super) const NAMED_IN_MESSAGE: usize = 3;
/// Stale targets an `Unknown` verdict's message names.
const STALE_IN_MESSAGE: usize = 3;
/// Stalled operations a `Stalled=True` message names.
const STALLED_IN_MESSAGE: usize = 3;

/// A gate as the server serves it: its operations are the records themselves.
pub(crate) type Gate = MaintenanceGate<ServedOp>;

/// One of a gate's operations, serialised straight from its record as a
/// [`GateOperation`](ifo_model::GateOperation) (the
/// same JSON, checked by a test), and only once for as long as the record lasts (see
/// [`GateEntry`]): a list of a thousand gates lists each operation in several of them (the
/// cluster's, its node's, its component's, its namespace's), and copying their strings into
/// owned objects, then escaping them again for every gate, was most of the list's cost.
#[derive(Clone, Debug)]
pub(crate) struct ServedOp(pub Arc<GateEntry>);

/// The wire form of [`ServedOp`], borrowed from the record.
#[derive(Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
struct OpForm<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
    name: &'a str,
    kind: &'a str,
    subject: SubjectForm<'a>,
    operation: &'a str,
    component: &'a str,
    start_time: Time,
    #[serde(skip_serializing_if = "Option::is_none")]
    expected_end: Option<Time>,
    #[serde(skip_serializing_if = "Option::is_none")]
    progress: Option<f64>,
    stalled: bool,
}

#[derive(Serialize, PartialEq)]
struct SubjectForm<'a> {
    kind: &'a str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<&'a str>,
}

impl Serialize for ServedOp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0
            .rendered(|op| {
                serde_json::value::to_raw_value(&OpForm::of(op))
                    .expect("a gate's operation serialises")
            })
            .serialize(serializer)
    }
}

impl<'a> OpForm<'a> {
    fn of(op: &'a InFlightOperation) -> OpForm<'a> {
        OpForm {
            namespace: op.namespace.as_deref(),
            name: &op.name,
            kind: op.kind(),
            subject: SubjectForm {
                kind: &op.subject.kind,
                name: &op.subject.name,
                namespace: op.subject.namespace.as_deref(),
            },
            operation: &op.operation,
            component: &op.component,
            start_time: Time(round(op.created)),
            expected_end: op.clears_at().map(|t| Time(round(t))),
            progress: op.progress(),
            stalled: op.is_stalled(),
        }
    }
}

impl ServedOp {
    /// The owned form, as a client reads it: the served form, owned.
    #[cfg(test)]
    pub(crate) fn to_model(&self) -> ifo_model::GateOperation {
        let f = OpForm::of(&self.0);
        ifo_model::GateOperation {
            namespace: f.namespace.map(str::to_owned),
            name: f.name.to_owned(),
            kind: f.kind.to_owned(),
            subject: ifo_model::GateSubject {
                kind: f.subject.kind.to_owned(),
                name: f.subject.name.to_owned(),
                namespace: f.subject.namespace.map(str::to_owned),
            },
            operation: f.operation.to_owned(),
            component: f.component.to_owned(),
            start_time: Some(f.start_time),
            expected_end: f.expected_end,
            progress: f.progress,
            stalled: f.stalled,
        }
    }

    /// When it started, as served.
    pub(crate) fn start_time(&self) -> Timestamp {
        round(self.0.created)
    }
}

/// Equal when served the same (a new message is no change of a gate).
impl PartialEq for ServedOp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || OpForm::of(&self.0) == OpForm::of(&other.0)
    }
}

/// The gate of a judged scope, at its members' `rv`. `started`: when the server started, the
/// earliest a verdict can date from.
pub(crate) fn gate(judged: &Judged, started: Timestamp, scheduled: Scheduled) -> Gate {
    let Judged {
        verdict,
        members,
        feeds,
        ..
    } = judged;
    let name = members.scope.to_string();
    let message = match verdict {
        Verdict::Unknown(_) => stale_message(members, feeds),
        Verdict::InFlight => in_flight_message(members) + &released_note(members),
        Verdict::Clear => "nothing in flight".to_owned() + &released_note(members),
    };
    // Stale since the feeds last went stale; clear or not since the scope last filled or
    // emptied, or the feeds last came back, whichever is later.
    let changed = if matches!(verdict, Verdict::Unknown(_)) {
        members.feeds_since
    } else {
        members.since.max(members.feeds_since)
    }
    .unwrap_or(started);
    let clear = Condition {
        type_: CLEAR_CONDITION.to_owned(),
        status: verdict.status().to_owned(),
        reason: verdict.reason().to_owned(),
        message,
        last_transition_time: Time(round(changed)),
        observed_generation: None,
    };
    let stalled = stalled_condition(members, started);
    let (next_window, next_window_p50) = window::windows(
        &window::Since {
            verdict: *verdict,
            since: clear.last_transition_time.clone(),
        },
        members.active,
        &members.ends,
        &scheduled.listed,
    );
    MaintenanceGate {
        api_version: GROUP_VERSION.to_owned(),
        kind: GATE_KIND.to_owned(),
        metadata: ObjectMeta {
            uid: Some(uid(&name)),
            name: Some(name),
            resource_version: Some(members.rv.to_string()),
            ..ObjectMeta::default()
        },
        status: GateStatus {
            conditions: vec![clear, stalled],
            active_operations: members.active as u64,
            operations: members.operations.iter().cloned().map(ServedOp).collect(),
            expected_clear_time: members.expected_clear.map(|t| Time(round(t))),
            next_window: Some(next_window),
            next_window_p50: Some(next_window_p50),
            scheduled: scheduled.listed,
            scheduled_through: scheduled.through.map(|t| Time(round(t))),
            stale_targets: feeds
                .stale
                .iter()
                .map(|s| StaleTarget {
                    resource: s.resource(),
                    reason: s.reason.to_string(),
                })
                .collect(),
        },
    }
}

/// The gate of `members` with `feeds`, judged as [`crate::gate::Gates`] judges them (its scope
/// exists): for tests that set the facts themselves.
#[cfg(test)]
pub(crate) fn gate_of(
    members: &GateMembers,
    feeds: &Feeds,
    started: Timestamp,
    scheduled: Scheduled,
) -> Gate {
    let judged = Judged {
        verdict: crate::gate::judge(members.active, feeds),
        members: members.clone(),
        feeds: feeds.clone(),
        existence: crate::gate::Existence::Exists,
    };
    gate(&judged, started, scheduled)
}

/// Whole seconds, as Kubernetes writes `metav1.Time` (as the operations' times are written).
fn round(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// The same on every replica and across restarts: derived from the name.
fn uid(name: &str) -> String {
    let key = format!("{GROUP_VERSION}/{}/{name}", ifo_model::GATE_PLURAL);
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_URL, key.as_bytes()).to_string()
}

/// `Stalled`: `True` while an operation in the scope is stalled, naming the first few with
/// their reasons. Judged on the operations as last seen, whatever the feeds' state (`Clear`
/// says when that is stale).
fn stalled_condition(members: &GateMembers, started: Timestamp) -> Condition {
    let (status, reason, message) = if members.stalled == 0 {
        (
            "False",
            "NothingStalled",
            "no operation is stalled".to_owned(),
        )
    } else {
        let mut parts: Vec<String> = members
            .operations
            .iter()
            .filter_map(|op| Some((op, op.stall()?)))
            .take(STALLED_IN_MESSAGE)
            .map(|(op, stall)| {
                format!(
                    "{} {} {}: {}",
                    op.subject.kind,
                    op.subject.reference(),
                    op.operation,
                    stall.message
                )
            })
            .collect();
        if members.stalled > parts.len() {
            parts.push(format!("and {} more", members.stalled - parts.len()));
        }
        ("True", "OperationsStalled", parts.join(", "))
    };
    Condition {
        type_: GATE_STALLED_CONDITION.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time: Time(round(members.stall_since.unwrap_or(started))),
        observed_generation: None,
    }
}

/// `VirtualMachine demo/vm-0 Migrating (target), Pod ns/p Restarting, and 3 more`.
fn in_flight_message(members: &GateMembers) -> String {
    let mut parts: Vec<String> = members
        .operations
        .iter()
        .take(NAMED_IN_MESSAGE)
        .map(|op| {
            let subject = op.subject.reference();
            let target = if members.scope.is_target_of(op) {
                " (target)"
            } else {
                ""
            };
            format!("{} {subject} {}{target}", op.subject.kind, op.operation)
        })
        .collect();
    let named = parts.len();
    if members.active > named {
        parts.push(format!("and {} more", members.active - named));
    }
    parts.join(", ")
}

/// What a cordoned node's gate says of the operations that hold nothing there (see
/// [`GateMembers::released`]); nothing when there are none.
fn released_note(members: &GateMembers) -> String {
    match members.released {
        0 => String::new(),
        1 => " (1 operation started on the node after it was cordoned: it holds nothing there)"
            .to_owned(),
        n => format!(
            " ({n} operations started on the node after it was cordoned: they hold nothing there)"
        ),
    }
}

fn stale_message(members: &GateMembers, feeds: &Feeds) -> String {
    let mut reasons: Vec<String> = Vec::new();
    if !feeds.synced {
        reasons.push("the server has not finished its initial sync".to_owned());
    }
    reasons.extend(feeds.existence_unknown.iter().cloned());
    // One reason for many targets of one cause (as the `Warning`s tell them), then the others
    // one by one.
    let (told, grouped) = causes(&feeds.stale);
    reasons.extend(told);
    let rest: Vec<&Stale> = feeds
        .stale
        .iter()
        .zip(grouped)
        .filter_map(|(stale, grouped)| (!grouped).then_some(stale))
        .collect();
    reasons.extend(
        rest.iter()
            .take(STALE_IN_MESSAGE)
            .map(|s| format!("{} {}", s.resource(), s.reason)),
    );
    if rest.len() > STALE_IN_MESSAGE {
        reasons.push(format!(
            "{} more targets are not current",
            rest.len() - STALE_IN_MESSAGE
        ));
    }
    let message = format!("cannot vouch for this scope: {}", reasons.join("; "));
    if members.active == 0 {
        return message;
    }
    format!(
        "{message} (as last seen, {} in flight: {})",
        members.active,
        in_flight_message(members)
    )
}

#[cfg(test)]
mod tests;
