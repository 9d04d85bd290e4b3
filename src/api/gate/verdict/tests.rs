use super::*;

/// The gate of `members`, with nothing scheduled in its scope.
fn gate(members: &GateMembers, feeds: &Feeds, started: Timestamp) -> Gate {
    super::gate_of(members, feeds, started, Scheduled::default())
}
use crate::detect::Blind;
use crate::gate::FeedsBefore;
use crate::index::GateScope;
use crate::readiness::Readiness;
use crate::ruleset::Target;
use ifo_model::GateOperation;

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
        ends: crate::index::ScopeEnds::NOTHING,
        stalled: 0,
        stall_since: None,
        feeds_since: None,
        released: 0,
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
        target: Target::of("example.io", "v1", resource),
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
            target: Target::of("kubevirt.io", "v1", "virtualmachines"),
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
    let why = "whether node w1 exists is not known: the cluster's nodes have not been listed yet";
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
    let t = Target::of("kubevirt.io", "v1", "virtualmachines");
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
