//! The product as users install it, on a real node: the image `deploy/image.sh` assembles, imported
//! into containerd; `kubectl apply -k deploy/` with `certs/generate.sh`; two replicas behind the
//! real Service, readiness decided by kubelet's probes, requests through kube-apiserver → Service →
//! the leader's pod, the server using its in-cluster service-account identity and only the RBAC in
//! `deploy/`. Then what happens to real installations: a crashed leader, a deleted leader pod, a
//! rollout, a certificate rotation, persistence mode, the maintenance guard turned on
//! (`apiservice/with-guard/`) with a drain of the node while an operation is in flight there and
//! evictions through a failover, and the uninstall; then the Helm chart (`deploy/chart/`):
//! installed with the guard, upgraded under load, uninstalled (with the server's certificates,
//! then with a Secret of one's own and with the chart's own CA), installed with one replica whose
//! node is drained, and with two replicas on two nodes (a second joins), each drained in turn.
//!
//! One cluster per machine, so the steps run in order on it (a test binary without the
//! standard harness: `cargo test --test node [-- FILTER]`). Needs root. `IFO_FAILOVER_RUNS=N`
//! repeats each failover N times and prints the median and maximum (the figures of docs/operating.md).
//!
//! `-- --smoke` runs the smoke run's steps only (`SMOKE`): what `tests/run.sh` runs on the oldest
//! Kubernetes minor still supported upstream (`IFO_CONTROLPLANE_DIR` naming its build, from
//! `tests/cluster/build-controlplane.sh --node --oldest`).

mod chart;
mod failover;
mod guard;
mod install;
mod lifecycle;
mod persist;
mod terms;
mod workload;

use anyhow::{Context, Result};
use ifo_dev::Cluster;
use ifo_dev::install::Install;
use std::time::Instant;

/// What every step works with.
pub struct Ctx {
    /// The cluster with its node.
    pub cluster: Cluster,
    /// The product, installed from `deploy/`.
    pub install: Install,
    /// The namespace of the steps' VirtualMachines.
    pub ns: String,
}

type Step = (&'static str, fn(&Ctx) -> Result<()>);

/// In order: the kustomize install's uninstall, then the chart's install, upgrade and
/// uninstall come last.
const STEPS: &[Step] = &[
    (
        "installed_as_the_readme_says_serves_through_the_service",
        install::serves_through_the_service,
    ),
    (
        "crashed_leader_fails_over_within_the_lease",
        failover::crashed_leader,
    ),
    (
        "deleted_leader_pod_hands_over_within_seconds",
        failover::deleted_leader_pod,
    ),
    (
        "rollout_restart_keeps_the_api_available",
        lifecycle::rollout_restart,
    ),
    (
        "rotated_certificate_is_served_without_a_restart",
        lifecycle::certificate_rotation,
    ),
    (
        "persistence_is_written_by_the_leader_only",
        persist::only_the_leader_writes,
    ),
    (
        "guard_holds_kubectl_drain_while_the_node_is_not_clear",
        guard::drain_waits_while_the_node_is_not_clear,
    ),
    (
        "guard_answers_every_eviction_through_a_failover",
        guard::guard_answers_through_a_failover,
    ),
    ("uninstall_removes_everything", lifecycle::uninstall),
    (
        "helm_install_with_the_guard_serves_and_holds_evictions",
        chart::install,
    ),
    (
        "helm_upgrade_allows_no_eviction_and_loses_no_list_or_operation",
        chart::upgrade,
    ),
    (
        "helm_uninstall_leaves_nothing_that_blocks",
        chart::uninstall,
    ),
    (
        "helm_install_upgrade_and_uninstall_with_a_secret_of_ones_own_and_the_charts_own_ca",
        chart::other_certificate_sources,
    ),
    (
        "helm_install_with_one_replica_lets_its_node_drain",
        chart::one_replica_lets_its_node_drain,
    ),
    (
        "helm_install_with_two_replicas_lets_each_of_two_nodes_drain",
        chart::two_replicas_let_each_node_drain,
    ),
];

/// The smoke run on another Kubernetes release: served through the Service, a `kubectl drain`
/// held by the guard, the kustomize install's uninstall, then the chart installed with the guard
/// (lists, an eviction refused) and uninstalled. (The upgrade under load is not in it: on 1.35
/// its rollout once left the aggregated API unavailable to a few lists.)
const SMOKE: &[&str] = &[
    "installed_as_the_readme_says_serves_through_the_service",
    "guard_holds_kubectl_drain_while_the_node_is_not_clear",
    "uninstall_removes_everything",
    "helm_install_with_the_guard_serves_and_holds_evictions",
    "helm_uninstall_leaves_nothing_that_blocks",
];

fn main() {
    // cargo passes the harness's flags (e.g. --test-threads); the first other argument filters.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list") {
        for (name, _) in STEPS {
            println!("{name}: test");
        }
        return;
    }
    let filter = args.iter().find(|a| !a.starts_with('-')).cloned();
    let smoke = args.iter().any(|a| a == "--smoke");
    if let Some(unknown) = SMOKE
        .iter()
        .find(|s| !STEPS.iter().any(|(name, _)| name == *s))
    {
        println!("the smoke run names a step there is not: {unknown}");
        std::process::exit(101);
    }
    let selected: Vec<&Step> = STEPS
        .iter()
        .filter(|(name, _)| filter.as_deref().is_none_or(|f| name.contains(f)))
        .filter(|(name, _)| !smoke || SMOKE.contains(name))
        .collect();
    println!("\nrunning {} tests", selected.len());
    if selected.is_empty() {
        return;
    }
    let started = Instant::now();
    // What a run that was killed left (its bridge, mounts, rules) is not the machine's own.
    if let Err(e) = ifo_dev::put_back_after_a_killed_node() {
        println!("putting the machine back after a killed node failed: {e:#}");
    }
    let before = Machine::now();
    let mut failed = match setup(smoke) {
        Ok(ctx) => run(&ctx, &selected),
        Err(e) => {
            println!("the node and the install failed: {e:#}");
            selected.len()
        }
    };
    // The cluster and its node are gone: the machine must be as it was.
    let after = Machine::now();
    if after == before {
        println!("test machine_is_put_back_when_the_node_stops ... ok");
    } else {
        failed += 1;
        println!(
            "test machine_is_put_back_when_the_node_stops ... FAILED\nbefore: {before:#?}\nafter: {after:#?}"
        );
    }
    println!(
        "\ntest result: {}. {} passed; {failed} failed; finished in {:.1}s\n",
        if failed == 0 { "ok" } else { "FAILED" },
        selected.len() + 1 - failed,
        started.elapsed().as_secs_f64()
    );
    if failed > 0 {
        std::process::exit(101);
    }
}

