//! Prometheus metrics, served at `/metrics`.

use crate::ruleset::Target;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Metric, Registry};
use std::sync::LazyLock;

type Labels = Vec<(&'static str, String)>;

struct Metrics {
    registry: Registry,
    rule_errors: Family<Labels, Counter>,
    cost_exceeded: Family<Labels, Counter>,
    suspensions: Family<Labels, Counter>,
    object_events: Family<Labels, Counter>,
    events_dropped: Family<Labels, Counter>,
    watches: Gauge,
    open_watches: Gauge,
    watches_refused: Family<Labels, Counter>,
    watchers_cut: Family<Labels, Counter>,
    connections_refused: Counter,
    operations: Gauge,
    target_watch_up: Family<Labels, Gauge>,
    target_last_list: Family<Labels, Gauge>,
    target_watch_failures: Family<Labels, Counter>,
    persist_writes: Family<Labels, Counter>,
    persist_pending: Gauge,
    persist_oldest_pending: Gauge<f64, std::sync::atomic::AtomicU64>,
}

/// Registers `metric` and hands it back, so each metric is declared in one place.
fn register<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut r = Registry::with_prefix("ifo");
    let rule_errors = register(
        &mut r,
        "rule_evaluation_errors",
        "Rule, message, outcome, start-time and label expression errors",
        Family::default(),
    );
    let cost_exceeded = register(
        &mut r,
        "evaluation_cost_exceeded",
        "Evaluations of a ruleset on an object stopped (or ended late) for going over the cost budget",
        Family::default(),
    );
    let suspensions = register(
        &mut r,
        "ruleset_suspensions",
        "Rulesets suspended for going over the evaluation budget too often",
        Family::default(),
    );
    let events_dropped = register(
        &mut r,
        "evaluation_events_dropped",
        "Object events a ruleset's evaluation lane dropped because it was full (the ruleset fell far behind)",
        Family::default(),
    );
    let object_events = register(
        &mut r,
        "object_events",
        "Object events evaluated, by target resource",
        Family::default(),
    );
    let watches = register(
        &mut r,
        "resource_watches",
        "Resource types currently watched",
        Gauge::default(),
    );
    let open_watches = register(
        &mut r,
        "api_open_watches",
        "Watches open on the live API",
        Gauge::default(),
    );
    let watches_refused = register(
        &mut r,
        "api_watches_refused",
        "Watches refused with 429 because a limit was reached, by limit (total, user)",
        Family::default(),
    );
    let watchers_cut = register(
        &mut r,
        "api_watchers_cut",
        "Watches the server ended early, by reason (lagging: fell behind the event stream; stalled: stopped reading)",
        Family::default(),
    );
    let connections_refused = register(
        &mut r,
        "connections_refused",
        "Client connections closed at once because MAX_CONNECTIONS were open",
        Counter::default(),
    );
    let operations = register(
        &mut r,
        "operations",
        "Operations held in memory (active and retained completed)",
        Gauge::default(),
    );
    let target_watch_up = register(
        &mut r,
        "target_watch_up",
        "1 while every watch of the target is current, 0 while any is starting, failing or stalled",
        Family::default(),
    );
    let target_last_list = register(
        &mut r,
        "target_last_list_timestamp_seconds",
        "When a list of the target last completed (Unix seconds)",
        Family::default(),
    );
    let target_watch_failures = register(
        &mut r,
        "target_watch_failures",
        "Failed lists, watches and liveness probes of the target",
        Family::default(),
    );
    let persist_writes = register(
        &mut r,
        "persist_writes",
        "Writes of persisted InFlightOperation copies (--persist), by verb (create, update, delete, get) and result (ok, conflict, not_found, foreign, error)",
        Family::default(),
    );
    let persist_pending = register(
        &mut r,
        "persist_pending_operations",
        "Operations whose persisted copy is not written yet (--persist)",
        Gauge::default(),
    );
    let persist_oldest_pending = register(
        &mut r,
        "persist_oldest_pending_seconds",
        "How long the operation waiting longest for its persisted copy has waited (--persist)",
        Gauge::default(),
    );
    Metrics {
        registry: r,
        persist_writes,
        persist_pending,
        persist_oldest_pending,
        target_watch_up,
        target_last_list,
        target_watch_failures,
        rule_errors,
        cost_exceeded,
        suspensions,
        object_events,
        events_dropped,
        watches,
        open_watches,
        watches_refused,
        watchers_cut,
        connections_refused,
        operations,
    }
});

