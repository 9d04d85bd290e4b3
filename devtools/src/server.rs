//! `ifo-apiserver serve` as a child process of the local cluster, for the tests and the
//! benchmark: a separate process, so it can be restarted, killed and measured on its own.

use super::{Cluster, Process, User};
use anyhow::Result;
use std::path::Path;
use std::process::Command;

/// The loopback ports of a server on this machine: the API's (`SECURE_PORT`, what the
/// APIService points at) and the admission doors' (`ADMISSION_PORT`, what the webhooks call).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    /// The API's.
    pub api: u16,
    /// The admission doors'.
    pub admission: u16,
}

impl Ports {
    /// Two ports no other server here takes.
    pub fn free() -> Result<Ports> {
        Ok(Ports {
            api: super::free_port()?,
            admission: super::free_port()?,
        })
    }
}

/// Starts `binary serve` on loopback `ports` with the cluster's serving certificate and the
/// server's own identity. `env` adds settings (e.g. `DEBOUNCE_THRESHOLD`; without
/// `HEALTH_PORT`, the probes listen on a free port); the log goes to `log` in the cluster
/// directory.
pub fn spawn_server(
    cluster: &Cluster,
    binary: &Path,
    ports: Ports,
    env: &[(&str, &str)],
    log: &str,
) -> Result<Process> {
    let mut cmd = Command::new(binary);
    cmd.arg("serve")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={}", ports.api))
        .arg(format!("--admission-port={}", ports.admission))
        .arg(format!(
            "--tls-cert-file={}",
            cluster.serving.cert_file.display()
        ))
        .arg(format!(
            "--tls-private-key-file={}",
            cluster.serving.key_file.display()
        ))
        .arg(format!(
            "--kubeconfig={}",
            cluster.kubeconfig(User::Server).display()
        ))
        .envs(env.iter().copied());
    // The probes' listener has a port of its own: one no other server here takes.
    if !env.iter().any(|(name, _)| *name == "HEALTH_PORT") {
        cmd.arg(format!("--health-port={}", super::free_port()?));
    }
    Process::spawn("ifo-apiserver", cmd, &cluster.dir().join(log))
}