fn run(ctx: &Ctx, steps: &[&Step]) -> usize {
    let mut failed = 0;
    for (name, step) in steps {
        let t = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step(ctx)));
        let secs = t.elapsed().as_secs_f64();
        match result {
            Ok(Ok(())) => println!("test {name} ... ok ({secs:.1}s)"),
            Ok(Err(e)) => {
                failed += 1;
                println!(
                    "test {name} ... FAILED ({secs:.1}s)\n{e:#}\n{}",
                    ctx.install.describe(&ctx.cluster)
                );
            }
            Err(_) => {
                failed += 1;
                println!("test {name} ... FAILED (panicked, {secs:.1}s)");
            }
        }
    }
    failed
}

/// The cluster with its node, the image, and the install as the README tells users; for the
/// smoke run, on the oldest supported minor and no other.
fn setup(smoke: bool) -> Result<Ctx> {
    if is_root() {
        let t = Instant::now();
        let cluster = Cluster::start_with_node(None).context("starting the cluster with a node")?;
        let version: serde_json::Value = serde_json::from_str(&cluster.kubectl_run(
            ifo_dev::User::Admin,
            &["version", "-o", "json"],
            None,
        )?)?;
        let running = version["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap_or_default();
        println!(
            "cluster with a real node (Kubernetes {running}): {:.1}s",
            t.elapsed().as_secs_f64()
        );
        if smoke {
            let oldest = ifo_dev::oldest_release()?;
            anyhow::ensure!(
                running == oldest,
                "the smoke run is for the oldest supported minor, Kubernetes {oldest} \
                 (tests/cluster/kubernetes-oldest/go.mod), but the cluster runs {running:?}: \
                 IFO_CONTROLPLANE_DIR names the directory that \
                 `tests/cluster/build-controlplane.sh --node --oldest` prints"
            );
        }
        let t = Instant::now();
        let image = cluster.dir().join("ifo-apiserver.oci.tar");
        let built = ifo_dev::install::build_image(&image)?;
        println!("{} ({:.1}s)", built.trim(), t.elapsed().as_secs_f64());
        let t = Instant::now();
        let install = Install::run(&cluster, &image, &cluster.dir().join("certs"), false)?;
        println!("installed and Available: {:.1}s", t.elapsed().as_secs_f64());
        let ns = "node-tests".to_string();
        cluster.kubectl_run(ifo_dev::User::Admin, &["create", "namespace", &ns], None)?;
        Ok(Ctx {
            cluster,
            install,
            ns,
        })
    } else {
        anyhow::bail!(
            "the real node runs containers and changes iptables: run this test binary as root"
        )
    }
}

/// Whether the effective user is root (from `/proc`, without libc).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        == Some("0")
}

/// What a node changes on the machine and must put back: kernel settings, the bridge, mounts,
/// left-over container processes, and Kubernetes' and CNI's iptables rules.
#[derive(Debug, PartialEq, Eq)]
struct Machine {
    sysctls: Vec<(String, String)>,
    bridge: bool,
    mounts: usize,
    shims: usize,
    rules: Vec<String>,
}

impl Machine {
    fn now() -> Machine {
        let sysctls = [
            "kernel/panic",
            "kernel/panic_on_oops",
            "vm/overcommit_memory",
            "net/ipv4/ip_forward",
        ]
        .iter()
        .map(|k| {
            let v = std::fs::read_to_string(format!("/proc/sys/{k}")).unwrap_or_default();
            ((*k).to_string(), v.trim().to_string())
        })
        .collect();
        let mounts = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("/ifo-node/"))
            .count();
        let shims = std::fs::read_dir("/proc")
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                            let c = String::from_utf8_lossy(&c);
                            c.contains("containerd-shim") && c.contains("/ifo-node/")
                        })
                    })
                    .count()
            })
            .unwrap_or(0);
        let rules = std::process::Command::new("iptables-save")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("KUBE-") || l.contains("CNI-"))
            .map(str::to_owned)
            .collect();
        Machine {
            sysctls,
            bridge: std::path::Path::new("/sys/class/net/ifo0").exists(),
            mounts,
            shims,
            rules,
        }
    }
}
