//! The writer of persisted copies (`--persist`).

use super::{Labels, register};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

pub(super) struct Persist {
    writes: Family<Labels, Counter>,
    pending: Gauge,
    oldest_pending: Gauge<f64, AtomicU64>,
}

impl Persist {
    pub(super) fn register(r: &mut Registry) -> Persist {
        Persist {
            writes: register(
                r,
                "persist_writes",
                "Writes of persisted InFlightOperation copies (--persist), by verb (create, update, delete, get) and result (ok, conflict, not_found, foreign, error)",
                Family::default(),
            ),
            pending: register(
                r,
                "persist_pending_operations",
                "Operations whose persisted copy is not written yet (--persist)",
                Gauge::default(),
            ),
            oldest_pending: register(
                r,
                "persist_oldest_pending_seconds",
                "How long the operation waiting longest for its persisted copy has waited (--persist)",
                Gauge::default(),
            ),
        }
    }
}

/// A write of a persisted copy ended with `result`.
pub fn persist_write(verb: &'static str, result: &'static str) {
    super::metrics()
        .persist
        .writes
        .get_or_create(&vec![
            ("verb", verb.to_string()),
            ("result", result.to_string()),
        ])
        .inc();
}

/// Operations with a write of their persisted copy left, and the longest wait among them.
pub fn set_persist_pending(operations: usize, oldest: std::time::Duration) {
    let p = &super::metrics().persist;
    p.pending.set(i64::try_from(operations).unwrap_or(i64::MAX));
    p.oldest_pending.set(oldest.as_secs_f64());
}
