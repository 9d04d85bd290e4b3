//! The install as the README tells users, checked as they would check it.

use anyhow::{Result, ensure};
use ifo_dev::User;
use ifo_dev::install::NAMESPACE;
use serde_json::Value;
use std::time::{Duration, Instant};

use super::Ctx;
use super::workload::{set_vm, settled, until_listed};

/// Two pods Ready on kubelet's probes, one leader, the server on its in-cluster service-account
/// identity; VirtualMachine operations listed by `kubectl get ifos` through kube-apiserver →
/// Service → the leader.
pub fn serves_through_the_service(ctx: &Ctx) -> Result<()> {
    let pods = settled(ctx, Duration::from_secs(120))?;
    // The pods run the Deployment's spec as shipped: its image, its service account (a projected
    // token: the server finds kube-apiserver from KUBERNETES_SERVICE_HOST, no kubeconfig).
    let spec: Value = serde_json::from_str(&ctx.cluster.kubectl_run(
        User::Admin,
        &["-n", NAMESPACE, "get", "pod", &pods[0].name, "-o", "json"],
        None,
    )?)?;
    ensure!(
        spec["spec"]["serviceAccountName"] == "ifo-apiserver",
        "the pod runs as {}",
        spec["spec"]["serviceAccountName"]
    );
    let container = &spec["spec"]["containers"][0];
    ensure!(
        container["image"]
            .as_str()
            .is_some_and(|i| i.starts_with("ifo-apiserver:")),
        "unexpected image {}",
        container["image"]
    );
    let args = container["args"].to_string() + &container["env"].to_string();
    ensure!(
        !args.contains("kubeconfig") && !args.contains("KUBECONFIG"),
        "the server is given a kubeconfig: {args}"
    );

    set_vm(ctx, "vm-a", "Migrating")?;
    set_vm(ctx, "vm-b", "Starting")?;
    let expected = [("vm-a", "Migrating"), ("vm-b", "Starting")];
    let took = until_listed(ctx, &expected, Instant::now(), Duration::from_secs(60))?;
    println!(
        "  operations listed through the Service {:.1}s after the VMs changed",
        took.as_secs_f64()
    );
    // The same with all namespaces, as the README's check does.
    let all = ctx
        .cluster
        .kubectl_run(User::Admin, &["get", "ifos", "-A"], None)?;
    ensure!(
        all.lines()
            .any(|l| l.contains(&ctx.ns) && l.contains("vm-a")),
        "kubectl get ifos -A does not show vm-a:\n{all}"
    );
    // kubectl logs reaches the node's kubelet; the leader says it leads.
    let log =
        ctx.cluster
            .kubectl_run(User::Admin, &["-n", NAMESPACE, "logs", &pods[0].name], None)?;
    ensure!(
        log.contains("became the leader"),
        "the leader's log does not say it leads:\n{log}"
    );
    Ok(())
}
