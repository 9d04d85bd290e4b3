//! The maintenance gates' verdicts, so that dashboards and alerts read the same verdict as
//! `kubectl wait` and `kubectl ifo check`:
//!
//! - `ifo_maintenance_gate_status{gate,status}`: 1 for the gate's `Clear` status (`True`,
//!   `False`, `Unknown`), 0 for the two others.
//! - `ifo_maintenance_gate_active_operations{gate}`: operations in flight in its scope.
//! - `ifo_maintenance_gate_expected_clear_timestamp_seconds{gate}`: when the last of them is
//!   expected to end; absent without an estimate.
//!
//! Read at scrape time from the API's own computation (installed with [`serve_gates_from`]), for
//! the gates a list answers: the cluster's and those with operations in flight, so the series
//! are bounded by the nodes, components and namespaces in flight and go when a scope clears.

use parking_lot::RwLock;

use ifo_model::MaintenanceGate;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder};
use prometheus_client::metrics::MetricType;

type Source = Box<dyn Fn() -> Vec<MaintenanceGate> + Send + Sync>;

/// Where the gates are read from: the running server's API.
#[derive(Default)]
pub(super) struct GateSource(pub(super) RwLock<Option<Source>>);

impl std::fmt::Debug for GateSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GateSource")
    }
}

impl Collector for GateSource {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gates = match &*self.0.read() {
            Some(source) => source(),
            None => Vec::new(),
        };
        let name = |g: &MaintenanceGate| g.metadata.name.clone().unwrap_or_default();
        let mut family: MetricEncoder = encoder.encode_descriptor(
            "maintenance_gate_status",
            "1 for the Clear status of each maintenance gate (True: nothing in flight; False: operations in flight; Unknown: the server cannot vouch for the scope), 0 for the others; the cluster's gate and those with operations in flight",
            None,
            MetricType::Gauge,
        )?;
        for g in &gates {
            let status = g.status.clear().map_or("Unknown", |c| c.status.as_str());
            let gate = name(g);
            for value in ["True", "False", "Unknown"] {
                family
                    .encode_family(&[("gate", gate.as_str()), ("status", value)].to_vec())?
                    .encode_gauge(&i64::from(status == value))?;
            }
        }
        let mut family: MetricEncoder = encoder.encode_descriptor(
            "maintenance_gate_active_operations",
            "Operations in flight in the scope of each maintenance gate",
            None,
            MetricType::Gauge,
        )?;
        for g in &gates {
            family
                .encode_family(&[("gate", name(g).as_str())].to_vec())?
                .encode_gauge(&i64::try_from(g.status.active_operations).unwrap_or(i64::MAX))?;
        }
        let mut family: MetricEncoder = encoder.encode_descriptor(
            "maintenance_gate_expected_clear_timestamp_seconds",
            "When the last operation in flight in the scope of each maintenance gate is expected to end (Unix seconds); absent when one has no estimate",
            None,
            MetricType::Gauge,
        )?;
        for g in &gates {
            if let Some(t) = &g.status.expected_clear_time {
                #[allow(clippy::cast_precision_loss)] // seconds since 1970 fit an f64 exactly
                let seconds = t.0.as_second() as f64;
                family
                    .encode_family(&[("gate", name(g).as_str())].to_vec())?
                    .encode_gauge(&seconds)?;
            }
        }
        Ok(())
    }
}

/// The gate series read what `source` answers from now on (the API's list of gates).
pub fn serve_gates_from(source: impl Fn() -> Vec<MaintenanceGate> + Send + Sync + 'static) {
    *super::metrics().gates.0.write() = Some(Box::new(source));
}
