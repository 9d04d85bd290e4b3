use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::broadcast::error::TryRecvError;

use super::*;
use crate::index::EventKind::{Added, Deleted, Modified};
use crate::index::gates::GateCounts;
use crate::operation::{InFlightOperation, test_active, test_subject};
use crate::track::Change;

/// No node is cordoned.
fn no_cordon(_: &str) -> Option<jiff::Timestamp> {
    None
}

fn op(namespace: Option<&str>, subject: &str, message: &str) -> Arc<InFlightOperation> {
    let pod = test_subject("v1", "Pod", namespace, subject);
    let mut record = test_active(&pod, ("rs", ""), "Op", &[]);
    record.message = Some(message.to_owned());
    Arc::new(record)
}

fn kinds(events: &[Event]) -> Vec<(u64, EventKind, &str)> {
    events
        .iter()
        .map(|e| {
            let name = &e.object.as_ref().unwrap().op.subject.name;
            (e.rv, e.kind, name.as_str())
        })
        .collect()
}

/// Applies one new record in namespace ns for each of `subjects`: s<i>.
fn fill(index: &Index, subjects: std::ops::Range<usize>) {
    for i in subjects {
        index.apply(vec![Change::Upsert(op(Some("ns"), &format!("s{i}"), "m"))]);
    }
}

fn expired(requested: u64, oldest: u64) -> WatchError {
    WatchError::Expired { requested, oldest }
}

/// The RVs of the events a watch from `rv` replays.
fn replayed_rvs(index: &Index, rv: u64) -> Vec<u64> {
    let (replay, _) = index.watch_from(rv).unwrap();
    replayed(index, replay).iter().map(|e| e.rv).collect()
}

/// Every event of a replay, read in small chunks.
fn replayed(index: &Index, mut replay: Replay) -> Vec<Event> {
    let mut events = Vec::new();
    while !replay.is_done() {
        events.extend(index.replay(&mut replay, 2).unwrap());
    }
    events
}

fn drain(rx: &mut broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        match rx.try_recv() {
            Ok(e) => out.push(e),
            Err(TryRecvError::Empty) => return out,
            Err(e) => panic!("{e:?}"),
        }
    }
}

#[test]
fn added_modified_deleted_with_rising_rvs() {
    let index = Index::new(1000, 100, 16);
    let (snap, mut rx) = index.subscribe_with_snapshot();
    assert_eq!((snap.rv, snap.items.len()), (1000, 0));

    let a1 = op(Some("ns"), "a", "one");
    let a2 = Arc::new(InFlightOperation {
        message: Some("two".into()),
        ..(*a1).clone()
    });
    index.apply(vec![Change::Upsert(a1.clone())]);
    index.apply(vec![Change::Upsert(a2.clone()), Change::Remove(a2.clone())]);
    assert_eq!(index.current_rv(), 1003);

    let events = drain(&mut rx);
    assert_eq!(
        kinds(&events),
        [
            (1001, Added, "a"),
            (1002, Modified, "a"),
            (1003, Deleted, "a")
        ]
    );
    assert!(events[0].previous.is_none());
    let prev = events[1].previous.as_ref().unwrap();
    assert_eq!(prev.rv, 1001);
    assert_eq!(prev.op.message.as_deref(), Some("one"));
    // DELETED carries the deletion RV and the last state.
    assert_eq!(
        events[2].object.as_ref().unwrap().to_json()["metadata"]["resourceVersion"],
        "1003"
    );
    assert_eq!(
        events[2].object.as_ref().unwrap().to_json()["status"]["message"],
        "two"
    );
    assert!(index.get(Some("ns"), &a1.name).is_none());
    assert_eq!(index.len(), 0);
}

