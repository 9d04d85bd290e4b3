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

use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;

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

type Source = Box<dyn Fn() -> Vec<OverrideSeries> + Send + Sync>;

/// Where the overrides are read from: the running server's inventory of nodes.
#[derive(Default)]
pub(super) struct OverrideSource(pub(super) RwLock<Option<Source>>);

impl std::fmt::Debug for OverrideSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OverrideSource")
    }
}

impl Collector for OverrideSource {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let overrides = match &*self.0.read() {
            Some(source) => source(),
            None => Vec::new(),
        };
        let mut family: MetricEncoder = encoder.encode_descriptor(
            "guard_override_active",
            "1 for each node whose maintenance override (the annotation ifo.kubevirt.io/maintenance-override) lets every eviction through the maintenance guard now, whatever its gate says",
            None,
            MetricType::Gauge,
        )?;
        for o in &overrides {
            family
                .encode_family(&[("node", o.node.as_str())].to_vec())?
                .encode_gauge(&1_i64)?;
        }
        let mut family: MetricEncoder = encoder.encode_descriptor(
            "guard_override_start_timestamp_seconds",
            "When each node's maintenance override in force was set (Unix seconds): the latest write of the annotation kube-apiserver recorded, else when the server first saw it",
            None,
            MetricType::Gauge,
        )?;
        for o in &overrides {
            family
                .encode_family(&[("node", o.node.as_str())].to_vec())?
                .encode_gauge(&o.since)?;
        }
        let mut family: MetricEncoder = encoder.encode_descriptor(
            "guard_override_end_timestamp_seconds",
            "When each node's maintenance override in force ends (Unix seconds, from the annotation ifo.kubevirt.io/maintenance-override-until); absent for an override without an end",
            None,
            MetricType::Gauge,
        )?;
        for o in &overrides {
            if let Some(end) = o.end {
                family
                    .encode_family(&[("node", o.node.as_str())].to_vec())?
                    .encode_gauge(&end)?;
            }
        }
        Ok(())
    }
}

/// The override series read what `source` answers from now on (the inventory's overrides in
/// force at the time of the scrape).
pub fn serve_overrides_from(source: impl Fn() -> Vec<OverrideSeries> + Send + Sync + 'static) {
    *super::metrics().overrides.0.write() = Some(Box::new(source));
}
