//! The pinned control-plane binaries (kube-apiserver, kube-controller-manager, kubectl, etcd), built from the Go module proxy
//! by `tests/cluster/build-controlplane.sh` into a cache keyed by version.

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
        if let Some(dir) = std::env::var_os("IFO_CONTROLPLANE_DIR") {
            let b = Binaries::in_dir(Path::new(&dir));
            for bin in [
                &b.kube_apiserver,
                &b.kube_controller_manager,
                &b.kubectl,
                &b.etcd,
            ] {
                if !bin.is_file() {
                    bail!(
                        "IFO_CONTROLPLANE_DIR is set but {} does not exist",
                        bin.display()
                    );
                }
            }
            return Ok(b);
        }
        let script = source_dir().join("tests/cluster/build-controlplane.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            bail!("building the control plane failed ({})", script.display());
        }
        let dir = String::from_utf8(out.stdout)?.trim().to_string();
        Ok(Binaries::in_dir(Path::new(&dir)))
    }
}