#[test]
fn get_and_json_once_per_rv() {
    let index = Index::new(0, 10, 4);
    let a = op(Some("ns"), "a", "m");
    index.apply(vec![Change::Upsert(a.clone())]);
    let stored = index.get(Some("ns"), &a.name).unwrap();
    assert_eq!(stored.rv, 1);
    assert!(index.get(None, &a.name).is_none());
    assert!(index.get(Some("other"), &a.name).is_none());
    let again = index.get(Some("ns"), &a.name).unwrap();
    let (w1, w2) = (stored.object(), again.object());
    assert!(std::ptr::eq(w1, w2), "serialised once");
    let object: serde_json::Value = serde_json::from_str(w1.get()).unwrap();
    assert_eq!(object, stored.to_json());
    assert_eq!(&object["metadata"]["resourceVersion"], "1");
    let metadata: serde_json::Value = serde_json::from_str(stored.metadata().get()).unwrap();
    assert_eq!(metadata, object["metadata"]);
}

#[test]
fn unknown_removes_are_ignored_and_uid_changes_are_delete_then_add() {
    let index = Index::new(0, 10, 16);
    let (_, mut rx) = index.subscribe_with_snapshot();
    let a = op(Some("ns"), "a", "m");
    index.apply(vec![Change::Remove(a.clone())]);
    assert_eq!(index.current_rv(), 0);

    index.apply(vec![Change::Upsert(a.clone())]);
    let other_occurrence = Arc::new(InFlightOperation {
        uid: "new-uid".into(),
        ..(*a).clone()
    });
    // A stale Remove of another occurrence must not delete the current one.
    index.apply(vec![Change::Remove(other_occurrence.clone())]);
    assert_eq!(index.current_rv(), 1);
    index.apply(vec![Change::Upsert(other_occurrence.clone())]);
    let events = drain(&mut rx);
    assert_eq!(
        kinds(&events),
        [(1, Added, "a"), (2, Deleted, "a"), (3, Added, "a")]
    );
    assert_eq!(events[1].object.as_ref().unwrap().op.uid, a.uid);
    assert_eq!(events[2].object.as_ref().unwrap().op.uid, "new-uid");
}

#[test]
fn snapshot_is_sorted_and_cheap() {
    let index = Index::new(0, 16, 16);
    let mut changes = Vec::new();
    for i in (0..10_000).rev() {
        let ns = match i % 3 {
            0 => None,
            1 => Some("b-ns"),
            _ => Some("a-ns"),
        };
        changes.push(Change::Upsert(op(ns, &format!("s{i:05}"), "m")));
    }
    index.apply(changes);
    let start = Instant::now();
    let snap = index.snapshot();
    let took = start.elapsed();
    assert_eq!(snap.rv, 10_000);
    assert_eq!(snap.items.len(), 10_000);
    let keys: Vec<_> = snap.items.iter().map(|s| s.key()).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(keys[0].0, None, "cluster-scoped first");
    assert_eq!(keys.last().unwrap().0.as_deref(), Some("b-ns"));
    // Generous bound for loaded machines; typically well under a millisecond.
    assert!(took < Duration::from_millis(100), "snapshot took {took:?}");
}

#[test]
fn watch_from_replays_then_streams() {
    let index = Index::new(100, 5, 16);
    fill(&index, 0..3);
    let (replay, mut rx) = index.watch_from(101).unwrap();
    assert_eq!(
        replayed(&index, replay)
            .iter()
            .map(|e| e.rv)
            .collect::<Vec<_>>(),
        [102, 103]
    );
    let (replay, _) = index.watch_from(103).unwrap();
    assert!(replay.is_done());
    let (replay, _) = index.watch_from(100).unwrap();
    assert_eq!(
        replayed(&index, replay).len(),
        3,
        "from the base RV everything is replayable"
    );
    index.apply(vec![Change::Upsert(op(Some("ns"), "s9", "m"))]);
    assert_eq!(
        drain(&mut rx).iter().map(|e| e.rv).collect::<Vec<_>>(),
        [104]
    );

    assert_eq!(
        index.watch_from(105).unwrap_err(),
        WatchError::TooLarge {
            requested: 105,
            current: 104
        }
    );
    assert_eq!(index.watch_from(99).unwrap_err(), expired(99, 100));
    // Fill past the ring: only the last 5 events (rv 105..=109 after 5 more) are kept.
    fill(&index, 10..15);
    assert_eq!(index.current_rv(), 109);
    assert_eq!(index.watch_from(103).unwrap_err(), expired(103, 104));
    assert_eq!(replayed_rvs(&index, 104), [105, 106, 107, 108, 109]);
    // A replay whose events leave the ring while it is read is told so.
    let (mut slow, _) = index.watch_from(104).unwrap();
    assert_eq!(index.replay(&mut slow, 1).unwrap()[0].rv, 105);
    index.apply(vec![Change::Upsert(op(Some("ns"), "s20", "m"))]);
    index.apply(vec![Change::Upsert(op(Some("ns"), "s21", "m"))]);
    assert!(matches!(
        index.replay(&mut slow, 1),
        Err(WatchError::Expired { requested: 105, .. })
    ));
    assert!(
        expired(103, 104)
            .to_string()
            .contains("too old resource version: 103 (104)")
    );
}

