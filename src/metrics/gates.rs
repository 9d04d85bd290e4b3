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
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;

/// What the series say of one gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateSeries {
    /// The gate's name (`cluster`, `node.<node>`, ...).
    pub gate: String,
    /// The status of its `Clear` condition: `True`, `False` or `Unknown`.
    pub clear: String,
    /// Operations in flight in its scope.
    pub active: u64,
    /// When the last of them is expected to end (Unix seconds); `None` when one has no
    /// estimate.
    pub expected_clear: Option<i64>,
}

/// Where the gates are read from: the running server's API.
pub(super) type GateSource = Scraped<GateSeries>;

impl Collector for GateSource {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let gates = self.read();
        encode_gauges(
            &mut encoder,
            "maintenance_gate_status",
            "1 for the Clear status of each maintenance gate (True: nothing in flight; False: operations in flight; Unknown: the server cannot vouch for the scope), 0 for the others; the cluster's gate and those with operations in flight",
            gates.iter().flat_map(|g| {
                ["True", "False", "Unknown"].map(|value| {
                    let labels = [("gate", g.gate.as_str()), ("status", value)];
                    (labels, i64::from(g.clear == value))
                })
            }),
        )?;
        encode_gauges(
            &mut encoder,
            "maintenance_gate_active_operations",
            "Operations in flight in the scope of each maintenance gate",
            gates.iter().map(|g| {
                let active = i64::try_from(g.active).unwrap_or(i64::MAX);
                ([("gate", g.gate.as_str())], active)
            }),
        )?;
        encode_gauges(
            &mut encoder,
            "maintenance_gate_expected_clear_timestamp_seconds",
            "When the last operation in flight in the scope of each maintenance gate is expected to end (Unix seconds); absent when one has no estimate",
            gates.iter().filter_map(|g| {
                #[allow(clippy::cast_precision_loss)] // seconds since 1970 fit an f64 exactly
                let seconds = g.expected_clear? as f64;
                Some(([("gate", g.gate.as_str())], seconds))
            }),
        )
    }
}

/// The gate series read what `source` answers from now on (the API's list of gates).
pub fn serve_gates_from(source: impl Fn() -> Vec<GateSeries> + Send + Sync + 'static) {
    super::metrics().gates.serve_from(source);
}
