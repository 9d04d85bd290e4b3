//! Timestamps on the wire.

use jiff::Timestamp;

/// RFC 3339 in UTC with whole seconds (`2026-11-22T10:30:00Z`), as Kubernetes writes
/// `metav1.Time`: clients parse exactly this form, and sub-second digits would make otherwise
/// equal objects differ between replicas.
pub(crate) fn format_time(ts: Timestamp) -> String {
    format!("{ts:.0}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_seconds_utc() {
        let ts: Timestamp = "2026-11-22T10:30:00.987654321Z".parse().unwrap();
        assert_eq!(format_time(ts), "2026-11-22T10:30:00Z");
        let ts: Timestamp = "2026-11-22T12:30:05+02:00".parse().unwrap();
        assert_eq!(format_time(ts), "2026-11-22T10:30:05Z");
    }
}