#[test]
fn the_history_is_bounded_by_bytes_too() {
    // Room for three records, whatever the count allows.
    let three = 3 * op(Some("ns"), "s0", "m").approx_bytes();
    let index = Index::new(100, 1_000, 16).with_history_bytes(three);
    fill(&index, 0..10);
    assert_eq!(index.current_rv(), 110);
    assert_eq!(index.watch_from(106).unwrap_err(), expired(106, 107));
    assert_eq!(replayed_rvs(&index, 107), [108, 109, 110]);
    // A record larger than the whole budget leaves nothing to resume from before it.
    let large = op(Some("ns"), "big", &"m".repeat(three));
    index.apply(vec![Change::Upsert(large)]);
    assert!(index.watch_from(110).is_err());
    assert!(index.watch_from(111).unwrap().0.is_done());
}

/// An update keeps the state before it alive (for watches with selectors), after that state's
/// own event has left: it weighs both.
#[test]
fn an_update_weighs_the_state_before_it_too() {
    let four = 4 * op(Some("ns"), "s0", "m0").approx_bytes();
    let index = Index::new(100, 1_000, 16).with_history_bytes(four);
    for i in 0..10 {
        index.apply(vec![Change::Upsert(op(Some("ns"), "s0", &format!("m{i}")))]);
    }
    assert_eq!(index.current_rv(), 110);
    // Two updates, each holding two states, fill the room of four records.
    assert!(index.watch_from(107).is_err());
    let (replay, _) = index.watch_from(108).unwrap();
    let events = replayed(&index, replay);
    assert_eq!(events.iter().map(|e| e.rv).collect::<Vec<_>>(), [109, 110]);
    assert!(events.iter().all(|e| e.previous.is_some()));
}

#[test]
fn zero_ring_capacity_replays_nothing() {
    let index = Index::new(0, 0, 1);
    index.apply(vec![Change::Upsert(op(None, "a", "m"))]);
    assert!(matches!(
        index.watch_from(0),
        Err(WatchError::Expired { oldest: 1, .. })
    ));
    assert!(index.watch_from(1).unwrap().0.is_done());
}

#[test]
fn lagging_receivers_are_told() {
    let index = Index::new(0, 100, 2);
    let (_, mut rx) = index.watch_from(0).unwrap();
    for i in 0..5 {
        index.apply(vec![Change::Upsert(op(None, &format!("s{i}"), "m"))]);
    }
    assert!(matches!(rx.try_recv(), Err(TryRecvError::Lagged(_))));
}

