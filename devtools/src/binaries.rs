//! The pinned control-plane binaries (kube-apiserver, kube-controller-manager, kubectl, etcd) and,
//! for a real node, kubelet, kube-proxy, kube-scheduler and the pause image, built from the Go
//! module proxy by `tests/cluster/build-controlplane.sh` into a cache keyed by version.

use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Paths of the control-plane binaries of the pinned version. A local build rather than whatever is
/// on `PATH`, so that every run tests against the same Kubernetes.
#[derive(Clone, Debug)]
pub struct Binaries {
    /// `kube-apiserver`, with the aggregation layer the live API registers through.
    pub kube_apiserver: PathBuf,
    /// `kube-controller-manager`, for the ClusterRole aggregation and namespace deletion the tests
    /// rely on.
    pub kube_controller_manager: PathBuf,
    /// `kubectl`, the client the end-to-end tests drive like a user.
    pub kubectl: PathBuf,
    /// `etcd`, kube-apiserver's store.
    pub etcd: PathBuf,
}

/// The project's source tree: `IFO_SOURCE_DIR`, else where this crate was built from.
pub fn source_dir() -> PathBuf {
    std::env::var_os("IFO_SOURCE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // This crate's directory is a member of the workspace, one level below its root.
            let here = Path::new(env!("CARGO_MANIFEST_DIR"));
            here.parent().unwrap_or(here).to_path_buf()
        })
}

impl Binaries {
    fn in_dir(dir: &Path) -> Binaries {
        Binaries {
            kube_apiserver: dir.join("kube-apiserver"),
            kube_controller_manager: dir.join("kube-controller-manager"),
            kubectl: dir.join("kubectl"),
            etcd: dir.join("etcd"),
        }
    }

    /// Uses `IFO_CONTROLPLANE_DIR` when set; otherwise builds (or finds in the cache) the pinned
    /// versions. Fails with the build script's message when the Go toolchain is missing.
    pub fn ensure() -> Result<Binaries> {
        let dir = built_dir(&[])?;
        let b = Binaries::in_dir(&dir);
        require(&[
            &b.kube_apiserver,
            &b.kube_controller_manager,
            &b.kubectl,
            &b.etcd,
        ])?;
        Ok(b)
    }
}

/// What a real node runs, from the same release as the control plane.
#[derive(Clone, Debug)]
pub struct NodeBinaries {
    /// `kubelet`, which runs the node's pods through containerd.
    pub kubelet: PathBuf,
    /// `kube-proxy`, which routes Services (the APIService's among them) to pods.
    pub kube_proxy: PathBuf,
    /// `kube-scheduler`, which puts pods on the node.
    pub kube_scheduler: PathBuf,
    /// The pod sandbox image as an OCI archive, imported into containerd (no registry here).
    pub pause_image: PathBuf,
}

impl NodeBinaries {
    /// The image name the pause archive carries, which containerd must be told to use.
    pub const PAUSE_IMAGE: &'static str = "docker.io/library/ifo-pause:1";

    /// Like [`Binaries::ensure`], with the node's pieces (`build-controlplane.sh --node`).
    pub fn ensure() -> Result<NodeBinaries> {
        let dir = built_dir(&["--node"])?;
        let b = NodeBinaries {
            kubelet: dir.join("kubelet"),
            kube_proxy: dir.join("kube-proxy"),
            kube_scheduler: dir.join("kube-scheduler"),
            pause_image: dir.join("pause.oci.tar"),
        };
        require(&[&b.kubelet, &b.kube_proxy, &b.kube_scheduler, &b.pause_image]).context(
            "the real node's binaries are missing; build them with tests/cluster/build-controlplane.sh --node",
        )?;
        Ok(b)
    }
}

/// `IFO_CONTROLPLANE_DIR` when set, else the cache directory the build script prints after
/// building what is missing.
fn built_dir(args: &[&str]) -> Result<PathBuf> {
    pinned(
        "IFO_CONTROLPLANE_DIR",
        "tests/cluster/build-controlplane.sh",
        args,
    )
}

/// A pinned tool: the path in the environment `variable` when set, else the one `script` (a
/// build script of the source tree, `tests/cluster/build-*.sh`, run with `args`) prints after
/// building it into its cache or finding it there. The script's messages go to stderr as it
/// runs; its failure is an error naming it.
pub fn pinned(variable: &str, script: &str, args: &[&str]) -> Result<PathBuf> {
    if let Some(path) = std::env::var_os(variable) {
        return Ok(PathBuf::from(path));
    }
    let path = source_dir().join(script);
    let out = Command::new("bash")
        .arg(&path)
        .args(args)
        .stderr(std::process::Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", path.display()))?;
    if !out.status.success() {
        bail!("{script} failed (above; or set {variable})");
    }
    Ok(PathBuf::from(String::from_utf8(out.stdout)?.trim()))
}

fn require(files: &[&Path]) -> Result<()> {
    for file in files {
        if !file.is_file() {
            bail!(
                "{} does not exist (IFO_CONTROLPLANE_DIR names the directory of the binaries)",
                file.display()
            );
        }
    }
    Ok(())
}

/// The release `tests/cluster/kubernetes-oldest/go.mod` pins: the oldest Kubernetes minor still
/// supported upstream, which the smoke run on the real node runs (`v1.35.4`, say).
pub fn oldest_release() -> Result<String> {
    let path = source_dir().join("tests/cluster/kubernetes-oldest/go.mod");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .find_map(|l| l.strip_prefix("require k8s.io/kubernetes "))
        .map(|v| v.trim().to_string())
        .with_context(|| format!("{} requires no k8s.io/kubernetes", path.display()))
}
