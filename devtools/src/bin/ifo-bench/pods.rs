//! The pod workload (`--pods`): Node objects, pods bound to them across namespaces, churn of
//! pod updates, and pods that start holding their node on random nodes, under the shipped pod
//! rules (`pod-rules`, and `protected-pod-rules` granted to every namespace of the workload).
//!
//! No scheduler runs: the benchmark binds each pod to its node (`/binding`) as the scheduler
//! would. With `--kwok`, KWOK runs the nodes and starts the pods (see `kwok.rs`); without it no
//! kubelet runs either: Nodes are API objects only, created with their status, and the benchmark
//! writes each pod's status (`/status`) as a kubelet would, so that the rules see pods the
//! scheduler placed that have started. Pod `i` is bound to node `i mod nodes` and lives in namespace
//! `i mod namespaces`; the first pod of each node is the one that flips (see [`crate::flips`]):
//! on even nodes a Job's pod created `Pending` (not started), on odd nodes a running pod that
//! gets the protect label. The other pods run, hold nothing, and take the churn.

use crate::pace::{InFlight, paced};
use anyhow::{Context, Result, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// The options of the pod workload.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct PodArgs {
    /// Run the pod workload instead of the VirtualMachines: --nodes Node objects,
    /// --pod-count pods bound to them across --namespaces namespaces, pod updates at --rate
    /// for --duration, and pods starting to hold their node (--flips) on random nodes, under
    /// the shipped pod rules; the guard judges dry-run evictions meanwhile (--evictions).
    #[arg(long, conflicts_with_all = ["kubeconfig", "scale", "compare_persist", "persist", "all_rules", "flood"])]
    pub pods: bool,
    /// Pods (--pods), bound round robin to the nodes; at least one more than --nodes.
    #[arg(long, default_value_t = 20_000)]
    pub pod_count: usize,
    /// Node objects (--pods).
    #[arg(long, default_value_t = 1_000)]
    pub nodes: usize,
    /// Namespaces the pods are spread over (--pods), all of them granted protection in
    /// `protected-pod-rules`.
    #[arg(long, default_value_t = 200)]
    pub namespaces: usize,
    /// Flips a second (--pods): on a random node whose gate is clear, its flipping pod starts
    /// holding it (a running pod gets the protect label, or a Job's pending pod starts), and
    /// stops after --hold.
    #[arg(long, default_value_t = 2.0)]
    pub flips: f64,
    /// How long a flipped pod holds its node (--pods).
    #[arg(long, default_value = "2s", value_parser = crate::duration)]
    pub hold: Duration,
    /// Reads a second of a random node's gate (`GET maintenancegates/node.<n>` through
    /// kube-apiserver) during the churn (--pods); 0: none.
    #[arg(long, default_value_t = 10.0)]
    pub gate_reads: f64,
    /// Dry-run evictions a second of a random node's flipping pod through kube-apiserver,
    /// judged by the maintenance guard, during the churn (--pods); 0: none, and the guard off.
    #[arg(long, default_value_t = 5.0)]
    pub evictions: f64,
    /// Requests in flight at once while creating the namespaces, nodes and pods (--pods).
    #[arg(long, default_value_t = 64)]
    pub setup_concurrency: usize,
    /// Jobs started a second (--pods --kwok): a Job's pod created in a random namespace of the
    /// workload and bound to one of the last tenth of the nodes (which no flip picks); KWOK
    /// runs it 20 to 60 s to `Succeeded`, and the benchmark deletes it 90 s after it was
    /// created. While it runs it holds its node (`JobRunning`). 0: none.
    #[arg(long, default_value_t = 0.0, requires = "kwok")]
    pub jobs: f64,
    /// Run the nodes and pods with KWOK (--pods): the nodes keep Leases and report their
    /// status, KWOK starts the pods, as on a real cluster (see `kwok.rs`). Without it the Nodes
    /// are objects the benchmark writes once, and it writes each pod's status itself.
    #[arg(long)]
    pub kwok: bool,
    /// KWOK's workers for each of its pools (--kwok): pods' stages, nodes' stages, nodes'
    /// Leases. KWOK's own default, 4, falls behind beyond some 20,000 pods.
    #[arg(long, default_value_t = 4, requires = "kwok", value_parser = clap::value_parser!(u16).range(1..))]
    pub kwok_workers: u16,
    /// Measure the server's cold start instead of a phase (--pods): the pods grow to each of
    /// these counts in turn (e.g. `20000,80000,150000`), and at each the server is started
    /// again --cold-starts times with every pod there; the report gives each start, beside
    /// kube-apiserver streaming the same pods to a client that only reads them, and the
    /// growth per 10,000 pods.
    #[arg(
        long,
        value_delimiter = ',',
        requires = "pods",
        conflicts_with = "kwok"
    )]
    pub cold_start: Vec<usize>,
    /// Starts measured at each count of --cold-start.
    #[arg(long, default_value_t = 2, requires = "cold_start", value_parser = clap::value_parser!(u16).range(1..))]
    pub cold_starts: u16,
}