/// Replay and live events meet without gap or duplicate while another thread keeps applying.
#[test]
fn handover_is_gap_free_under_concurrent_applies() {
    const TOTAL: u64 = 3_000;
    let index = Arc::new(Index::new(0, TOTAL as usize, TOTAL as usize));
    let writer = {
        let index = index.clone();
        std::thread::spawn(move || {
            for i in 0..TOTAL {
                let a = op(Some("ns"), &format!("s{}", i % 50), &format!("m{i}"));
                index.apply(vec![Change::Upsert(a)]);
            }
        })
    };
    let mut checks = 0;
    loop {
        let from = index.current_rv() / 2;
        let (replay, mut rx) = index.watch_from(from).unwrap();
        let (snap, mut rx2) = index.subscribe_with_snapshot();
        let mut expected = from + 1;
        for e in replayed(&index, replay) {
            assert_eq!(e.rv, expected);
            expected += 1;
        }
        let mut expected2 = snap.rv + 1;
        let stop = (expected.max(expected2) + 20).min(TOTAL);
        while expected <= stop {
            assert_eq!(rx.blocking_recv().unwrap().rv, expected);
            expected += 1;
        }
        while expected2 <= stop {
            assert_eq!(rx2.blocking_recv().unwrap().rv, expected2);
            expected2 += 1;
        }
        checks += 1;
        if index.current_rv() >= TOTAL {
            break;
        }
    }
    writer.join().unwrap();
    assert!(checks > 0);
    assert_eq!(index.len(), 50);
}

/// Whatever the changes (new occurrences, label moves, completions, removals, stale removes of
/// other occurrences), the active counts are those of the records served.
#[test]
fn active_counts_are_always_those_of_the_records() {
    use crate::index::active::ActiveCounts;
    use crate::operation::{Outcome, Phase};
    let index = Index::new(1, 64, 16);
    let mut rng = fastrand::Rng::with_seed(16);
    let mut uid_counter = 0u32;
    for step in 0..5_000 {
        let subject = format!("s{}", rng.u8(..12));
        let ns = ["a", "b", "c", "Not_A_Namespace"][rng.usize(..4)];
        let base = op(Some(ns), &subject, "m");
        let current = index.get(Some(ns), &base.name).map(|s| s.op.clone());
        let mut record = match &current {
            Some(c) if rng.bool() => (**c).clone(),
            _ => {
                uid_counter += 1;
                InFlightOperation {
                    uid: format!("occurrence-{uid_counter}"),
                    created: base.created + jiff::SignedDuration::from_secs(rng.i64(0..100)),
                    ..(*base).clone()
                }
            }
        };
        let change = match rng.u8(..5) {
            0 => {
                record.phase = Phase::Completed;
                record.outcome = Some(Outcome::Succeeded);
                Change::Upsert(Arc::new(record))
            }
            1 => Change::Remove(Arc::new(record)),
            _ => {
                record.phase = Phase::Active;
                // A node name no gate can have is in no node's gate, nor is a namespace's.
                let nodes = ["n0", "n1", "Not_A_Node"];
                record
                    .labels
                    .insert("ifo.kubevirt.io/node", nodes[rng.usize(..3)].to_owned());
                if rng.bool() {
                    record.labels.insert(
                        "ifo.kubevirt.io/target-node",
                        nodes[rng.usize(..3)].to_owned(),
                    );
                }
                record.message = Some(format!("m{}", rng.u8(..3)));
                let at = |secs| base.created + jiff::SignedDuration::from_secs(secs);
                record.expectation = rng.bool().then(|| crate::operation::Expectation {
                    end: at(rng.i64(100..110)),
                    basis: crate::operation::EstimateBasis::History,
                    p90_end: None,
                    overdue: None,
                });
                record.ending = (rng.u8(..4) == 0).then(|| crate::operation::Ending {
                    since: at(100),
                    at: at(rng.i64(105..115)),
                });
                record.stalled = (rng.u8(..3) == 0)
                    .then(|| crate::operation::Stall::reported("Stuck", base.created));
                Change::Upsert(Arc::new(record))
            }
        };
        index.apply(vec![change]);
        let snapshot = index.snapshot();
        assert_eq!(
            (index.active_counts(), index.oldest_active()),
            ActiveCounts::recount(snapshot.items.iter().map(|s| &*s.op)),
            "after step {step}"
        );
        assert_eq!(
            index.read().gates.to_map(),
            GateCounts::recount(snapshot.items.iter().map(|s| &*s.op)),
            "gates after step {step}"
        );
    }
}

