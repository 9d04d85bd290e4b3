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

use super::{Scraped, encode_gauges};
use ifo_model::MaintenanceGate;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// Where the gates are read from: the running server's API.
pub(super) type GateSource = Scraped<MaintenanceGate>;

impl Collector for GateSource {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gates = self.read();
        fn name(g: &MaintenanceGate) -> &str {
            g.metadata.name.as_deref().unwrap_or_default()
        }
        encode_gauges(
            &mut encoder,
            "maintenance_gate_status",
            "1 for the Clear status of each maintenance gate (True: nothing in flight; False: operations in flight; Unknown: the server cannot vouch for the scope), 0 for the others; the cluster's gate and those with operations in flight",
            gates.iter().flat_map(|g| {
                let status = g.status.clear().map_or("Unknown", |c| c.status.as_str());
                ["True", "False", "Unknown"].map(|value| {
                    let labels = [("gate", name(g)), ("status", value)];
                    (labels, i64::from(status == value))
                })
            }),
        )?;
        encode_gauges(
            &mut encoder,
            "maintenance_gate_active_operations",
            "Operations in flight in the scope of each maintenance gate",
            gates.iter().map(|g| {
                let active = i64::try_from(g.status.active_operations).unwrap_or(i64::MAX);
                ([("gate", name(g))], active)
            }),
        )?;
        encode_gauges(
            &mut encoder,
            "maintenance_gate_expected_clear_timestamp_seconds",
            "When the last operation in flight in the scope of each maintenance gate is expected to end (Unix seconds); absent when one has no estimate",
            gates.iter().filter_map(|g| {
                let t = g.status.expected_clear_time.as_ref()?;
                #[allow(clippy::cast_precision_loss)] // seconds since 1970 fit an f64 exactly
                let seconds = t.0.as_second() as f64;
                Some(([("gate", name(g))], seconds))
            }),
        )
    }
}

/// The gate series read what `source` answers from now on (the API's list of gates).
pub fn serve_gates_from(source: impl Fn() -> Vec<MaintenanceGate> + Send + Sync + 'static) {
    super::metrics().gates.serve_from(source);
}
