//! The install as the README tells users, checked as they would check it.

use anyhow::{Result, bail, ensure};
use ifo_dev::User;
use ifo_dev::install::NAMESPACE;
use serde_json::Value;
use std::time::{Duration, Instant};

use super::Ctx;
use super::workload::{set_vm, settled, until_listed};

/// Two pods Ready on kubelet's probes, one leader, the server on its in-cluster service-account
/// identity; VirtualMachine operations listed by `kubectl get ifos` through kube-apiserver →
/// Service → the leader; a ruleset that does not compile refused by the leader's admission door
/// through the same Service (the webhook of `certs/generate.sh`, trusted by its caBundle).
pub(crate) fn serves_through_the_service(ctx: &Ctx) -> Result<()> {
    plugin_is_lean()?;
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
    // A server-side dry run: refused by the door, and nothing is created either way.
    let broken = format!(
        r#"{{"apiVersion":"ifo.kubevirt.io/v1alpha1","kind":"OperationRuleSet","metadata":{{"name":"broken-{}"}},
"spec":{{"target":{{"version":"v1","resource":"configmaps"}},"rules":[{{"operation":"Broken","expression":"object.data =="}}]}}}}"#,
        ctx.ns
    );
    let refusal = match ctx.cluster.kubectl_run(
        User::Admin,
        &["apply", "--dry-run=server", "-f", "-"],
        Some(&broken),
    ) {
        Ok(out) => bail!("a ruleset that does not compile was accepted: {out}"),
        Err(e) => format!("{e:#}"),
    };
    ensure!(
        refusal.contains(&format!(
            "admission webhook \"{}.ifo.kubevirt.io\" denied the request",
            ifo_dev::RULESET_WEBHOOK
        )) && refusal.contains("rules[0] (Broken).expression"),
        "the ruleset was not refused by the admission door: {refusal}"
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

/// The release `kubectl-ifo` (what `cargo install --path plugin` installs, what
/// `deploy/local.sh` builds and the README tells users to copy) carries no debug information:
/// at most 25 MiB.
fn plugin_is_lean() -> Result<()> {
    // The binaries the image was assembled from: IFO_BINARIES, else those deploy/image.sh built.
    let plugin = std::env::var("IFO_BINARIES")
        .ok()
        .and_then(|b| {
            b.split_whitespace()
                .find(|p| p.ends_with("/kubectl-ifo"))
                .map(str::to_owned)
        })
        .unwrap_or_else(|| {
            let target = std::env::var("CARGO_TARGET_DIR")
                .unwrap_or_else(|_| format!("{}/target", env!("CARGO_MANIFEST_DIR")));
            format!("{target}/release/kubectl-ifo")
        });
    let bytes = std::fs::metadata(&plugin)?.len();
    println!("  {plugin}: {:.1} MiB", bytes as f64 / f64::from(1 << 20));
    ensure!(
        bytes <= 25 << 20,
        "the release kubectl-ifo is {bytes} bytes: more than 25 MiB (debug information in the release profile?)"
    );
    Ok(())
}
