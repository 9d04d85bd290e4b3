//! The guard decides from the verdict the API serves: for random facts (what is in flight and
//! where, which nodes the cluster has, whether detection is current, whether the cluster's
//! nodes could be listed, each node's override, `GUARD_WHEN_UNKNOWN`), the guard's decision on
//! the eviction of a pod on a node is what a reader of that node's served gate would conclude:
//! let through when the gate does not exist, is `Clear=True`, or is `Overridden=True`; held
//! when it is `Clear=False`; as `GUARD_WHEN_UNKNOWN` says when it is `Clear=Unknown`.

use std::sync::Arc;

use axum::http::StatusCode;
use jiff::{SignedDuration, Timestamp};
use kube::core::DynamicObject;
use kube::core::admission::AdmissionRequest;
use proptest::prelude::*;
use serde_json::Value;

use crate::admission::evictions::{NodeVerdict, decide};
use crate::api::{ApiState, router};
use crate::config::WhenUnknown;
use crate::detect::Health;
use crate::index::Index;
use crate::inventory::pods::PodNode;
use crate::inventory::{Inventory, Kept, Kind};
use crate::operation::{test_active, test_subject};
use crate::readiness::Readiness;
use crate::ruleset::Target;
use crate::track::Change;

use super::tests::GATES;

/// The nodes facts name: those the cluster may have, and one it never has.
const NODES: [&str; 5] = ["n0", "n1", "n2", "n3", "n9"];

/// A node's maintenance override, as its annotations set it.
#[derive(Clone, Copy, Debug)]
enum Overriding {
    None,
    /// Set, with no end.
    Set,
    /// Set, its end an hour ahead.
    Until,
    /// Set, its end an hour past.
    Ended,
    /// Set, its end not a time.
    Invalid,
    /// Set, its end a duration (which no time on the Node anchors).
    Relative,
}

/// Everything a node's verdict and the guard's decision rest on.
#[derive(Clone, Debug)]
struct Facts {
    /// Migrations in flight: (node, target node), each an index into [`NODES`] or none.
    migrations: Vec<(usize, Option<usize>)>,
    /// Which of [`NODES`] the cluster has.
    listed: [bool; 5],
    /// Whether the cluster's nodes could not be listed.
    nodes_failed: bool,
    /// Whether a watched target has not been listed yet (detection not current).
    stale: bool,
    /// Each node's override.
    overrides: [Overriding; 5],
    when_unknown: WhenUnknown,
}

fn overriding() -> impl Strategy<Value = Overriding> {
    prop_oneof![
        3 => Just(Overriding::None),
        1 => Just(Overriding::Set),
        1 => Just(Overriding::Until),
        1 => Just(Overriding::Ended),
        1 => Just(Overriding::Invalid),
        1 => Just(Overriding::Relative),
    ]
}

fn facts() -> impl Strategy<Value = Facts> {
    (
        prop::collection::vec((0..NODES.len(), prop::option::of(0..NODES.len())), 0..5),
        prop::array::uniform5(any::<bool>()),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.3),
        prop::array::uniform5(overriding()),
        prop_oneof![Just(WhenUnknown::Deny), Just(WhenUnknown::Allow)],
    )
        .prop_map(
            |(migrations, listed, nodes_failed, stale, overrides, when_unknown)| Facts {
                migrations,
                listed,
                nodes_failed,
                stale,
                overrides,
                when_unknown,
            },
        )
}