#[test]
fn gates_expect_the_latest_end_and_count_stalls() {
    use crate::operation::{EstimateBasis, Expectation, Stall};
    let index = Index::new(10, 64, 16);
    let base = op(Some("ns"), "a", "m");
    let at = |secs| base.created + jiff::SignedDuration::from_secs(secs);
    let expecting = |subject: &str, end: Option<i64>| {
        let mut r = (*op(Some("ns"), subject, "m")).clone();
        r.expectation = end.map(|e| Expectation {
            end: at(e),
            basis: EstimateBasis::History,
            p90_end: None,
            overdue: None,
        });
        r
    };
    let mut a = expecting("a", Some(60));
    let b = expecting("b", Some(240));
    index.apply(vec![
        Change::Upsert(Arc::new(a.clone())),
        Change::Upsert(Arc::new(b.clone())),
    ]);
    let cluster = GateScope::Cluster;
    let (_, g) = index.gate(&cluster, no_cordon);
    assert_eq!((g.expected_clear, g.stalled), (Some(at(240)), 0));
    // One without an estimate: nobody can say when the scope clears.
    let c = expecting("c", None);
    index.apply(vec![Change::Upsert(Arc::new(c.clone()))]);
    assert_eq!(index.gate(&cluster, no_cordon).1.expected_clear, None);
    index.apply(vec![Change::Remove(Arc::new(c))]);
    assert_eq!(
        index.gate(&cluster, no_cordon).1.expected_clear,
        Some(at(240))
    );
    // b stops being detected: it ends with its grace, earlier than expected.
    let mut ending = b.clone();
    ending.ending = Some(crate::operation::Ending {
        since: at(10),
        at: at(40),
    });
    index.apply(vec![Change::Upsert(Arc::new(ending))]);
    let rv = index.current_rv();
    let (_, g) = index.gate(&cluster, no_cordon);
    assert_eq!((g.expected_clear, g.rv), (Some(at(60)), rv));
    // A stall is a change every gate of the operation sees.
    a.stalled = Some(Stall::reported("ImportFailed", at(5)));
    index.apply(vec![Change::Upsert(Arc::new(a.clone()))]);
    let (_, g) = index.gate(&GateScope::Namespace("ns".into()), no_cordon);
    assert_eq!((g.stalled, g.rv), (1, rv + 1));
    assert!(g.operations.iter().any(|o| o.is_stalled()));
    a.stalled = None;
    index.apply(vec![Change::Upsert(Arc::new(a))]);
    assert_eq!(index.gate(&cluster, no_cordon).1.stalled, 0);
}

