//! `ifo-guard-bench`: what the maintenance guard adds to an eviction, seen from the client, on
//! the local real cluster (`tests/guard-bench.sh`).
//!
//! The server runs with `EVICTION_GUARD=true` beside one node with an operation in flight and
//! one without. Evictions through kube-apiserver (`POST …/pods/<pod>/eviction`, a kube client
//! on a kept-alive connection), each timed from request to answer:
//! - of pods on the quiet node, without the guard's webhook registered: the baseline;
//! - the same with the webhook registered: allowed by the guard (the difference is what
//!   kube-apiserver's call to the guard adds to an eviction);
//! - of a pod on the busy node, again and again, as a drain tool retries: refused with 429.

use anyhow::{Context, Result, bail};
use clap::Parser;
use ifo_dev::{Cluster, User};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, EvictParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use serde_json::json;
use std::time::{Duration, Instant};

const NAMESPACE: &str = "guard-bench";
const BUSY: &str = "guard-bench-busy";
const QUIET: &str = "guard-bench-quiet";

#[derive(Parser)]
#[command(about = "What the maintenance guard adds to an eviction, on the local real cluster")]
struct Cli {
    /// Evictions timed in each phase.
    #[arg(long, default_value_t = 200)]
    evictions: usize,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let server = std::env::current_exe()?.with_file_name("ifo-apiserver");
    if !server.exists() {
        bail!(
            "{} is missing; build it first: cargo build --release --bin ifo-apiserver",
            server.display()
        );
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    eprintln!("starting the local cluster ...");
    let cluster = Cluster::start(None).context("starting the local cluster")?;
    let ports = ifo_dev::Ports::free()?;
    let process = ifo_dev::spawn_server(
        &cluster,
        &server,
        ports,
        &[("EVICTION_GUARD", "true"), ("LOG_LEVEL", "warn")],
        "ifo-apiserver.log",
    )?;
    cluster.register_apiservice(ports)?;
    cluster
        .wait_live_api(Duration::from_secs(60))
        .with_context(|| format!("server log:\n{}", process.log_tail(20)))?;
    setup(&cluster, cli.evictions)?;

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let kubeconfig = Kubeconfig::read_from(cluster.kubeconfig(User::Admin))?;
    let client = runtime.block_on(async {
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
        // Each eviction answered once: kube's client would retry a 429 by itself, with backoff.
        config.default_retry = false;
        Client::try_from(config).map_err(anyhow::Error::from)
    })?;
    let pods: Api<Pod> = Api::namespaced(client, NAMESPACE);

    let n = cli.evictions;
    let without = runtime.block_on(time(&pods, (0..n).map(quiet_pod), true))?;
    cluster.register_guard_webhook(ports)?;
    // kube-apiserver picks the registration up within a second or so.
    std::thread::sleep(Duration::from_secs(3));
    let allowed = runtime.block_on(time(&pods, (n..2 * n).map(quiet_pod), true))?;
    let held = runtime.block_on(time(&pods, (0..n).map(|_| "busy-0".to_owned()), false))?;

    println!(
        "evictions through kube-apiserver, {n} a phase (client round trip on a kept-alive connection):"
    );
    for (what, times) in [
        ("without the guard", &without),
        ("allowed by the guard", &allowed),
        ("held by the guard (429)", &held),
    ] {
        println!(
            "  {what:<26} p50 {:>6.2} ms  p99 {:>6.2} ms",
            ms(percentile(times, 0.5)),
            ms(percentile(times, 0.99))
        );
    }
    println!(
        "  the guard adds {:.2} ms to an eviction (p50 allowed - p50 without)",
        ms(percentile(&allowed, 0.5)) - ms(percentile(&without, 0.5))
    );
    drop(process);
    cluster.shutdown();
    Ok(())
}

fn quiet_pod(i: usize) -> String {
    format!("quiet-{i}")
}

/// The nodes, an operation in flight on the busy one, and pods: `2 × n` on the quiet node, one
/// on the busy node.
fn setup(cluster: &Cluster, n: usize) -> Result<()> {
    cluster.kubectl_run(User::Admin, &["create", "namespace", NAMESPACE], None)?;
    let mut items = vec![
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": BUSY}}),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": QUIET}}),
        json!({"apiVersion": "ifo.kubevirt.io/v1alpha1", "kind": "OperationRuleSet",
            "metadata": {"name": "guard-bench"},
            "spec": {"component": "guard-bench",
                "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
                "namespaces": [NAMESPACE],
                "labelExpressions": [{"key": "ifo.kubevirt.io/node",
                    "expression": "object.?status.?nodeName.orValue('')"}],
                "rules": [{"operation": "Migrating",
                    "expression": "object.?status.?printableStatus.orValue('') == 'Migrating'"}]}}),
        json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "vm-0", "namespace": NAMESPACE}, "spec": {"running": true}}),
        pod("busy-0", BUSY),
    ];
    items.extend((0..2 * n).map(|i| pod(&quiet_pod(i), QUIET)));
    cluster.apply(&json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())?;
    let status = json!({"status": {"nodeName": BUSY, "printableStatus": "Migrating"}});
    cluster.kubectl_run(
        User::Admin,
        &[
            "-n",
            NAMESPACE,
            "patch",
            "vm",
            "vm-0",
            "--subresource=status",
            "--type=merge",
            "-p",
            &status.to_string(),
        ],
        None,
    )?;
    // The busy node's gate False, and the quiet node's gate Clear, before anything is timed.
    let deadline = Instant::now() + Duration::from_secs(60);
    for (node, want) in [(BUSY, "False"), (QUIET, "True")] {
        loop {
            let status = cluster
                .kubectl_run(
                    User::Admin,
                    &[
                        "get",
                        "gate",
                        &format!("node.{node}"),
                        "-o",
                        "jsonpath={.status.conditions[?(@.type==\"Clear\")].status}",
                    ],
                    None,
                )
                .unwrap_or_default();
            if status == want {
                break;
            }
            if Instant::now() > deadline {
                bail!("gate node.{node} is Clear={status}, not {want}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Ok(())
}

fn pod(name: &str, node: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
}

/// Evicts each of `names` in turn and times it; each must be allowed (`allow`) or refused.
async fn time(
    pods: &Api<Pod>,
    names: impl Iterator<Item = String>,
    allow: bool,
) -> Result<Vec<Duration>> {
    let params = EvictParams {
        delete_options: Some(DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        }),
        ..EvictParams::default()
    };
    let mut times = Vec::new();
    for name in names {
        let t = Instant::now();
        let answer = pods.evict(&name, &params).await;
        times.push(t.elapsed());
        match (allow, answer) {
            (true, Ok(_)) => {}
            (false, Err(kube::Error::Api(s))) if s.code == 429 => {}
            (_, other) => bail!("evicting {name}: expected allowed={allow}, got {other:?}"),
        }
    }
    times.sort();
    Ok(times)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
