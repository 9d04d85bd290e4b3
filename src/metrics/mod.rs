//! Prometheus metrics, served at `/metrics`.
//!
//! One file per concern, each declaring its series and the functions the pipeline calls:
//! `operations` (what is in flight), `gates` (the maintenance gates' verdicts), `overrides` (the nodes' maintenance overrides in force), `targets` (the watches feeding it),
//! `evaluation` (the rulesets running on each event), `api` (the live API), `admission` (the
//! admission doors), `auth` (reviews and their cache), `persist` (`--persist`), `leader` (`--leader-elect`), `certificate` (a serving certificate made here), `progress` (stalled operations, learned durations), `tasks` (background tasks that failed), `startup` (how long the initial sync took), `process` (CPU, memory, file descriptors).
//!
//! Cardinality is bounded by construction: label values come from the rulesets, the watched
//! targets, fixed sets (verbs, codes, outcomes, reasons) or the operations in flight (series of
//! `ifo_operations_active` exist only while they count something). No label holds a subject's
//! name, a user or a path.

mod admission;
mod api;
mod auth;
mod certificate;
mod evaluation;
mod gates;
mod leader;
mod operations;
mod overrides;
mod persist;
mod process;
mod progress;
mod startup;
mod targets;
mod tasks;

pub use admission::{
    Answer as AdmissionAnswer, Door as AdmissionDoor, GuardReason, ReachResult,
    ReviewTimer as AdmissionTimer, guard_decision, guard_error, guard_event_dropped,
    guard_reach_checked,
};
pub use api::{
    RequestTimer, connection_displaced, connection_refused, open_watches, request_labels,
    watch_refused, watcher_cut,
};
pub use auth::{CacheLookup, Review, cache_lookup, review};
pub use certificate::{serving_certificate_failed, serving_certificate_kept};
pub use evaluation::{
    EvaluationLag, EvaluationTimer, cost_exceeded, evaluation_event_dropped, object_event,
    rule_error, ruleset_status_written, ruleset_suspended,
};
pub use gates::{GateSeries, serve_gates_from};
pub use leader::set_leader;
pub use operations::{operation_completed, serve_active_from, set_operations};
pub use overrides::{OverrideSeries, serve_overrides_from};
pub use persist::{persist_write, set_persist_pending};
pub use progress::{StalledCounts, serve_learned_from, set_stalled};
pub use startup::{StartStage, started};
pub use targets::{
    forget_target, set_target_detection, set_target_last_list, set_target_watch_up, set_watches,
    target_watch_failure,
};
pub use tasks::task_failed;

use parking_lot::RwLock;
use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};
use std::sync::LazyLock;

/// Label sets of the families: a name and a value per label.
type Labels = Vec<(&'static str, String)>;

/// A family of histograms sharing one set of buckets.
type Histograms = prometheus_client::metrics::family::Family<Labels, Histogram, fn() -> Histogram>;

struct Metrics {
    registry: Registry,
    operations: operations::Operations,
    targets: targets::Targets,
    evaluation: evaluation::Evaluation,
    api: api::Api,
    admission: admission::Admission,
    auth: auth::Auth,
    persist: persist::Persist,
    leader: leader::Leader,
    certificate: certificate::Certificate,
    progress: progress::Progress,
    tasks: tasks::Tasks,
    startup: startup::Startup,
    gates: std::sync::Arc<gates::GateSource>,
    overrides: std::sync::Arc<overrides::OverrideSource>,
}

/// Where series read at scrape time come from: what the running server installs (nothing
/// before it does).
pub(super) struct Scraped<T>(RwLock<Option<Source<T>>>);

/// What answers the series of a scrape.
type Source<T> = Box<dyn Fn() -> Vec<T> + Send + Sync>;

impl<T> Default for Scraped<T> {
    fn default() -> Self {
        Scraped(RwLock::new(None))
    }
}

impl<T> std::fmt::Debug for Scraped<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(std::any::type_name::<Self>())
    }
}

impl<T> Scraped<T> {
    /// The series read what `source` answers from now on.
    pub(super) fn serve_from(&self, source: impl Fn() -> Vec<T> + Send + Sync + 'static) {
        *self.0.write() = Some(Box::new(source));
    }

    /// What the source answers now (nothing before one is installed).
    fn read(&self) -> Vec<T> {
        self.0
            .read()
            .as_ref()
            .map_or_else(Vec::new, |source| source())
    }
}

/// Writes the gauge family `name` (`help`) read at scrape time: a series for each label set
/// and value of `series`.
fn encode_gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    series: impl IntoIterator<Item = (L, V)>,
) -> Result<(), std::fmt::Error> {
    let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in series {
        family.encode_family(&labels)?.encode_gauge(&value)?;
    }
    Ok(())
}

/// Registers `metric` and hands it back, so each metric is declared in one place.
fn register<M: Metric + Clone>(registry: &mut Registry, name: &str, help: &str, metric: M) -> M {
    registry.register(name, help, metric.clone());
    metric
}

static METRICS: LazyLock<Metrics> = LazyLock::new(|| {
    let mut root = Registry::default();
    // The process series keep their standard names (`process_*`), like every Go exporter's.
    root.register_collector(Box::new(process::Process));
    let r = root.sub_registry_with_prefix("ifo");
    let operations = operations::Operations::register(r);
    let targets = targets::Targets::register(r);
    let evaluation = evaluation::Evaluation::register(r);
    let api = api::Api::register(r);
    let admission = admission::Admission::register(r);
    let auth = auth::Auth::register(r);
    let persist = persist::Persist::register(r);
    let leader = leader::Leader::register(r);
    let certificate = certificate::Certificate::register(r);
    let progress = progress::Progress::default();
    r.register_collector(Box::new(progress.clone()));
    let tasks = tasks::Tasks::register(r);
    let startup = startup::Startup::register(r);
    let gates = std::sync::Arc::new(gates::GateSource::default());
    r.register_collector(Box::new(gates.clone()));
    let overrides = std::sync::Arc::new(overrides::OverrideSource::default());
    r.register_collector(Box::new(overrides.clone()));
    Metrics {
        registry: root,
        operations,
        targets,
        evaluation,
        api,
        admission,
        auth,
        persist,
        leader,
        certificate,
        progress,
        tasks,
        startup,
        gates,
        overrides,
    }
});

fn metrics() -> &'static Metrics {
    &METRICS
}

/// The text exposition of every metric.
pub fn render() -> String {
    let mut out = String::new();
    encode(&mut out, &METRICS.registry).expect("writing to a String cannot fail");
    out
}

#[cfg(test)]
mod tests;