/// The served state that `facts` describe.
fn served(facts: &Facts, now: Timestamp) -> (Arc<ApiState>, Arc<Inventory>) {
    let index = Index::new(100, 64, 64).into_handles();
    index.writer.apply(
        facts
            .migrations
            .iter()
            .enumerate()
            .map(|(i, (node, target))| {
                let subject = test_subject(
                    "kubevirt.io/v1",
                    "VirtualMachine",
                    Some("demo"),
                    &format!("vm-{i}"),
                );
                let labels = [
                    ("ifo.kubevirt.io/node", NODES[*node]),
                    (
                        "ifo.kubevirt.io/target-node",
                        target.map_or("", |t| NODES[t]),
                    ),
                ];
                Change::Upsert(Arc::new(test_active(
                    &subject,
                    ("vms", "kubevirt"),
                    "Migrating",
                    &labels,
                )))
            })
            .collect(),
    );
    let (readiness, synced) = Readiness::new("test records");
    synced.done();
    let targets = Arc::new(Health::default());
    let t = Target::of("kubevirt.io", "v1", "virtualmachines");
    targets.watching(&t, None);
    targets.resolved(&t, true, &[None]);
    if !facts.stale {
        targets.listed(&t, &None, now);
    }
    let inventory = Arc::new(Inventory::default());
    inventory.listed(
        Kind::Node,
        NODES
            .iter()
            .zip(facts.listed)
            .filter_map(|(node, listed)| listed.then_some(*node)),
    );
    inventory.listed(Kind::Namespace, ["demo"]);
    let hour = SignedDuration::from_hours(1);
    for ((node, listed), o) in NODES.iter().zip(facts.listed).zip(facts.overrides) {
        let (ahead, past) = ((now + hour).to_string(), (now - hour).to_string());
        let until = match o {
            Overriding::None => continue,
            Overriding::Set => None,
            Overriding::Until => Some(ahead.as_str()),
            Overriding::Ended => Some(past.as_str()),
            Overriding::Invalid => Some("banana"),
            Overriding::Relative => Some("2h"),
        };
        if listed {
            inventory.applied(Kind::Node, node, Kept::overridden("drain test", until, now));
        }
    }
    if facts.nodes_failed {
        inventory.failed(Kind::Node, "nodes is forbidden".to_owned());
    }
    let state = Arc::new(
        ApiState::new(index.reader.clone(), readiness, Default::default())
            .with_detection(targets.reader())
            .with_inventory(inventory.clone()),
    );
    (state, inventory)
}

/// The review kube-apiserver sends for the eviction of `demo/pod-0`.
fn eviction() -> AdmissionRequest<DynamicObject> {
    let body = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "subResource": "eviction",
            "name": "pod-0",
            "namespace": "demo",
            "operation": "CREATE",
            "userInfo": {"username": "admin"},
            "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "pod-0", "namespace": "demo"}},
        }
    });
    let review: kube::core::admission::AdmissionReview<DynamicObject> =
        serde_json::from_value(body).unwrap();
    review.try_into().unwrap()
}

/// Whether a reader of the served gate of `node` would expect the guard to let the eviction
/// of a pod on it through.
async fn served_lets_through(state: &Arc<ApiState>, node: &str, when_unknown: WhenUnknown) -> bool {
    let uri = format!("{GATES}/node.{node}");
    let (status, body) = crate::api::tests::call(router(state.clone()), &uri, None).await;
    if status == StatusCode::NOT_FOUND {
        return true;
    }
    assert_eq!(status, StatusCode::OK, "{body}");
    let gate: Value = serde_json::from_str(&body).unwrap();
    let condition = |type_: &str| {
        gate["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == type_)
            .map(|c| ifo_model::ConditionStatus::of(c["status"].as_str().unwrap()))
    };
    use ifo_model::ConditionStatus::*;
    if condition("Overridden") == Some(True) {
        return true;
    }
    match condition("Clear") {
        Some(True) => true,
        Some(False) => false,
        _ => when_unknown == WhenUnknown::Allow,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_guard_decides_what_the_served_gate_says(facts in facts()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let now = Timestamp::now();
        let (state, inventory) = served(&facts, now);
        let review = eviction();
        for node in NODES {
            let expected = runtime.block_on(served_lets_through(&state, node, facts.when_unknown));
            let decision = decide(
                &review,
                |_, _| PodNode::Bound(node.into()),
                |node| NodeVerdict::of(state.gates().node(node)),
                |node| inventory.node(node).and_then(|facts| facts.maintenance_override),
                facts.when_unknown,
                now,
            );
            prop_assert_eq!(
                decision.allowed, expected,
                "node {}: {:?}: {}", node, decision.reason, decision.message
            );
        }
    }
}