#[test]
fn gates_hold_their_operations_oldest_first_and_change_at_their_rv() {
    let index = Index::new(10, 64, 16);
    let mut a = (*op(Some("ns"), "a", "m")).clone();
    a.labels.insert("ifo.kubevirt.io/node", "w1");
    a.created -= jiff::SignedDuration::from_secs(60);
    let mut b = (*op(Some("ns"), "b", "m")).clone();
    b.labels.insert("ifo.kubevirt.io/node", "w2");
    b.labels.insert("ifo.kubevirt.io/target-node", "w1");
    index.apply(vec![
        Change::Upsert(Arc::new(b.clone())),
        Change::Upsert(Arc::new(a.clone())),
    ]);
    let node = GateScope::Node("w1".into());
    let (rv, w1) = index.gate(&node, no_cordon);
    assert_eq!(rv, 12);
    assert_eq!((w1.active, w1.rv), (2, 12));
    let names: Vec<&str> = w1
        .operations
        .iter()
        .map(|o| o.subject.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b"], "oldest first");
    assert!(node.is_target_of(&w1.operations[1]) && !node.is_target_of(&w1.operations[0]));
    // A new message changes no gate.
    a.message = Some("other".into());
    index.apply(vec![Change::Upsert(Arc::new(a.clone()))]);
    assert_eq!(index.gate(&node, no_cordon).1.rv, 12);
    // The migration ends: w1 keeps one, w2 clears and remembers when.
    index.apply(vec![Change::Remove(Arc::new(b))]);
    let (_, w1) = index.gate(&node, no_cordon);
    assert_eq!((w1.active, w1.rv), (1, 14));
    let (_, w2) = index.gate(&GateScope::Node("w2".into()), no_cordon);
    assert_eq!((w2.active, w2.rv), (0, 14));
    assert!(w2.since.is_some());
    let names: Vec<String> = index
        .gates_in_flight(MAX_GATE_OPERATIONS, no_cordon)
        .1
        .iter()
        .map(|g| g.scope.to_string())
        .collect();
    assert_eq!(names, ["cluster", "node.w1", "namespace.ns"]);
    // Nothing known of a scope: the epoch's RV; a feeds change moves every gate's RV.
    assert_eq!(
        index.gate(&GateScope::Node("w9".into()), no_cordon).1.rv,
        10
    );
    let feeds = index.feeds_changed(true);
    assert_eq!(feeds, 15);
    assert_eq!(index.gate(&node, no_cordon).1.rv, 15);
    assert_eq!(
        index.gate(&GateScope::Node("w9".into()), no_cordon).1.rv,
        15
    );
    let (replay, _) = index.watch_from(14).unwrap();
    let events = index.replay(&mut { replay }, 10).unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].rv, events[0].kind),
        (15, EventKind::FeedsChanged)
    );
    assert!(events[0].object.is_none());
}

/// On a cordoned node, an operation that holds its node only if it started before the cordon
/// and started after holds nothing there: counted apart, out of the node's verdict, its
/// listing and its ends; every other scope and every other operation as before.
#[test]
fn on_a_cordoned_node_what_started_after_the_cordon_holds_nothing_there() {
    let index = Index::new(10, 64, 16);
    let at = |s| jiff::Timestamp::from_second(s).unwrap();
    let on_w1 = |name: &str, start: i64, until_cordon: bool, end: i64| {
        let mut o = (*op(Some("ns"), name, "m")).clone();
        o.labels.insert("ifo.kubevirt.io/node", "w1");
        if until_cordon {
            o.labels
                .insert("ifo.kubevirt.io/node-hold", "started-before-cordon");
        }
        o.created = at(start);
        o.expectation = Some(crate::operation::Expectation {
            end: at(end),
            basis: crate::operation::EstimateBasis::History,
            p90_end: None,
            overdue: None,
        });
        Arc::new(o)
    };
    // A Job's pod that started before the cordon, a tenant's that started after it, and a
    // migration (no such label) that started after it too.
    let migration = on_w1("migration", 300, false, 2_000);
    index.apply(vec![
        Change::Upsert(on_w1("before", 100, true, 1_000)),
        Change::Upsert(on_w1("after", 300, true, 9_000)),
        Change::Upsert(migration.clone()),
    ]);
    let node = GateScope::Node("w1".into());
    let cordoned = |since: i64| move |n: &str| (n == "w1").then(|| at(since));
    let names = |g: &GateMembers| -> Vec<String> {
        g.operations
            .iter()
            .map(|o| o.subject.name.clone())
            .collect()
    };
    let (_, open) = index.gate(&node, no_cordon);
    assert_eq!(
        (open.active, open.released),
        (3, 0),
        "not cordoned: all hold"
    );
    let (_, g) = index.gate(&node, cordoned(200));
    assert_eq!((g.active, g.released), (2, 1));
    assert_eq!(names(&g), ["before", "migration"]);
    assert_eq!(
        g.expected_clear,
        Some(at(2_000)),
        "the released one's end is not waited for"
    );
    // Another node's cordon, or another scope: nothing released.
    assert_eq!(
        index
            .gate(&node, |_: &str| None::<jiff::Timestamp>)
            .1
            .active,
        3
    );
    let cluster = index.gate(&GateScope::Cluster, cordoned(200)).1;
    assert_eq!((cluster.active, cluster.released), (3, 0));
    // Cordoned before any of them started: both pods released, the migration holds.
    let (_, g) = index.gate(&node, cordoned(50));
    assert_eq!((g.active, g.released), (1, 2));
    // The migration ends: nothing holds the node, clear since the cordon at the earliest.
    assert_eq!(names(&g), ["migration"]);
    index.apply(vec![Change::Remove(migration)]);
    let (_, g) = index.gate(&node, cordoned(50));
    assert_eq!((g.active, g.released, g.expected_clear), (0, 2, None));
    assert!(g.since.is_some_and(|t| t >= at(50)));
    assert!(g.operations.is_empty());
    // The gate list reads the same.
    let listed = index.gates_in_flight(MAX_GATE_OPERATIONS, cordoned(50)).1;
    let w1 = listed.iter().find(|m| m.scope == node).unwrap();
    assert_eq!((w1.active, w1.released), (0, 2));
}

