//! Leader election (`--leader-elect`): whether this replica serves, and how often it began to.

use super::register;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub(super) struct Leader {
    serving: Gauge,
    terms: Counter,
}

impl Leader {
    pub(super) fn register(r: &mut Registry) -> Leader {
        Leader {
            serving: register(
                r,
                "leader",
                "1 while this replica answers the API (the leader, or the only replica without --leader-elect), 0 on a standby",
                Gauge::default(),
            ),
            terms: register(
                r,
                "leader_terms",
                "Times this replica became the leader and began to serve (--leader-elect)",
                Counter::default(),
            ),
        }
    }
}

/// This replica answers the API (`serving`) or not. A change to serving begins a term.
pub fn set_leader(serving: bool) {
    let l = &super::metrics().leader;
    let before = l.serving.set(i64::from(serving));
    if serving && before == 0 {
        l.terms.inc();
    }
}
