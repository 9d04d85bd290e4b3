//! A gate's verdict, computed on the spot from the operations the index holds in its scope and
//! from what the server knows of its own data: the feeds' freshness and the initial sync.
//!
//! There is one source for each fact: the index's scope members for what is in flight,
//! [`HealthReader`] for whether the targets feeding a scope are current (the same facts as the
//! `Warning` header of every read), [`Readiness`] for the initial sync, and whether the scope's
//! node, namespace or component exists (see [`super::existence`]). A gate never says clear on
//! data the server cannot vouch for.

use std::sync::Arc;

use ifo_model::{
    CLEAR_CONDITION, GATE_KIND, GATE_STALLED_CONDITION, GROUP_VERSION, GateOperation, GateStatus,
    GateSubject, MaintenanceGate, StaleTarget, group_by_cause,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use serde::Serialize;

use crate::api::freshness::{cause_text, target_name};
use crate::detect::{HealthReader, Stale};
use crate::index::{GateEntry, GateMembers, GateScope};
use crate::operation::InFlightOperation;
use crate::readiness::Readiness;

/// Operations a `False` verdict's message names before it says how many more there are.
pub(super) const NAMED_IN_MESSAGE: usize = 3;
/// Stale targets an `Unknown` verdict's message names.
const STALE_IN_MESSAGE: usize = 3;
/// Stalled operations a `Stalled=True` message names.
const STALLED_IN_MESSAGE: usize = 3;

/// A gate as the server serves it: its operations are the records themselves.
pub type Gate = MaintenanceGate<ServedOp>;

/// One of a gate's operations, serialised straight from its record as a [`GateOperation`] (the
/// same JSON, checked by a test), and only once for as long as the record lasts (see
/// [`GateEntry`]): a list of a thousand gates lists each operation in several of them (the
/// cluster's, its node's, its component's, its namespace's), and copying their strings into
/// owned objects, then escaping them again for every gate, was most of the list's cost.
#[derive(Clone, Debug)]
pub struct ServedOp(pub Arc<GateEntry>);

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
    pub fn to_model(&self) -> GateOperation {
        let f = OpForm::of(&self.0);
        GateOperation {
            namespace: f.namespace.map(str::to_owned),
            name: f.name.to_owned(),
            kind: f.kind.to_owned(),
            subject: GateSubject {
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
    pub fn start_time(&self) -> Timestamp {
        round(self.0.created)
    }
}

/// Equal when served the same (a new message is no change of a gate).
impl PartialEq for ServedOp {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || OpForm::of(&self.0) == OpForm::of(&other.0)
    }
}

/// What the server knows of its own data, for one scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Feeds {
    /// The initial sync is done.
    pub synced: bool,
    /// The targets feeding the scope that are not current.
    pub stale: Vec<Stale>,
    /// Why the server cannot tell whether the scope exists (it has not listed the cluster's
    /// nodes or namespaces yet, or their watch fails); `None` when it can.
    pub existence_unknown: Option<String>,
}

/// What the server knew of its feeds before a verdict's operations were read from the index.
///
/// The writers publish what a list brought before they say its target is current, so operations
/// read while a target was not yet current may be half of its list even if the target is current
/// by the time the verdict is judged: what went current in between counts as stale for that
/// verdict (for every scope, as which scopes a target feeds is known only of its present state).
/// The index's next `FeedsChanged` event brings the verdict up to date.
pub struct FeedsBefore {
    synced: bool,
    stale: Vec<Stale>,
}

/// What went current while the operations were read (see [`FeedsBefore`]).
pub struct Meanwhile {
    synced: bool,
    recovered: Vec<Stale>,
}

impl FeedsBefore {
    pub fn read(targets: &HealthReader, readiness: &Readiness) -> FeedsBefore {
        FeedsBefore {
            synced: readiness.is_synced(),
            stale: targets.stale(None),
        }
    }

    /// Once the operations are read.
    pub fn meanwhile(self, targets: &HealthReader) -> Meanwhile {
        // A target still stale, for whatever reason now, did not go current: a reason that
        // changes while it stays blind (one failed list, then another) is not a recovery.
        let recovered = if self.stale.is_empty() {
            Vec::new()
        } else {
            let now = targets.stale(None);
            self.stale
                .into_iter()
                .filter(|s| !now.iter().any(|n| n.target == s.target))
                .collect()
        };
        Meanwhile {
            synced: self.synced,
            recovered,
        }
    }
}

impl Feeds {
    /// The facts for `scope`: it depends on the targets whose rulesets can put operations in
    /// it (see [`HealthReader::stale_for_gate`]), and on what went current while its
    /// operations were read.
    pub fn of(
        scope: &GateScope,
        targets: &HealthReader,
        readiness: &Readiness,
        meanwhile: &Meanwhile,
    ) -> Feeds {
        let mut stale = targets.stale_for_gate(scope);
        stale.extend(
            meanwhile
                .recovered
                .iter()
                .filter(|s| !stale.contains(s))
                .cloned()
                .collect::<Vec<_>>(),
        );
        Feeds {
            synced: meanwhile.synced && readiness.is_synced(),
            stale,
            existence_unknown: None,
        }
    }

    fn is_current(&self) -> bool {
        self.synced && self.stale.is_empty() && self.existence_unknown.is_none()
    }
}

/// The gate of `members`'s scope, at `members.rv`. `started`: when the server started, the
/// earliest a verdict can date from.
pub fn gate(members: &GateMembers, feeds: &Feeds, started: Timestamp) -> Gate {
    let name = members.scope.to_string();
    let (status, reason, message) = if !feeds.is_current() {
        let reason = if feeds.synced && feeds.stale.is_empty() {
            // Only whether the scope exists is not known.
            "ExistenceUnknown"
        } else {
            "Stale"
        };
        ("Unknown", reason, stale_message(members, feeds))
    } else if members.active > 0 {
        ("False", "OperationsInFlight", in_flight_message(members))
    } else {
        ("True", "NothingInFlight", "nothing in flight".to_owned())
    };
    // Stale since the feeds last went stale; clear or not since the scope last filled or
    // emptied, or the feeds last came back, whichever is later.
    let changed = if status == "Unknown" {
        members.feeds_since
    } else {
        members.since.max(members.feeds_since)
    }
    .unwrap_or(started);
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
            conditions: vec![
                Condition {
                    type_: CLEAR_CONDITION.to_owned(),
                    status: status.to_owned(),
                    reason: reason.to_owned(),
                    message,
                    last_transition_time: Time(round(changed)),
                    observed_generation: None,
                },
                stalled_condition(members, started),
            ],
            active_operations: members.active as u64,
            operations: members.operations.iter().cloned().map(ServedOp).collect(),
            expected_clear_time: members.expected_clear.map(|t| Time(round(t))),
            stale_targets: feeds
                .stale
                .iter()
                .map(|s| StaleTarget {
                    resource: target_name(s),
                    reason: s.reason.to_string(),
                })
                .collect(),
        },
    }
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
                    subject_name(op),
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