#[test]
fn a_new_epoch_expires_every_earlier_rv_and_keeps_rvs_rising() {
    let index = Index::new(100, 16, 16);
    fill(&index, 0..3);
    // Another replica's RVs overlap ours: 101..=103 here could be anything there.
    assert_eq!(index.begin_epoch(50), 103, "never goes back");
    let epoch = index.begin_epoch(1_000_000);
    assert_eq!(epoch, 1_000_000);
    assert_eq!(index.epoch(), epoch);
    assert_eq!(index.len(), 3, "the records stay");
    for rv in [100, 102, 103, 999_999] {
        assert_eq!(
            index.watch_from(rv).unwrap_err(),
            expired(rv, epoch),
            "rv {rv}"
        );
    }
    let (replay, mut rx) = index.watch_from(epoch).unwrap();
    assert!(replay.is_done());
    index.apply(vec![Change::Upsert(op(Some("ns"), "s0", "changed"))]);
    assert_eq!(kinds(&drain(&mut rx)), [(epoch + 1, Modified, "s0")]);
}

/// What a gate's window reads of its operations (their p90 ends, whether one is overdue) is a
/// change of the gate on its own: a record whose p90 end alone moves, or that turns overdue
/// while stalled by its rule already, moves the gate.
#[test]
fn a_p90_end_or_an_overdue_alone_changes_the_gates_window() {
    use crate::index::LatestEnd;
    use crate::operation::{EstimateBasis, Expectation, OVERDUE_BY_HISTORY, Stall};
    let index = Index::new(10, 64, 16);
    let base = op(Some("ns"), "a", "m");
    let at = |secs| base.created + jiff::SignedDuration::from_secs(secs);
    let mut a = (*op(Some("ns"), "a", "m")).clone();
    a.stalled = Some(Stall::reported("ImportFailed", at(1)));
    a.expectation = Some(Expectation {
        end: at(60),
        basis: EstimateBasis::History,
        p90_end: Some(at(90)),
        overdue: None,
    });
    index.apply(vec![Change::Upsert(Arc::new(a.clone()))]);
    let cluster = GateScope::Cluster;
    let p90 = |index: &Index| match index.gate(&cluster, no_cordon).1.ends.p90 {
        LatestEnd::At(t, _) => format!("at {t}"),
        LatestEnd::Overdue(_) => "overdue".to_owned(),
        other => format!("{other:?}"),
    };
    assert_eq!(p90(&index), format!("at {}", at(90)));
    let rv = index.current_rv();
    a.expectation.as_mut().unwrap().p90_end = Some(at(120));
    index.apply(vec![Change::Upsert(Arc::new(a.clone()))]);
    assert_eq!(p90(&index), format!("at {}", at(120)));
    assert_eq!(index.gate(&cluster, no_cordon).1.rv, rv + 1);
    a.expectation.as_mut().unwrap().overdue = Some(Stall {
        reason: OVERDUE_BY_HISTORY.to_owned(),
        message: "late".to_owned(),
        since: at(100),
    });
    index.apply(vec![Change::Upsert(Arc::new(a))]);
    assert_eq!(p90(&index), "overdue");
}
