//! The watches that feed the index, one set of series per target resource (its group, version
//! and resource): whether it is current, when it was last listed, how often it failed. A target
//! no ruleset wants any more loses its series ([`forget_target`]), so they are bounded by the
//! targets of the rulesets.

use super::{Labels, register};
use crate::ruleset::Target;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

pub(super) struct Targets {
    watches: Gauge,
    up: Family<Labels, Gauge>,
    last_list: Family<Labels, Gauge>,
    failures: Family<Labels, Counter>,
    current: Family<Labels, Gauge>,
    skipped: Family<Labels, Gauge>,
}

impl Targets {
    pub(super) fn register(r: &mut Registry) -> Targets {
        Targets {
            watches: register(
                r,
                "resource_watches",
                "Resource types currently watched",
                Gauge::default(),
            ),
            up: register(
                r,
                "target_watch_up",
                "1 while every watch of the target is current, 0 while any is starting, failing or stalled",
                Family::default(),
            ),
            last_list: register(
                r,
                "target_last_list_timestamp_seconds",
                "When a list of the target last completed (Unix seconds)",
                Family::default(),
            ),
            failures: register(
                r,
                "target_watch_failures",
                "Failed lists, watches and liveness probes of the target",
                Family::default(),
            ),
            current: register(
                r,
                "target_detection_current",
                "1 while detection on the target is current: watched, no ruleset of it suspended or behind, no object skipped",
                Family::default(),
            ),
            skipped: register(
                r,
                "target_objects_skipped",
                "Objects of the target not evaluated now: they cannot be decoded, or went over a ruleset's evaluation budget",
                Family::default(),
            ),
        }
    }
}

fn targets() -> &'static Targets {
    &super::metrics().targets
}

fn target_labels(target: &Target) -> Labels {
    vec![
        ("group", target.group.clone()),
        ("version", target.version.clone()),
        ("resource", target.resource.clone()),
    ]
}

/// Resource types watched now.
pub fn set_watches(n: usize) {
    targets().watches.set(i64::try_from(n).unwrap_or(i64::MAX));
}

/// Whether every watch of `target` is current.
pub fn set_target_watch_up(target: &Target, up: bool) {
    targets()
        .up
        .get_or_create(&target_labels(target))
        .set(i64::from(up));
}

/// Whether detection on `target` is current, and how many of its objects are skipped.
pub fn set_target_detection(target: &Target, current: bool, skipped: usize) {
    let labels = target_labels(target);
    let t = targets();
    t.current.get_or_create(&labels).set(i64::from(current));
    t.skipped
        .get_or_create(&labels)
        .set(i64::try_from(skipped).unwrap_or(i64::MAX));
}

/// When a list of `target` last completed (Unix seconds).
pub fn set_target_last_list(target: &Target, unix_seconds: i64) {
    targets()
        .last_list
        .get_or_create(&target_labels(target))
        .set(unix_seconds);
}

/// A list, watch or liveness probe of `target` failed (it is retried with backoff).
pub fn target_watch_failure(target: &Target) {
    targets()
        .failures
        .get_or_create(&target_labels(target))
        .inc();
}

/// No ruleset targets `target` any more: its series go.
pub fn forget_target(target: &Target) {
    let labels = target_labels(target);
    let t = targets();
    t.up.remove(&labels);
    t.last_list.remove(&labels);
    t.failures.remove(&labels);
    t.current.remove(&labels);
    t.skipped.remove(&labels);
}
