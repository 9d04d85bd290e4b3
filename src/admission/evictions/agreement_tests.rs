//! The guard decides from the verdict the API serves: for random facts (see
//! `api/gate/agreement_tests.rs`), the guard's decision on the eviction of a pod on each node is
//! what a reader of that node's served gate concludes.

use jiff::Timestamp;
use proptest::prelude::*;

use super::tests::eviction;
use super::{NodeVerdict, decide};
use crate::api::gate::agreement_tests::{NODES, facts, served, served_lets_through};
use crate::config::WhenUnknown;
use crate::inventory::pods::PodNode;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn the_guard_decides_what_the_served_gate_says(facts in facts()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let now = Timestamp::now();
        let (state, inventory) = served(&facts, now);
        let review = eviction();
        for node in NODES {
            let expected = runtime.block_on(served_lets_through(&state, node, facts.unknown_allowed));
            let decision = decide(
                &review,
                |_, _| PodNode::Bound(node.into()),
                |node| NodeVerdict::of(state.gates().node(node)),
                |node| inventory.node(node).and_then(|facts| facts.maintenance_override),
                if facts.unknown_allowed { WhenUnknown::Allow } else { WhenUnknown::Deny },
                now,
            );
            prop_assert_eq!(
                decision.allowed, expected,
                "node {}: {:?}: {}", node, decision.reason, decision.message
            );
        }
    }
}