/// The label kube-apiserver's watch of the flipping pods selects them by.
pub(crate) const FLIP_LABEL: &str = "bench.ifo.kubevirt.io/flip";

/// The label (and annotation) of a protected pod.
pub(crate) const PROTECT: &str = "ifo.kubevirt.io/protect-from-maintenance";

/// The churn's updates in flight at once.
const CHURN_CONCURRENCY: usize = 64;

/// Where each pod is: its name, namespace and node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    pub nodes: usize,
    pub pods: usize,
    pub namespaces: usize,
    /// The last nodes, where Jobs run (`--jobs`) and which no flip picks, so that a Job's
    /// holding never mixes with a flip's timing.
    pub job_nodes: usize,
}

/// What a node's flipping pod does to hold it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A Job's pod that starts (`pod-rules`' `JobRunning`).
    Job,
    /// A running pod labelled protected (`protected-pod-rules`' `Protected`).
    Protected,
}

impl Layout {
    pub(crate) fn node(&self, n: usize) -> String {
        format!("ifo-bench-node-{n:05}")
    }

    /// The node index of a node name of the workload.
    pub(crate) fn node_index(&self, name: &str) -> Option<usize> {
        let n: usize = name.strip_prefix("ifo-bench-node-")?.parse().ok()?;
        (n < self.nodes).then_some(n)
    }

    /// The nodes flips pick from: all but the Jobs' (`0..flipped_nodes()`).
    pub(crate) fn flipped_nodes(&self) -> usize {
        self.nodes - self.job_nodes
    }

    pub(crate) fn namespace(&self, k: usize) -> String {
        format!("ifo-bench-pods-{k:04}")
    }

    pub(crate) fn pod(&self, i: usize) -> String {
        format!("pod-{i:06}")
    }

    pub(crate) fn namespace_of(&self, i: usize) -> String {
        self.namespace(i % self.namespaces)
    }

    /// The pod that flips on node `n` (the first one bound to it).
    pub(crate) fn flipping_pod(&self, n: usize) -> (String, String) {
        (self.namespace_of(n), self.pod(n))
    }

    pub(crate) fn kind(&self, n: usize) -> Kind {
        if n.is_multiple_of(2) {
            Kind::Job
        } else {
            Kind::Protected
        }
    }

    /// Pod `i` as created (not bound yet); a Job's pod for the flipping pods of even nodes.
    fn manifest(&self, i: usize) -> Value {
        let mut metadata = json!({"name": self.pod(i), "namespace": self.namespace_of(i)});
        if i < self.nodes {
            metadata["labels"] = json!({FLIP_LABEL: "true"});
            if self.kind(i) == Kind::Job {
                metadata["ownerReferences"] = json!([{"apiVersion": "batch/v1", "kind": "Job",
                    "name": format!("job-{i:05}"), "uid": uuid_of(i), "controller": true}]);
            }
        }
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
    }

    /// The scheduler's binding of pod `i` to its node.
    fn binding(&self, i: usize) -> Value {
        json!({"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": self.pod(i), "namespace": self.namespace_of(i)},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.node(i % self.nodes)}})
    }
}

