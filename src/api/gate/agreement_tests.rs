//! Served gates from random facts, for the guard's agreement test
//! (`admission/evictions/agreement_tests.rs`): what is in flight and where, which nodes the
//! cluster has, whether detection is current, whether the cluster's nodes could be listed, each
//! node's override, `GUARD_WHEN_UNKNOWN`; and what a reader of a node's served gate concludes of
//! an eviction there: let through when the gate does not exist, is `Clear=True`, or is
//! `Overridden=True`; held when it is `Clear=False`; as `GUARD_WHEN_UNKNOWN` says when it is
//! `Clear=Unknown`.

use std::sync::Arc;

use axum::http::StatusCode;
use ifo_model::{ConditionStatus, GATE_OVERRIDDEN_CONDITION, MaintenanceGate, Verdict};
use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;

use crate::api::{ApiState, router};
use crate::detect::Health;
use crate::index::Index;
use crate::inventory::{Inventory, Kept, Kind};
use crate::ruleset::Target;
use crate::track::Change;

use super::tests::{GATES, migration, served_state};

/// The nodes facts name: those the cluster may have, and one it never has.
pub(crate) const NODES: [&str; 5] = ["n0", "n1", "n2", "n3", "n9"];

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
pub(crate) struct Facts {
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
    /// `GUARD_WHEN_UNKNOWN=allow` (else `deny`).
    pub(crate) unknown_allowed: bool,
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

pub(crate) fn facts() -> impl Strategy<Value = Facts> {
    (
        prop::collection::vec((0..NODES.len(), prop::option::of(0..NODES.len())), 0..5),
        prop::array::uniform5(any::<bool>()),
        prop::bool::weighted(0.2),
        prop::bool::weighted(0.3),
        prop::array::uniform5(overriding()),
        any::<bool>(),
    )
        .prop_map(
            |(migrations, listed, nodes_failed, stale, overrides, unknown_allowed)| Facts {
                migrations,
                listed,
                nodes_failed,
                stale,
                overrides,
                unknown_allowed,
            },
        )
}

/// The served state that `facts` describe.
pub(crate) fn served(facts: &Facts, now: Timestamp) -> (Arc<ApiState>, Arc<Inventory>) {
    let index = Index::new(100, 64, 64).into_handles();
    index.writer.apply(
        facts
            .migrations
            .iter()
            .enumerate()
            .map(|(i, (node, target))| {
                let target = target.map_or("", |t| NODES[t]);
                Change::Upsert(migration("demo", &format!("vm-{i}"), NODES[*node], target))
            })
            .collect(),
    );
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
    let state = served_state(&index, &targets, &inventory);
    (state, inventory)
}

/// Whether a reader of the served gate of `node` would expect the guard to let the eviction
/// of a pod on it through (`unknown_allowed`: with `GUARD_WHEN_UNKNOWN=allow`).
pub(crate) async fn served_lets_through(
    state: &Arc<ApiState>,
    node: &str,
    unknown_allowed: bool,
) -> bool {
    let uri = format!("{GATES}/node.{node}");
    let (status, body) = crate::api::tests::call(router(state.clone()), &uri, None).await;
    if status == StatusCode::NOT_FOUND {
        return true;
    }
    assert_eq!(status, StatusCode::OK, "{body}");
    let gate: MaintenanceGate = serde_json::from_str(&body).unwrap();
    let overridden = gate.status.condition(GATE_OVERRIDDEN_CONDITION);
    if overridden.is_some_and(|c| ConditionStatus::holds(&c.status)) {
        return true;
    }
    match gate.status.verdict() {
        Verdict::Clear => true,
        Verdict::InFlight => false,
        Verdict::Unknown => unknown_allowed,
    }
}
