//! Prometheus metrics, served at `/metrics`.

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
    watches: Gauge,
    open_watches: Gauge,
    operations: Gauge,
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
    let operations = register(
        &mut r,
        "operations",
        "Operations held in memory (active and retained completed)",
        Gauge::default(),
    );
    Metrics {
        registry: r,
        rule_errors,
        cost_exceeded,
        suspensions,
        object_events,
        watches,
        open_watches,
        operations,
    }
});

pub fn rule_error(ruleset: &str) {
    METRICS
        .rule_errors
        .get_or_create(&vec![("ruleset", ruleset.to_string())])
        .inc();
}

pub fn cost_exceeded(ruleset: &str) {
    METRICS
        .cost_exceeded
        .get_or_create(&vec![("ruleset", ruleset.to_string())])
        .inc();
}

pub fn ruleset_suspended(ruleset: &str) {
    METRICS
        .suspensions
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

pub fn open_watches(delta: i64) {
    METRICS.open_watches.inc_by(delta);
}

pub fn set_operations(n: usize) {
    METRICS.operations.set(n as i64);
}

/// The text exposition of every metric.
pub fn render() -> String {
    let mut out = String::new();
    encode(&mut out, &METRICS.registry).expect("writing to a String cannot fail");
    out
}
