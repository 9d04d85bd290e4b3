//! The nodes' maintenance overrides in force, so that an override left on shows on dashboards
//! and alerts (`IFOMaintenanceOverrideLeftOn`):
//!
//! - `ifo_guard_override_active{node}`: 1 for each node whose override lets evictions through
//!   the guard now (absent when none).
//! - `ifo_guard_override_start_timestamp_seconds{node}`: since when it is set.
//! - `ifo_guard_override_end_timestamp_seconds{node}`: when it ends; absent without an end.
//!
//! Read at scrape time from what the inventory keeps of the nodes (installed with
//! [`serve_overrides_from`]), judged at that time: an override whose end has passed is gone
//! from the next scrape. Bounded by the cluster's nodes.

use super::{Scraped, encode_gauges};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// One node's override in force.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverrideSeries {
    /// The node.
    pub node: String,
    /// Since when it is set (Unix seconds).
    pub since: i64,
    /// When it ends (Unix seconds); `None` without an end.
    pub end: Option<i64>,
}

/// Where the overrides are read from: the running server's inventory of nodes.
pub(super) type OverrideSource = Scraped<OverrideSeries>;

impl Collector for OverrideSource {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let overrides = self.read();
        fn node(o: &OverrideSeries) -> [(&str, &str); 1] {
            [("node", o.node.as_str())]
        }
        encode_gauges(
            &mut encoder,
            "guard_override_active",
            "1 for each node whose maintenance override (the annotation ifo.kubevirt.io/maintenance-override) lets every eviction through the maintenance guard now, whatever its gate says",
            overrides.iter().map(|o| (node(o), 1_i64)),
        )?;
        encode_gauges(
            &mut encoder,
            "guard_override_start_timestamp_seconds",
            "When each node's maintenance override in force was set (Unix seconds): the latest write of the annotation kube-apiserver recorded, else when the server first saw it",
            overrides.iter().map(|o| (node(o), o.since)),
        )?;
        encode_gauges(
            &mut encoder,
            "guard_override_end_timestamp_seconds",
            "When each node's maintenance override in force ends (Unix seconds, from the annotation ifo.kubevirt.io/maintenance-override-until); absent for an override without an end",
            overrides.iter().filter_map(|o| Some((node(o), o.end?))),
        )
    }
}

/// The override series read what `source` answers from now on (the inventory's overrides in
/// force at the time of the scrape).
pub fn serve_overrides_from(source: impl Fn() -> Vec<OverrideSeries> + Send + Sync + 'static) {
    super::metrics().overrides.serve_from(source);
}
