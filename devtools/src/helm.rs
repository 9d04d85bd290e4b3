//! The pinned `helm` (`tests/cluster/build-helm.sh`) against a cluster, as an administrator runs
//! it: the chart of `deploy/chart/`, installed, upgraded and uninstalled by name.

use super::{Cluster, User, source_dir};
use crate::process::stdout_of;
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The release name the tests install the chart as.
pub const RELEASE: &str = "ifo";

/// `IFO_HELM` when set, else the helm the build script prints (built and cached on first use).
pub fn binary() -> Result<PathBuf> {
    crate::pinned("IFO_HELM", "tests/cluster/build-helm.sh", &[])
}

/// The chart in the source tree.
pub fn chart() -> PathBuf {
    source_dir().join("deploy/chart")
}

/// `helm package` of the chart into `dir`: the archive users install, its linked files copied
/// in (no `found symbolic link` notes from it); its path.
pub fn package(dir: &Path) -> Result<PathBuf> {
    let chart = chart();
    let dir_arg = dir.display().to_string();
    let out = offline(&["package", &chart.display().to_string(), "-d", &dir_arg])?;
    let path = out
        .trim()
        .rsplit(": ")
        .next()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .with_context(|| format!("helm package said {out:?}"))?;
    Ok(path)
}

/// Runs helm with `args` as the cluster's administrator; its stdout, or an error with its stderr.
/// Helm's notes on the chart's linked files (`found symbolic link in path`) are not errors.
pub fn run(cluster: &Cluster, args: &[&str]) -> Result<String> {
    let out = Command::new(binary()?)
        .args(args)
        .env("KUBECONFIG", cluster.kubeconfig(User::Admin))
        .env("HELM_CACHE_HOME", cluster.dir().join("helm/cache"))
        .env("HELM_CONFIG_HOME", cluster.dir().join("helm/config"))
        .env("HELM_DATA_HOME", cluster.dir().join("helm/data"))
        .stdin(Stdio::null())
        .output()
        .context("running helm")?;
    stdout_of(out, "helm", args)
}

/// Runs helm with `args` and no cluster (lint, template).
pub fn offline(args: &[&str]) -> Result<String> {
    let home = std::env::temp_dir().join("ifo-helm");
    let out = Command::new(binary()?)
        .args(args)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"))
        .env("KUBECONFIG", "/dev/null")
        .stdin(Stdio::null())
        .output()
        .context("running helm")?;
    stdout_of(out, "helm", args)
}
