//! Jobs that start and finish (`--pods --kwok --jobs R`): `R` times a second a Job's pod is
//! created in a random namespace of the workload and bound to a random one of the Jobs' nodes
//! (the last tenth, which no flip picks). KWOK starts it, runs it 20 to 60 s and writes it
//! `Succeeded` (`tests/cluster/kwok/stages.yaml`); the benchmark deletes it 90 s after it was
//! created, and KWOK removes it, as a Job's TTL and a kubelet would. While it runs it holds its
//! node (`pod-rules`' `JobRunning`), so the nodes' gates change as on a cluster where Jobs come
//! and go.

use crate::pace::{InFlight, paced};
use crate::pods::Layout;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde::Serialize;
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// How long after its creation a Job's pod is deleted: past the longest run KWOK gives it.
const DELETE_AFTER: Duration = Duration::from_secs(90);

/// Requests in flight at once.
const CONCURRENCY: usize = 16;

/// The label of the Jobs' pods.
const JOB_LABEL: &str = "bench.ifo.kubevirt.io/job";

/// What the Jobs did.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Jobs {
    pub rate_requested: f64,
    pub rate_achieved: f64,
    /// Job pods created and bound.
    pub started: u64,
    /// Job pods deleted (90 s after they were created).
    pub deleted: u64,
    /// Creations, bindings and deletions that failed.
    pub failed: u64,
    /// The Jobs' pods listed at the end, by phase, those deleted but not yet removed as
    /// `Terminating`: what KWOK made of them (`None`: they could not be listed).
    pub phases_at_end: Option<BTreeMap<String, u64>>,
}

/// Starts Jobs `rate` times a second for `duration` (a rate of 0 starts none), and deletes each
/// one's pod 90 s after it was created (those created in the last 90 s are left).
pub(crate) async fn run(
    client: kube::Client,
    layout: Layout,
    rate: f64,
    duration: Duration,
) -> Jobs {
    if rate <= 0.0 {
        return Jobs::default();
    }
    let in_flight = InFlight::new(CONCURRENCY);
    let (started, deleted, failed) = (
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut alive: VecDeque<(Instant, String, String)> = VecDeque::new();
    let run_id = std::process::id();
    let achieved = paced(rate, duration, |n| {
        let namespace = layout.namespace(fastrand::usize(..layout.namespaces));
        let name = format!("job-{run_id}-{n:06}");
        let node = layout.node(layout.flipped_nodes() + fastrand::usize(..layout.job_nodes));
        let mut due = Vec::new();
        while alive.front().is_some_and(|(at, _, _)| at.elapsed() >= DELETE_AFTER) {
            due.extend(alive.pop_front());
        }
        alive.push_back((Instant::now(), namespace.clone(), name.clone()));
        let (client, in_flight) = (client.clone(), &in_flight);
        let (started, deleted, failed) = (started.clone(), deleted.clone(), failed.clone());
        async move {
            for (_, namespace, name) in due {
                let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
                let (deleted, failed) = (deleted.clone(), failed.clone());
                in_flight
                    .spawn(async move {
                        match api.delete(&name, &DeleteParams::default()).await {
                            Ok(_) => deleted.fetch_add(1, Ordering::Relaxed),
                            // Its start failed (counted then).
                            Err(kube::Error::Api(s)) if s.code == 404 => 0,
                            Err(e) => {
                                tracing::warn!(pod = %name, error = %e, "deleting a Job's pod failed");
                                failed.fetch_add(1, Ordering::Relaxed)
                            }
                        };
                    })
                    .await;
            }
            let api: Api<Pod> = Api::namespaced(client, &namespace);
            in_flight
                .spawn(async move {
                    match start(&api, &name, &node, n).await {
                        Ok(()) => started.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            tracing::warn!(pod = %name, error = %e, "starting a Job's pod failed");
                            failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                })
                .await;
        }
    })
    .await;
    in_flight.drain().await;
    Jobs {
        rate_requested: rate,
        rate_achieved: achieved,
        started: started.load(Ordering::Relaxed),
        deleted: deleted.load(Ordering::Relaxed),
        failed: failed.load(Ordering::Relaxed),
        phases_at_end: phases(&client).await,
    }
}

/// The Jobs' pods by phase.
async fn phases(client: &kube::Client) -> Option<BTreeMap<String, u64>> {
    let pods: Api<Pod> = Api::all(client.clone());
    let list = pods
        .list(&ListParams::default().labels(JOB_LABEL))
        .await
        .inspect_err(|e| tracing::warn!(error = %e, "listing the Jobs' pods failed"))
        .ok()?;
    let mut phases = BTreeMap::new();
    for pod in list.items {
        let phase = if pod.metadata.deletion_timestamp.is_some() {
            "Terminating".to_string()
        } else {
            pod.status.and_then(|s| s.phase).unwrap_or_default()
        };
        *phases.entry(phase).or_default() += 1;
    }
    Some(phases)
}

/// Creates the `n`-th Job's pod and binds it to `node`, as the Job controller and the scheduler
/// would.
async fn start(api: &Api<Pod>, name: &str, node: &str, n: u64) -> kube::Result<()> {
    let pod: Pod = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {JOB_LABEL: "true"}, "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job",
            "name": name, "uid": format!("00000000-0000-4000-9000-{n:012}"), "controller": true}]},
        "spec": {"restartPolicy": "Never",
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}))
    .map_err(kube::Error::SerdeError)?;
    api.create(&PostParams::default(), &pod).await?;
    let binding = json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node}});
    api.create_subresource::<_, Value>("binding", name, &PostParams::default(), &binding)
        .await?;
    Ok(())
}
