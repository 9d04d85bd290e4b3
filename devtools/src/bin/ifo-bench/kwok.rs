//! KWOK (`--pods --kwok`): the pod workload's nodes and pods live as on a real cluster. KWOK's
//! controller (`sigs.k8s.io/kwok`, the simulator SIG Scalability and kube-scheduler's
//! performance tests use) keeps a Lease for each node, renewed every 10 s as a kubelet's, and
//! reports the node's status every 5 minutes; it starts each pod bound to one of its nodes
//! (`Pending` → `Running`), runs a Job's pod for a while to `Succeeded`, and removes a deleted
//! pod, all through kube-apiserver. The stages are `tests/cluster/kwok/stages.yaml`; the
//! benchmark's flipping pods are left to the benchmark, which times their changes.

use anyhow::{Context, Result, bail};
use ifo_dev::Process;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The annotation that hands a Node to KWOK.
pub(crate) const NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";
pub(crate) const NODE_ANNOTATION_VALUE: &str = "fake";

/// How long a node's Lease lasts; KWOK renews it every quarter of that, as a kubelet does with
/// its default of 40 s.
const LEASE_SECONDS: u32 = 40;

/// Starts KWOK's controller against the cluster of `kubeconfig`, its log and configuration
/// beside the kubeconfig: `workers` for each of its pools (pods' stages, nodes' stages, nodes'
/// Leases; KWOK's default is 4 each, which falls behind beyond some 20,000 pods on this
/// machine).
pub(crate) fn start(kubeconfig: &Path, workers: u16) -> Result<Process> {
    let binary = binary()?;
    let stages = ifo_dev::source_dir().join("tests/cluster/kwok/stages.yaml");
    if !stages.is_file() {
        bail!("{} is missing: KWOK needs its stages", stages.display());
    }
    let dir = kubeconfig.parent().context("the kubeconfig's directory")?;
    let log = dir.join("kwok.log");
    let config = dir.join("kwok-configuration.yaml");
    std::fs::write(
        &config,
        format!(
            "apiVersion: config.kwok.x-k8s.io/v1alpha1\n\
             kind: KwokConfiguration\n\
             options:\n  \
             podPlayStageParallelism: {workers}\n  \
             nodePlayStageParallelism: {workers}\n  \
             nodeLeaseParallelism: {workers}\n"
        ),
    )
    .with_context(|| format!("writing {}", config.display()))?;
    let mut cmd = Command::new(&binary);
    cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
        .arg(format!("--config={}", config.display()))
        .arg(format!("--config={}", stages.display()))
        .arg("--manage-all-nodes=false")
        .arg(format!(
            "--manage-nodes-with-annotation-selector={NODE_ANNOTATION}={NODE_ANNOTATION_VALUE}"
        ))
        .arg(format!("--node-lease-duration-seconds={LEASE_SECONDS}"))
        // Addresses for the nodes and pods it runs: never routed, only written in statuses.
        .arg("--node-ip=10.64.0.1")
        .arg("--cidr=10.128.0.0/9")
        // Not a line for every Lease renewed and every status patched (tens a second).
        .arg("--v=WARN");
    let process = Process::spawn("kwok", cmd, &log)?;
    std::thread::sleep(std::time::Duration::from_secs(1));
    process
        .check_running()
        .with_context(|| format!("kwok stopped at once:\n{}", process.log_tail(20)))?;
    Ok(process)
}

/// `IFO_KWOK` when set, else the pinned release built (or found in the cache) by
/// `tests/cluster/build-kwok.sh`.
fn binary() -> Result<PathBuf> {
    ifo_dev::pinned("IFO_KWOK", "tests/cluster/build-kwok.sh", &[])
}
