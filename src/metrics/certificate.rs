//! The serving certificate the server makes and renews itself (`SERVING_CERTIFICATE_SECRET`):
//! when the one it serves ends, and how often keeping it failed.

use super::register;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub(super) struct Certificate {
    not_after: Gauge,
    failures: Counter,
}

impl Certificate {
    pub(super) fn register(r: &mut Registry) -> Certificate {
        Certificate {
            not_after: register(
                r,
                "serving_certificate_not_after_timestamp_seconds",
                "When the serving certificate this replica made or read from SERVING_CERTIFICATE_SECRET ends (Unix seconds); absent without it",
                Gauge::default(),
            ),
            failures: register(
                r,
                "serving_certificate_failures",
                "Checks of the serving certificate (SERVING_CERTIFICATE_SECRET) that failed: the Secret not read or written, a caBundle not written",
                Counter::default(),
            ),
        }
    }
}

/// The certificate kept ends at `unix_seconds`.
pub fn serving_certificate_kept(unix_seconds: i64) {
    super::metrics().certificate.not_after.set(unix_seconds);
}

/// A check of the kept certificate failed.
pub fn serving_certificate_failed() {
    super::metrics().certificate.failures.inc();
}
