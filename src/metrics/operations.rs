//! What is in flight: the series maintenance gates read.
//!
//! - `ifo_operations_active{component,operation,kind,namespace,node}` is read from the index at
//!   scrape time ([`crate::index::Index::active_counts`]): the index keeps those counts under
//!   the lock that changes its records, so the gauge is what `kubectl get ifos` shows, never a
//!   separate tally that could drift, and a scrape costs one line per label set. A label set
//!   whose count drops to zero disappears instead of staying at 0, so namespaces and nodes that
//!   come and go leave nothing behind; queries use `or vector(0)` (see docs/operating.md).
//! - `ifo_operations_oldest_active_start_timestamp_seconds{component,operation,kind}`: when the
//!   oldest active operation of each rule started, for "stuck" alerts; the index keeps the
//!   start times beside the counts, so this too costs a step per label set, not per record.
//! - `ifo_operations_completed_total` and `ifo_operation_duration_seconds` count completions as
//!   the index serves them (an `Active` record turning `Completed`), without the namespace:
//!   their series are bounded by the rules (component × operation × kind) times the seven
//!   outcomes, and kept for the life of the process, as counters must be for `rate()`.

use super::{Histograms, Labels, encode_gauges, register};
use crate::index::IndexReader;
use crate::operation::InFlightOperation;
use parking_lot::RwLock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// Upper bounds of `ifo_operation_duration_seconds`: from a VM starting in seconds to an
/// operator upgrade or a backup taking hours.
pub(super) const DURATION_BUCKETS: [f64; 14] = [
    1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 28800.0,
    86400.0,
];

fn duration_histogram() -> Histogram {
    Histogram::new(DURATION_BUCKETS)
}

pub(super) struct Operations {
    held: Gauge,
    completed: Family<Labels, Counter>,
    duration: Histograms,
    source: Arc<ActiveSource>,
}

impl Operations {
    pub(super) fn register(r: &mut Registry) -> Operations {
        let held = register(
            r,
            "operations",
            "Operations held in memory (active and retained completed)",
            Gauge::default(),
        );
        let source = Arc::new(ActiveSource::default());
        r.register_collector(Box::new(source.clone()));
        let completed = register(
            r,
            "operations_completed",
            "Operations completed, by component, operation, subject kind and outcome",
            Family::default(),
        );
        let duration = register(
            r,
            "operation_duration_seconds",
            "How long completed operations were in flight (start to completion), by component, operation, subject kind and outcome",
            Histograms::new_with_constructor(duration_histogram),
        );
        Operations {
            held,
            completed,
            duration,
            source,
        }
    }

    /// Where the active gauge reads from.
    #[cfg(test)]
    pub(super) fn source(&self) -> &ActiveSource {
        &self.source
    }

    /// Counts `op`, which the index just served as completed.
    pub(super) fn completed(&self, op: &InFlightOperation) {
        let labels: Labels = vec![
            ("component", op.component.clone()),
            ("operation", op.operation.clone()),
            ("kind", op.subject.kind.clone()),
            (
                "outcome",
                op.outcome.map(|o| o.as_str()).unwrap_or("").to_owned(),
            ),
        ];
        self.completed.get_or_create(&labels).inc();
        let end = op.completed.unwrap_or(op.last_detected);
        let seconds = end.duration_since(op.created).as_secs_f64().max(0.0);
        self.duration.get_or_create(&labels).observe(seconds);
    }
}

/// Where `ifo_operations_active` is read from: the index of the running server.
#[derive(Default)]
pub(super) struct ActiveSource(RwLock<Option<IndexReader>>);

impl std::fmt::Debug for ActiveSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ActiveSource")
    }
}

impl ActiveSource {
    pub(super) fn set(&self, index: IndexReader) {
        *self.0.write() = Some(index);
    }
}

impl Collector for ActiveSource {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (counts, oldest) = match &*self.0.read() {
            Some(index) => (index.active_counts(), index.oldest_active()),
            None => (Vec::new(), Vec::new()),
        };
        encode_gauges(
            &mut encoder,
            "operations_active",
            "Operations in flight (phase Active), by component, operation, subject kind, namespace and node (the ifo.kubevirt.io/node label; empty without one)",
            counts.iter().map(|(key, n)| {
                let labels = [
                    ("component", key.component.as_str()),
                    ("operation", key.operation.as_str()),
                    ("kind", key.kind.as_str()),
                    ("namespace", key.namespace.as_str()),
                    ("node", key.node.as_str()),
                ];
                (labels, i64::try_from(*n).unwrap_or(i64::MAX))
            }),
        )?;
        encode_gauges(
            &mut encoder,
            "operations_oldest_active_start_timestamp_seconds",
            "When the oldest operation still in flight of each component, operation and subject kind started (Unix seconds); absent when none is",
            oldest.iter().map(|(key, started)| {
                let labels = [
                    ("component", key.component.as_str()),
                    ("operation", key.operation.as_str()),
                    ("kind", key.kind.as_str()),
                ];
                #[allow(clippy::cast_precision_loss)] // milliseconds since 1970 fit an f64 exactly
                let seconds = started.as_millisecond() as f64 / 1000.0;
                (labels, seconds)
            }),
        )
    }
}

/// `ifo_operations_active` reads what `index` holds from now on.
pub fn serve_active_from(index: IndexReader) {
    super::metrics().operations.source.set(index);
}

/// `op` was just served as completed: counted, with how long it was in flight.
pub fn operation_completed(op: &InFlightOperation) {
    super::metrics().operations.completed(op);
}

/// Records in memory, active and retained completed.
pub fn set_operations(n: usize) {
    super::metrics()
        .operations
        .held
        .set(i64::try_from(n).unwrap_or(i64::MAX));
}
