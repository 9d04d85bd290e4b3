//! What a drain tool asks during the pod churn: reads of random nodes' gates, and dry-run
//! evictions judged by the maintenance guard, both through kube-apiserver.

use crate::flips::{GATES, clear_condition};
use crate::pace::{InFlight, paced};
use crate::pods::Layout;
use crate::stats::Summary;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, EvictParams, PostParams};
use kube::core::Request;
use serde::Serialize;
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Probes in flight at once.
const CONCURRENCY: usize = 16;

/// The gate reads of a phase.
#[derive(Debug, Default, Serialize)]
pub(crate) struct GateReads {
    pub rate_requested: f64,
    pub rate_achieved: f64,
    pub reads: u64,
    /// By the `Clear` condition read.
    pub clear: u64,
    pub held: u64,
    pub unknown: u64,
    /// Why the first read that answered `Unknown` did (its message).
    pub first_unknown: Option<String>,
    /// Reads that failed (no answer, or not a gate).
    pub failed: u64,
    /// Request → answer.
    pub latency: Summary,
}

/// The guard's decisions of a phase.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Evictions {
    pub rate_requested: f64,
    pub rate_achieved: f64,
    /// Let through (201), held (429), and anything else.
    pub allowed: u64,
    pub held: u64,
    pub failed: u64,
    /// Request → answer, through kube-apiserver and the guard's webhook.
    pub latency: Summary,
}

/// One probe's outcome, and how long it took.
type Outcomes<T> = Arc<Mutex<Vec<(T, Duration)>>>;

/// Runs `probe` on random nodes `rate` times a second for `duration`, `CONCURRENCY` at a time,
/// and returns each outcome with its time, and the rate achieved.
async fn probe_nodes<T, F, Fut>(
    layout: Layout,
    rate: f64,
    duration: Duration,
    probe: F,
) -> (Vec<(T, Duration)>, f64)
where
    T: Send + 'static,
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = T> + Send + 'static,
{
    let in_flight = InFlight::new(CONCURRENCY);
    let outcomes: Outcomes<T> = Arc::default();
    let achieved = paced(rate, duration, |_| {
        let request = probe(fastrand::usize(..layout.nodes));
        let (in_flight, outcomes) = (&in_flight, outcomes.clone());
        async move {
            in_flight
                .spawn(async move {
                    let sent = Instant::now();
                    let outcome = request.await;
                    outcomes.lock().unwrap().push((outcome, sent.elapsed()));
                })
                .await;
        }
    })
    .await;
    in_flight.drain().await;
    let outcomes = std::mem::take(&mut *outcomes.lock().unwrap());
    (outcomes, achieved)
}

/// Reads random nodes' gates `rate` times a second for `duration`.
pub(crate) async fn gate_reads(
    client: kube::Client,
    layout: Layout,
    rate: f64,
    duration: Duration,
) -> GateReads {
    if rate <= 0.0 {
        return GateReads::default();
    }
    let (outcomes, achieved) = probe_nodes(layout, rate, duration, |n| {
        let client = client.clone();
        let request =
            Request::new(GATES).get(&format!("node.{}", layout.node(n)), &Default::default());
        async move {
            let gate: Value = client.request(request.ok()?).await.ok()?;
            let (clear, why) = clear_condition(&gate);
            Some((clear.to_string(), why.to_string()))
        }
    })
    .await;
    let mut reads = GateReads {
        rate_requested: rate,
        rate_achieved: achieved,
        reads: outcomes.len() as u64,
        ..GateReads::default()
    };
    for (read, _) in &outcomes {
        match read.as_ref().map(|(clear, why)| (clear.as_str(), why)) {
            Some(("True", _)) => reads.clear += 1,
            Some(("False", _)) => reads.held += 1,
            Some(("Unknown", why)) => {
                reads.unknown += 1;
                reads.first_unknown.get_or_insert_with(|| why.clone());
            }
            _ => reads.failed += 1,
        }
    }
    reads.latency = Summary::of(outcomes.into_iter().map(|(_, t)| t).collect());
    reads
}

/// Asks kube-apiserver to evict (dry run) the flipping pod of a random node `rate` times a
/// second for `duration`; the guard's webhook judges each. `client` must not retry a 429.
pub(crate) async fn evictions(
    client: kube::Client,
    layout: Layout,
    rate: f64,
    duration: Duration,
) -> Evictions {
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        }),
        post_options: PostParams {
            dry_run: true,
            ..PostParams::default()
        },
    };
    let (outcomes, achieved) = probe_nodes(layout, rate, duration, |n| {
        let (namespace, name) = layout.flipping_pod(n);
        let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
        let params = params.clone();
        async move {
            match api.evict(&name, &params).await {
                Ok(_) => Some(true),
                Err(kube::Error::Api(s)) if s.code == 429 => Some(false),
                Err(e) => {
                    tracing::warn!(pod = %name, error = %e, "an eviction failed");
                    None
                }
            }
        }
    })
    .await;
    let mut evictions = Evictions {
        rate_requested: rate,
        rate_achieved: achieved,
        ..Evictions::default()
    };
    for (allowed, _) in &outcomes {
        match allowed {
            Some(true) => evictions.allowed += 1,
            Some(false) => evictions.held += 1,
            None => evictions.failed += 1,
        }
    }
    evictions.latency = Summary::of(outcomes.into_iter().map(|(_, t)| t).collect());
    evictions
}