/// A rule, message, outcome, start-time or label expression of `ruleset` failed.
pub fn rule_error(ruleset: &str) {
    METRICS
        .rule_errors
        .get_or_create(&vec![("ruleset", ruleset.to_string())])
        .inc();
}

/// An evaluation of `ruleset` went over the cost budget.
pub fn cost_exceeded(ruleset: &str) {
    METRICS
        .cost_exceeded
        .get_or_create(&vec![("ruleset", ruleset.to_string())])
        .inc();
}

/// `ruleset` was suspended for going over the budget too often.
pub fn ruleset_suspended(ruleset: &str) {
    METRICS
        .suspensions
        .get_or_create(&vec![("ruleset", ruleset.to_string())])
        .inc();
}

/// An object event for `ruleset` was dropped because its evaluation queue was full.
pub fn evaluation_event_dropped(ruleset: &str) {
    METRICS
        .events_dropped
        .get_or_create(&vec![("ruleset", ruleset.to_string())])
        .inc();
}

/// A watch event of `target` (a resource) reached evaluation.
pub fn object_event(target: &str) {
    METRICS
        .object_events
        .get_or_create(&vec![("target", target.to_string())])
        .inc();
}

/// The number of target resources watched.
pub fn set_watches(n: usize) {
    METRICS.watches.set(n as i64);
}

/// Watches of our API opened (+1) or closed (-1).
pub fn open_watches(delta: i64) {
    METRICS.open_watches.inc_by(delta);
}

/// A watch of our API was refused at `limit`.
pub fn watch_refused(limit: &'static str) {
    METRICS
        .watches_refused
        .get_or_create(&vec![("limit", limit.to_string())])
        .inc();
}

/// A watcher of our API was ended by the server for `reason`.
pub fn watcher_cut(reason: &'static str) {
    METRICS
        .watchers_cut
        .get_or_create(&vec![("reason", reason.to_string())])
        .inc();
}

/// A connection was refused at the connection limit.
pub fn connection_refused() {
    METRICS.connections_refused.inc();
}

/// The number of operations the index holds.
pub fn set_operations(n: usize) {
    METRICS.operations.set(n as i64);
}

/// A write of a persisted copy ended with `result`.
pub fn persist_write(verb: &'static str, result: &'static str) {
    METRICS
        .persist_writes
        .get_or_create(&vec![
            ("verb", verb.to_string()),
            ("result", result.to_string()),
        ])
        .inc();
}

/// Operations with a write of their persisted copy left, and the longest wait among them.
pub fn set_persist_pending(operations: usize, oldest: std::time::Duration) {
    METRICS.persist_pending.set(operations as i64);
    METRICS.persist_oldest_pending.set(oldest.as_secs_f64());
}

fn target_labels(target: &Target) -> Labels {
    vec![
        ("group", target.group.clone()),
        ("version", target.version.clone()),
        ("resource", target.resource.clone()),
    ]
}

/// Whether the watch of `target` is established and current.
pub fn set_target_watch_up(target: &Target, up: bool) {
    METRICS
        .target_watch_up
        .get_or_create(&target_labels(target))
        .set(i64::from(up));
}

/// When the watch of `target` last listed successfully (Unix seconds).
pub fn set_target_last_list(target: &Target, unix_seconds: i64) {
    METRICS
        .target_last_list
        .get_or_create(&target_labels(target))
        .set(unix_seconds);
}

/// The watch of `target` failed (it is retried with backoff).
pub fn target_watch_failure(target: &Target) {
    METRICS
        .target_watch_failures
        .get_or_create(&target_labels(target))
        .inc();
}

/// No ruleset targets `target` any more: its series go.
pub fn forget_target(target: &Target) {
    let labels = target_labels(target);
    METRICS.target_watch_up.remove(&labels);
    METRICS.target_last_list.remove(&labels);
    METRICS.target_watch_failures.remove(&labels);
}

/// The text exposition of every metric.
pub fn render() -> String {
    let mut out = String::new();
    encode(&mut out, &METRICS.registry).expect("writing to a String cannot fail");
    out
}