/// `ns/name`, or `name` for a cluster-scoped subject.
fn subject_name(op: &InFlightOperation) -> String {
    match &op.subject.namespace {
        Some(ns) => format!("{ns}/{}", op.subject.name),
        None => op.subject.name.clone(),
    }
}

/// `VirtualMachine demo/vm-0 Migrating (target), Pod ns/p Restarting, and 3 more`.
fn in_flight_message(members: &GateMembers) -> String {
    let mut parts: Vec<String> = members
        .operations
        .iter()
        .take(NAMED_IN_MESSAGE)
        .map(|op| {
            let subject = subject_name(op);
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

fn stale_message(members: &GateMembers, feeds: &Feeds) -> String {
    let mut reasons: Vec<String> = Vec::new();
    if !feeds.synced {
        reasons.push("the server has not finished its initial sync".to_owned());
    }
    reasons.extend(feeds.existence_unknown.iter().cloned());
    // One reason for many targets of one cause (as the `Warning`s tell them), then the others
    // one by one.
    let named: Vec<(String, String)> = feeds
        .stale
        .iter()
        .map(|s| (target_name(s), s.reason.to_string()))
        .collect();
    let pairs: Vec<(&str, &str)> = named
        .iter()
        .map(|(n, r)| (n.as_str(), r.as_str()))
        .collect();
    let (groups, grouped) = group_by_cause(&pairs);
    reasons.extend(groups.iter().map(|group| cause_text(group, &pairs)));
    let rest: Vec<&(&str, &str)> = pairs
        .iter()
        .zip(grouped)
        .filter_map(|(pair, grouped)| (!grouped).then_some(pair))
        .collect();
    reasons.extend(
        rest.iter()
            .take(STALE_IN_MESSAGE)
            .map(|(name, reason)| format!("{name} {reason}")),
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
mod tests {
    use super::*;
    use crate::detect::Blind;
    use crate::ruleset::Target;

    fn members(scope: GateScope, ops: Vec<Arc<InFlightOperation>>) -> GateMembers {
        GateMembers {
            scope,
            rv: 7,
            since: Some("2026-11-22T10:00:00.5Z".parse().unwrap()),
            active: ops.len(),
            operations: ops
                .into_iter()
                .map(|o| Arc::new(GateEntry::new(o)))
                .collect(),
            expected_clear: None,
            stalled: 0,
            stall_since: None,
            feeds_since: None,
        }
    }

    fn migrating(subject: &str, node: &str, target: &str) -> Arc<InFlightOperation> {
        let mut op = (*crate::operation::test_record(subject)).clone();
        op.subject.kind = "VirtualMachine".into();
        op.operation = "Migrating".into();
        op.labels.insert("ifo.kubevirt.io/node", node);
        op.labels.insert("ifo.kubevirt.io/target-node", target);
        Arc::new(op)
    }

    fn current() -> Feeds {
        Feeds {
            synced: true,
            stale: Vec::new(),
            existence_unknown: None,
        }
    }

    fn clear(g: &Gate) -> (&str, &str, &str) {
        let c = g.status.clear().unwrap();
        (&c.status, &c.reason, &c.message)
    }

    #[test]
    fn nothing_in_flight_and_current_is_clear() {
        let started = "2026-11-22T09:00:00Z".parse().unwrap();
        let g = gate(
            &members(GateScope::Node("w1".into()), vec![]),
            &current(),
            started,
        );
        assert_eq!(clear(&g), ("True", "NothingInFlight", "nothing in flight"));
        assert_eq!(g.metadata.name.as_deref(), Some("node.w1"));
        assert_eq!(g.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(
            g.metadata.generation, None,
            "kubectl wait's generation guard"
        );
        let c = g.status.clear().unwrap();
        assert_eq!(c.last_transition_time.0.to_string(), "2026-11-22T10:00:00Z");
        assert_eq!(c.observed_generation, None);
        let mut never = members(GateScope::Cluster, vec![]);
        never.since = None;
        let g = gate(&never, &current(), started);
        assert_eq!(g.status.clear().unwrap().last_transition_time.0, started);
    }

    #[test]
    fn operations_in_flight_are_named_with_their_role() {
        let ops = (0..5)
            .map(|i| migrating(&format!("vm-{i}"), if i == 0 { "w2" } else { "w1" }, "w1"))
            .collect();
        let g = gate(
            &members(GateScope::Node("w1".into()), ops),
            &current(),
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            clear(&g),
            (
                "False",
                "OperationsInFlight",
                "VirtualMachine ns/vm-0 Migrating (target), VirtualMachine ns/vm-1 Migrating, VirtualMachine ns/vm-2 Migrating, and 2 more"
            )
        );
        assert_eq!(g.status.active_operations, 5);
        assert_eq!(g.status.operations[0].to_model().subject.name, "vm-0");
        assert_eq!(g.status.operations[0].to_model().kind, "InFlightOperation");
    }

    #[test]
    fn stalled_operations_are_named_with_their_reason_and_the_clear_time_is_served() {
        let mut ops: Vec<Arc<InFlightOperation>> = (0..5)
            .map(|i| migrating(&format!("vm-{i}"), "w1", ""))
            .collect();
        let now: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
        for op in &mut ops[1..] {
            let mut o = (**op).clone();
            o.stalled = Some(crate::operation::Stall::reported("ImportFailed", now));
            o.progress = Some(45.0);
            *op = Arc::new(o);
        }
        let mut m = members(GateScope::Node("w1".into()), ops);
        m.stalled = 4;
        m.stall_since = Some(now);
        m.expected_clear = Some("2026-11-22T10:04:00.7Z".parse().unwrap());
        let g = gate(&m, &current(), Timestamp::UNIX_EPOCH);
        let stalled = g.status.condition("Stalled").unwrap();
        assert_eq!(
            (
                stalled.status.as_str(),
                stalled.reason.as_str(),
                stalled.message.as_str()
            ),
            (
                "True",
                "OperationsStalled",
                "VirtualMachine ns/vm-1 Migrating: ImportFailed, VirtualMachine ns/vm-2 Migrating: ImportFailed, VirtualMachine ns/vm-3 Migrating: ImportFailed, and 1 more"
            )
        );
        assert_eq!(stalled.last_transition_time.0, now);
        assert_eq!(
            g.status.expected_clear_time.unwrap().0.to_string(),
            "2026-11-22T10:04:00Z"
        );
        assert!(
            !g.status.operations[0].to_model().stalled && g.status.operations[1].to_model().stalled
        );
        assert_eq!(g.status.operations[1].to_model().progress, Some(45.0));
        let calm = gate(
            &members(GateScope::Cluster, vec![]),
            &current(),
            Timestamp::UNIX_EPOCH,
        );
        let stalled = calm.status.condition("Stalled").unwrap();
        assert_eq!(
            (stalled.status.as_str(), stalled.reason.as_str()),
            ("False", "NothingStalled")
        );
        assert_eq!(calm.status.expected_clear_time, None);
    }

    /// Many targets the server may not list are one reason in the message, with who and the
    /// remedy, as in the `Warning`s; a target stale for another reason is still named.
    #[test]
    fn a_gates_message_tells_many_targets_of_one_cause_once() {
        let stale = |resource: &str, why: &str| Stale {
            target: Target {
                group: "example.io".into(),
                version: "v1".into(),
                resource: resource.into(),
            },
            reason: Blind::NotWatched(why.into()),
        };
        let forbidden = "list failed: things is forbidden: User \"system:serviceaccount:ifo:ifo\" \
                         cannot list resource";
        let feeds = Feeds {
            synced: true,
            stale: ["a", "b", "c", "d", "e"]
                .into_iter()
                .map(|r| stale(r, forbidden))
                .chain([stale("z", "watch stalled")])
                .collect(),
            existence_unknown: None,
        };
        let g = gate(
            &members(GateScope::Cluster, vec![]),
            &feeds,
            Timestamp::UNIX_EPOCH,
        );
        let (status, reason, message) = clear(&g);
        assert_eq!((status, reason), ("Unknown", "Stale"));
        assert_eq!(
            message,
            "cannot vouch for this scope: 5 resource types are not being watched: \
             system:serviceaccount:ifo:ifo is forbidden to list them (a.example.io/v1, \
             b.example.io/v1, c.example.io/v1 and 2 more); grant it read access to every target \
             of the rulesets (deploy/rbac/rule-targets.yaml, or `ifo-apiserver rules rbac` for \
             rulesets of your own); z.example.io/v1 is not being watched: watch stalled"
        );
        assert_eq!(g.status.stale_targets.len(), 6, "each still listed");
    }

    #[test]
    fn stale_feeds_or_no_sync_are_unknown_never_clear() {
        let stale = Feeds {
            synced: true,
            stale: vec![Stale {
                target: Target {
                    group: "kubevirt.io".into(),
                    version: "v1".into(),
                    resource: "virtualmachines".into(),
                },
                reason: Blind::NotWatched("list failed: forbidden".into()),
            }],
            existence_unknown: None,
        };
        let g = gate(
            &members(GateScope::Cluster, vec![]),
            &stale,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            clear(&g),
            (
                "Unknown",
                "Stale",
                "cannot vouch for this scope: virtualmachines.kubevirt.io/v1 is not being watched: list failed: forbidden"
            )
        );
        assert_eq!(
            g.status.stale_targets[0].resource,
            "virtualmachines.kubevirt.io/v1"
        );
        let unsynced = Feeds {
            synced: false,
            stale: vec![],
            existence_unknown: None,
        };
        let ops = vec![migrating("vm-0", "w1", "")];
        let g = gate(
            &members(GateScope::Node("w1".into()), ops),
            &unsynced,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(
            clear(&g),
            (
                "Unknown",
                "Stale",
                "cannot vouch for this scope: the server has not finished its initial sync (as last seen, 1 in flight: VirtualMachine ns/vm-0 Migrating)"
            )
        );
    }

    #[test]
    fn a_scope_whose_existence_is_not_known_is_unknown_never_clear() {
        let why =
            "whether node w1 exists is not known: the cluster's nodes have not been listed yet";
        let feeds = Feeds {
            existence_unknown: Some(why.to_owned()),
            ..current()
        };
        let idle = |feeds: &Feeds| {
            gate(
                &members(GateScope::Node("w1".into()), vec![]),
                feeds,
                Timestamp::UNIX_EPOCH,
            )
        };
        assert_eq!(
            clear(&idle(&feeds)),
            (
                "Unknown",
                "ExistenceUnknown",
                &*format!("cannot vouch for this scope: {why}")
            )
        );
        // With the initial sync not done too: Stale, both said.
        let feeds = Feeds {
            synced: false,
            ..feeds
        };
        assert_eq!(
            clear(&idle(&feeds)),
            (
                "Unknown",
                "Stale",
                &*format!(
                    "cannot vouch for this scope: the server has not finished its initial sync; {why}"
                )
            )
        );
    }

    #[test]
    fn a_target_that_went_current_while_the_operations_were_read_is_still_stale_for_them() {
        let health = Arc::new(crate::detect::Health::default());
        let t = Target {
            group: "kubevirt.io".into(),
            version: "v1".into(),
            resource: "virtualmachines".into(),
        };
        health.watching(&t, None);
        health.resolved(&t, true, &[None]);
        let targets = health.reader();
        let (readiness, pending) = Readiness::new("the list of OperationRuleSets");
        pending.done();
        let scope = GateScope::Node("w1".into());
        // Read before the operations: the first list is not done. Then it is, before the
        // verdict is judged: the operations read may be half of that list.
        let before = FeedsBefore::read(&targets, &readiness);
        health.listed(&t, &None, Timestamp::UNIX_EPOCH);
        let meanwhile = before.meanwhile(&targets);
        let feeds = Feeds::of(&scope, &targets, &readiness, &meanwhile);
        assert_eq!(feeds.stale.len(), 1, "{feeds:?}");
        let g = gate(
            &members(scope.clone(), vec![]),
            &feeds,
            Timestamp::UNIX_EPOCH,
        );
        assert_eq!(clear(&g).0, "Unknown");
        // Read entirely after: current.
        let before = FeedsBefore::read(&targets, &readiness);
        let meanwhile = before.meanwhile(&targets);
        assert_eq!(
            Feeds::of(&scope, &targets, &readiness, &meanwhile),
            current()
        );
    }

    #[test]
    fn an_operation_is_served_as_the_gate_operation_clients_read() {
        let now: Timestamp = "2026-11-22T10:00:00.6Z".parse().unwrap();
        let plain = migrating("vm-0", "w1", "w2");
        let mut o = (*migrating("vm-1", "w1", "")).clone();
        o.stalled = Some(crate::operation::Stall::reported("ImportFailed", now));
        o.progress = Some(45.5);
        o.namespace = None;
        o.subject.namespace = None;
        let cluster_scoped_and_stalled = Arc::new(o);
        for op in [plain, cluster_scoped_and_stalled] {
            let served = ServedOp(Arc::new(GateEntry::new(op)));
            let model = served.to_model();
            assert_eq!(
                serde_json::to_value(&served).unwrap(),
                serde_json::to_value(&model).unwrap()
            );
            let read: GateOperation =
                serde_json::from_slice(&serde_json::to_vec(&served).unwrap()).unwrap();
            assert_eq!(read, model);
        }
    }
}
