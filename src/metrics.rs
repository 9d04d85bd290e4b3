//! Prometheus metrics, served at `/metrics`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::LazyLock;

type Labels = Vec<(&'static str, String)>;

struct Metrics {
    registry: Registry,
    rule_errors: Family<Labels, Counter>,
    object_events: Family<Labels, Counter>,
    watches: Gauge,
    api_requests: Family<Labels, Counter>,
    open_watches: Gauge,
    index_objects: Gauge,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut registry = Registry::with_prefix("ifo");
    let m = Metrics {
        registry: Registry::default(),
        rule_errors: Family::default(),
        object_events: Family::default(),
        watches: Gauge::default(),
        api_requests: Family::default(),
        open_watches: Gauge::default(),
        index_objects: Gauge::default(),
    };
    registry.register(
        "rule_evaluation_errors",
        "Rule, message, outcome, start-time and label expression errors",
        m.rule_errors.clone(),
    );
    registry.register(
        "object_events",
        "Object events evaluated, by target resource",
        m.object_events.clone(),
    );
    registry.register(
        "resource_watches",
        "Resource types currently watched",
        m.watches.clone(),
    );
    registry.register(
        "api_requests",
        "API requests served, by verb and HTTP code",
        m.api_requests.clone(),
    );
    registry.register(
        "api_open_watches",
        "Watches open on the live API",
        m.open_watches.clone(),
    );
    registry.register(
        "operations",
        "Operations held in memory (active and retained completed)",
        m.index_objects.clone(),
    );
    Metrics { registry, ..m }
});

pub fn rule_error(ruleset: &str) {
    METRICS
        .rule_errors
        .get_or_create(&vec![("ruleset", ruleset.to_string())])
        .inc();
}

pub fn object_event(target: &str) {
    METRICS
        .object_events
        .get_or_create(&vec![("target", target.to_string())])
        .inc();
}

pub fn set_watches(n: usize) {
    METRICS.watches.set(n as i64);
}

pub fn api_request(verb: &str, code: u16) {
    METRICS
        .api_requests
        .get_or_create(&vec![
            ("verb", verb.to_string()),
            ("code", code.to_string()),
        ])
        .inc();
}

pub fn open_watches(delta: i64) {
    METRICS.open_watches.inc_by(delta);
}

pub fn set_operations(n: usize) {
    METRICS.index_objects.set(n as i64);
}

/// The text exposition of every metric.
pub fn render() -> String {
    let mut out = String::new();
    encode(&mut out, &METRICS.registry).expect("writing to a String cannot fail");
    out
}