/// A fixed uid of the `i`-th Job (no Job object exists: no controller runs to collect its pods).
fn uuid_of(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

/// What a kubelet writes once the pod's container runs.
pub(crate) fn running_status() -> Value {
    let now = now();
    json!({"status": {"phase": "Running", "startTime": now,
        "containerStatuses": [container(json!({"running": {"startedAt": now}}), true)]}})
}

/// The time now, as Kubernetes writes it (whole seconds).
fn now() -> String {
    let t = jiff::Timestamp::now();
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// What a kubelet writes while the pod's image is being pulled: nothing has started.
pub(crate) fn pending_status() -> Value {
    json!({"status": {"phase": "Pending",
        "containerStatuses": [container(json!({"waiting": {"reason": "ContainerCreating"}}), false)]}})
}

fn container(state: Value, started: bool) -> Value {
    json!({"name": "c", "image": "registry.k8s.io/pause:3.10", "imageID": "", "ready": started,
        "started": started, "restartCount": 0, "state": state})
}

/// How long setting the workload up took.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Setup {
    /// Namespaces and Node objects created.
    pub namespaces_and_nodes_seconds: f64,
    /// Every pod created, bound to its node, and (without KWOK) its status written (all but
    /// the Jobs' flipping pods run).
    pub pods_seconds: f64,
    /// Pods created (bound, and without KWOK their status written) per second.
    pub pods_per_second: f64,
    /// With KWOK: from the first pod created until KWOK had started every pod that is not the
    /// benchmark's (`None` without KWOK).
    pub started_by_kwok_seconds: Option<f64>,
    /// From the last pod written until a first flip was seen on its node's gate: the server
    /// has evaluated everything the setup changed (`None`: not within 300 s).
    pub caught_up_seconds: Option<f64>,
    /// The server over the creation of the pods (it evaluates each as it is created).
    pub server: Option<crate::usage::Usage>,
}

/// Creates the pods `range` (and, when it starts at the first, the namespaces and the nodes),
/// `concurrency` requests at a time; with `kwok`, waits until KWOK has started every pod that
/// is not the benchmark's.
pub(crate) async fn create(
    client: &kube::Client,
    layout: Layout,
    range: std::ops::Range<usize>,
    concurrency: usize,
    kwok: bool,
) -> Result<Setup> {
    if layout.pods <= layout.nodes || layout.nodes == 0 || layout.namespaces == 0 {
        bail!("--pods needs --nodes and --namespaces positive, and --pod-count above --nodes");
    }
    let began = Instant::now();
    if range.start == 0 {
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let nodes: Api<Node> = Api::all(client.clone());
        futures::stream::iter(0..layout.namespaces)
            .map(|k| {
                let namespaces = namespaces.clone();
                async move {
                    let ns =
                        serde_json::from_value(json!({"metadata": {"name": layout.namespace(k)}}))?;
                    created(namespaces.create(&PostParams::default(), &ns).await)
                        .with_context(|| format!("creating namespace {}", layout.namespace(k)))
                }
            })
            .buffer_unordered(concurrency)
            .try_collect::<()>()
            .await?;
        futures::stream::iter(0..layout.nodes)
            .map(|n| {
                let nodes = nodes.clone();
                async move {
                    let node = serde_json::from_value(node_manifest(&layout.node(n), kwok))?;
                    created(nodes.create(&PostParams::default(), &node).await)
                        .with_context(|| format!("creating node {}", layout.node(n)))
                }
            })
            .buffer_unordered(concurrency)
            .try_collect::<()>()
            .await?;
    }
    let namespaces_and_nodes = began.elapsed();
    eprintln!(
        "{} namespaces and {} nodes there after {:.1} s; creating pods {} to {} ...",
        layout.namespaces,
        layout.nodes,
        namespaces_and_nodes.as_secs_f64(),
        range.start,
        range.end
    );
    let pods_began = Instant::now();
    let done = AtomicU64::new(0);
    let count = range.len();
    futures::stream::iter(range)
        .map(|i| {
            let (client, done) = (client.clone(), &done);
            async move {
                let api: Api<Pod> = Api::namespaced(client, &layout.namespace_of(i));
                let pod: Pod = serde_json::from_value(layout.manifest(i))?;
                created(api.create(&PostParams::default(), &pod).await)
                    .with_context(|| format!("creating pod {}", layout.pod(i)))?;
                // Not `spec.nodeName` written by the benchmark: the shipped rules hold nothing
                // for a pod its creator placed.
                api.create_subresource::<_, Value>(
                    "binding",
                    &layout.pod(i),
                    &PostParams::default(),
                    &layout.binding(i),
                )
                .await
                .with_context(|| format!("binding pod {}", layout.pod(i)))?;
                // The Jobs' flipping pods stay as created: Pending, nothing started. KWOK
                // starts the pods that do not flip.
                let flipping = i < layout.nodes;
                if !((flipping && layout.kind(i) == Kind::Job) || (kwok && !flipping)) {
                    api.patch_status(
                        &layout.pod(i),
                        &PatchParams::default(),
                        &Patch::Merge(&running_status()),
                    )
                    .await
                    .with_context(|| format!("writing the status of pod {}", layout.pod(i)))?;
                }
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_multiple_of(10_000) {
                    eprintln!("  {n} pods in {:.0} s", pods_began.elapsed().as_secs_f64());
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await?;
    let pods = pods_began.elapsed().as_secs_f64();
    let started_by_kwok_seconds = if kwok {
        eprintln!(
            "{} pods created and bound; waiting for KWOK to start them ...",
            layout.pods
        );
        started_by_kwok(client, layout).await?;
        Some(pods_began.elapsed().as_secs_f64())
    } else {
        None
    };
    Ok(Setup {
        namespaces_and_nodes_seconds: namespaces_and_nodes.as_secs_f64(),
        pods_seconds: pods,
        pods_per_second: count as f64 / pods,
        started_by_kwok_seconds,
        caught_up_seconds: None,
        server: None,
    })
}

/// How long KWOK may take to start the pods after the last one was bound: 10 minutes, or 50
/// pods a second if that is longer (it started about 100 a second on 2 cores).
fn kwok_start(layout: Layout) -> Duration {
    Duration::from_secs(600.max(layout.pods as u64 / 50))
}

/// Waits until no pod but the benchmark's own flipping ones is `Pending`.
async fn started_by_kwok(client: &kube::Client, layout: Layout) -> Result<()> {
    let pods: Api<Pod> = Api::all(client.clone());
    let pending = kube::api::ListParams::default()
        .fields("status.phase=Pending")
        .labels(&format!("!{FLIP_LABEL}"))
        .limit(1);
    let deadline = Instant::now() + kwok_start(layout);
    loop {
        if pods.list_metadata(&pending).await?.items.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "KWOK has not started every pod within {:?} (see kwok.log)",
                kwok_start(layout)
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// A create's answer, an object that is already there counting as created.
fn created<T>(answer: kube::Result<T>) -> kube::Result<()> {
    match answer {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// A Node as a kubelet registers it: Ready, with its capacity; for KWOK, handed to it with no
/// status (KWOK registers it Ready).
fn node_manifest(name: &str, kwok: bool) -> Value {
    if kwok {
        return json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name},
                "annotations": {crate::kwok::NODE_ANNOTATION: crate::kwok::NODE_ANNOTATION_VALUE}}});
    }
    let resources = json!({"cpu": "16", "memory": "64Gi", "pods": "110"});
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now(), "lastTransitionTime": now()}]}})
}

/// What the churn did.
#[derive(Debug, Default, Serialize)]
pub(crate) struct Churn {
    pub rate_requested: f64,
    pub rate_achieved: f64,
    pub updates: u64,
    pub failed: u64,
    /// Request → response of each update (kube-apiserver and etcd).
    pub update_latency: crate::stats::Summary,
}

/// Updates random pods that hold nothing (an annotation, as controllers and kubelets keep
/// changing pods) `rate` times a second for `duration`.
pub(crate) async fn churn(
    client: kube::Client,
    layout: Layout,
    rate: f64,
    duration: Duration,
) -> Churn {
    let in_flight = InFlight::new(CHURN_CONCURRENCY);
    let failed = Arc::new(AtomicU64::new(0));
    let latencies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let achieved = paced(rate, duration, |n| {
        let i = fastrand::usize(layout.nodes..layout.pods);
        let api: Api<Pod> = Api::namespaced(client.clone(), &layout.namespace_of(i));
        let (failed, latencies) = (failed.clone(), latencies.clone());
        let patch =
            json!({"metadata": {"annotations": {"bench.ifo.kubevirt.io/tick": n.to_string()}}});
        let in_flight = &in_flight;
        async move {
            in_flight
                .spawn(async move {
                    let sent = Instant::now();
                    let answer = api
                        .patch(
                            &layout.pod(i),
                            &PatchParams::default(),
                            &Patch::Merge(&patch),
                        )
                        .await;
                    latencies.lock().unwrap().push(sent.elapsed());
                    if let Err(e) = answer {
                        tracing::warn!(pod = %layout.pod(i), error = %e, "a pod update failed");
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .await;
        }
    })
    .await;
    in_flight.drain().await;
    let latencies = std::mem::take(&mut *latencies.lock().unwrap());
    Churn {
        rate_requested: rate,
        rate_achieved: achieved,
        updates: latencies.len() as u64,
        failed: failed.load(Ordering::Relaxed),
        update_latency: crate::stats::Summary::of(latencies),
    }
}
