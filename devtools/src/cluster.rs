//! A real, local Kubernetes control plane: etcd and kube-apiserver on loopback with RBAC and the
//! aggregation layer configured, users with certificates and tokens, the project's CRDs installed,
//! and the live API registered as an APIService (and its admission door for rulesets as a
//! validating webhook) pointing at a server on this machine. With a
//! real node ([`Cluster::start_with_node`]), kube-apiserver listens on the node's bridge instead,
//! and the product is installed from `deploy/` (see `install`).
//!
//! This file runs the processes; who may use the cluster (users, PKI, kubeconfigs) is
//! `credentials.rs`, and what it is given of the project (CRDs, RBAC, the APIService and the
//! webhooks) `registration.rs`.

mod credentials;
mod registration;

use super::binaries::Binaries;
use super::node::{Join, NODE_IP, NODE_SERVICE_CIDR, Node, NodeNetwork, node_dir};
use super::pki::{KeyPair, create_private_dir};
use super::port::free_port;
use super::process::{Process, stdout_of};
use anyhow::{Context, Result, bail};
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use credentials::{Pki, write_pki};
pub use credentials::{SERVER_USER, ServingCert, User, WEBHOOK_CLIENT_NAME};
pub use registration::{GUARD_WEBHOOK, RULESET_WEBHOOK, SERVICE_NAME, SERVICE_NAMESPACE};

/// The Services' addresses of a cluster without a node (kube-apiserver's
/// `--service-cluster-ip-range`; with a node, [`crate::node::NODE_SERVICE_CIDR`]).
pub(crate) const SERVICE_CIDR: &str = "10.0.0.0/24";
/// The `kubernetes` Service's address in [`SERVICE_CIDR`].
pub(crate) const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

/// A running local control plane. Dropping it stops its processes and removes its directory unless
/// `IFO_KEEP_CLUSTER_DIR` asks to keep it for a post-mortem.
pub struct Cluster {
    dir: PathBuf,
    keep_dir: bool,
    /// A second real node, when a test asked for one; stopped first.
    second: std::sync::Mutex<Option<Node>>,
    /// The real node, if the cluster has one; stopped after the second, before the rest.
    node: std::sync::Mutex<Option<Node>>,
    // Field order is drop order: the controllers stop first, etcd last.
    controllers: Option<Process>,
    apiserver: Process,
    etcd: Process,
    /// The binaries it runs, for tests that run `kubectl` against it.
    pub binaries: Binaries,
    /// kube-apiserver's `https://127.0.0.1:<port>`.
    pub url: String,
    /// What the live API server must serve with for kube-apiserver to trust it.
    pub serving: ServingCert,
    /// The cluster's client CA (kept in memory only), for certificates tests issue.
    cluster_ca: KeyPair,
}

/// What kube-apiserver presents to the admission webhooks it calls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WebhookClient {
    /// Its webhook client certificate ([`WEBHOOK_CLIENT_NAME`]), to every webhook host.
    Certificate,
    /// Nothing, as managed control planes.
    None,
}

impl Cluster {
    /// Starts a control plane in a new directory under `parent` (the system temp dir if `None`).
    ///
    /// Blocking. Call it from a thread that outlives the cluster (the main thread, or a thread kept
    /// alive for the whole test binary): the child processes are tied to the starting thread's life.
    pub fn start(parent: Option<&Path>) -> Result<Cluster> {
        Cluster::launch(parent, None, WebhookClient::Certificate)
    }

    /// Starts a control plane as [`Cluster::start`] does, but one whose kube-apiserver presents
    /// no client certificate to admission webhooks, as managed control planes (EKS, GKE, AKS)
    /// cannot: a webhook cannot tell its reviews from anyone's.
    ///
    /// Blocking, and tied to the starting thread like [`Cluster::start`].
    pub fn start_without_webhook_client_certificate(parent: Option<&Path>) -> Result<Cluster> {
        Cluster::launch(parent, None, WebhookClient::None)
    }

    /// Starts a control plane with a real node: kube-apiserver listens on the node's bridge
    /// address (where pods reach it through the `kubernetes` Service) with service-account tokens
    /// and the Node authorizer, kube-controller-manager runs every controller, and kube-scheduler,
    /// kubelet, containerd and kube-proxy run pods. Waits until the Node is Ready. Needs root; one
    /// per machine.
    ///
    /// Blocking, and tied to the starting thread like [`Cluster::start`].
    pub fn start_with_node(parent: Option<&Path>) -> Result<Cluster> {
        let network = NodeNetwork::create()?;
        Cluster::launch(parent, Some(network), WebhookClient::Certificate)
    }

    fn launch(
        parent: Option<&Path>,
        network: Option<NodeNetwork>,
        webhook_client: WebhookClient,
    ) -> Result<Cluster> {
        let binaries = Binaries::ensure()?;
        let parent = parent
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&parent)?;
        let dir = parent.join(format!(
            "ifo-cluster-{}-{}",
            std::process::id(),
            free_port()?
        ));
        // Keys, tokens and kubeconfigs inside: the owner's only.
        create_private_dir(&dir)?;
        let started = Instant::now();

        let Pki {
            dir: pki,
            cluster_ca,
            serving,
        } = write_pki(&dir)?;
        let address = if network.is_some() {
            NODE_IP
        } else {
            Ipv4Addr::LOCALHOST
        };

        // etcd.
        let etcd_port = free_port()?;
        let peer_port = free_port()?;
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut etcd_cmd = Command::new(&binaries.etcd);
        etcd_cmd
            .arg("--name=local")
            .arg(format!("--data-dir={}", dir.join("etcd").display()))
            .arg(format!("--listen-client-urls={etcd_url}"))
            .arg(format!("--advertise-client-urls={etcd_url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=local={peer_url}"))
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        let etcd = Process::spawn("etcd", etcd_cmd, &dir.join("etcd.log"))?;

        // kube-apiserver.
        let port = free_port()?;
        let mut api_cmd = Command::new(&binaries.kube_apiserver);
        api_cmd
            .arg(format!("--etcd-servers={etcd_url}"))
            .arg(format!("--secure-port={port}"))
            .arg(format!("--bind-address={address}"))
            .arg(format!("--advertise-address={address}"))
            .arg(format!(
                "--service-cluster-ip-range={}",
                if network.is_some() {
                    NODE_SERVICE_CIDR
                } else {
                    SERVICE_CIDR
                }
            ))
            .args([
                "--service-account-issuer=https://kubernetes.default.svc",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                "--enable-aggregator-routing=false",
            ])
            .arg(format!(
                "--cert-dir={}",
                dir.join("apiserver-certs").display()
            ));
        // The files of the cluster's PKI each flag names.
        for (flag, file) in [
            ("service-account-key-file", "sa.pub"),
            ("service-account-signing-key-file", "sa.key"),
            ("client-ca-file", "ca.crt"),
            ("tls-cert-file", "apiserver.crt"),
            ("tls-private-key-file", "apiserver.key"),
            ("kubelet-client-certificate", "kubelet-client.crt"),
            ("kubelet-client-key", "kubelet-client.key"),
            ("token-auth-file", "tokens.csv"),
            ("requestheader-client-ca-file", "front-proxy-ca.crt"),
            ("proxy-client-cert-file", "front-proxy-client.crt"),
            ("proxy-client-key-file", "front-proxy-client.key"),
        ] {
            api_cmd.arg(format!("--{flag}={}", pki.join(file).display()));
        }
        if webhook_client == WebhookClient::Certificate {
            api_cmd.arg(format!(
                "--admission-control-config-file={}",
                pki.join("admission.yaml").display()
            ));
        }
        if network.is_some() {
            // Pods get service-account tokens, reach kube-apiserver through the `kubernetes`
            // Service (whose endpoint this server keeps), and kubelet acts as its Node only.
            api_cmd
                .arg("--authorization-mode=Node,RBAC")
                .arg("--enable-admission-plugins=NodeRestriction")
                .arg("--endpoint-reconciler-type=lease")
                .arg("--kubelet-preferred-address-types=InternalIP");
        } else {
            // No pods run: nothing needs tokens, and the Service endpoint would be loopback.
            api_cmd
                .arg("--authorization-mode=RBAC")
                .arg("--disable-admission-plugins=ServiceAccount")
                .arg("--endpoint-reconciler-type=none");
        }
        let apiserver = Process::spawn("kube-apiserver", api_cmd, &dir.join("kube-apiserver.log"))?;

        let mut cluster = Cluster {
            second: std::sync::Mutex::new(None),
            node: std::sync::Mutex::new(None),
            controllers: None,
            dir,
            keep_dir: std::env::var_os("IFO_KEEP_CLUSTER_DIR").is_some(),
            apiserver,
            etcd,
            binaries,
            url: format!("https://{address}:{port}"),
            serving,
            cluster_ca: cluster_ca.clone(),
        };
        cluster.write_kubeconfigs()?;
        cluster.wait_ready(Duration::from_secs(90))?;
        cluster.start_controllers(network.is_some())?;
        cluster.install_base()?;
        if let Some(network) = network {
            let node = Node::start(network, &node_dir(&cluster.dir), &cluster.join())?;
            let name = node.name().to_string();
            *cluster.node.lock().unwrap_or_else(|p| p.into_inner()) = Some(node);
            cluster.wait_node_ready(&name, &node_dir(&cluster.dir), Duration::from_secs(120))?;
        }
        tracing::info!(
            url = %cluster.url,
            dir = %cluster.dir.display(),
            seconds = started.elapsed().as_secs_f32(),
            "local control plane ready"
        );
        Ok(cluster)
    }

    /// The cluster's working directory: PKI, kubeconfigs, logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A `kubectl` command for `user`.
    pub fn kubectl(&self, user: User) -> Command {
        let mut cmd = Command::new(&self.binaries.kubectl);
        cmd.env("KUBECONFIG", self.kubeconfig(user));
        cmd
    }

    /// Runs kubectl as `user` and returns its stdout; an error with stderr if it fails.
    pub fn kubectl_run(&self, user: User, args: &[&str], stdin: Option<&str>) -> Result<String> {
        let mut cmd = self.kubectl(user);
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().context("running kubectl")?;
        if let Some(input) = stdin {
            child.stdin.take().unwrap().write_all(input.as_bytes())?;
        }
        stdout_of(child.wait_with_output()?, "kubectl", args)
    }

    /// `kubectl apply` of YAML/JSON text as admin.
    pub fn apply(&self, manifest: &str) -> Result<()> {
        self.kubectl_run(User::Admin, &["apply", "-f", "-"], Some(manifest))
            .map(|_| ())
    }

    fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            self.etcd.check_running()?;
            self.apiserver.check_running()?;
            let ok = self
                .kubectl(User::Admin)
                .args(["get", "--raw", "/readyz"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "kube-apiserver not ready after {timeout:?}; last lines of its log:\n{}",
                    self.apiserver.log_tail(30)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Without a node, only the controllers a user of this project relies on: ClusterRole
    /// aggregation (so `view`, `edit` and `admin` include the live API) and namespace deletion;
    /// nothing drives subjects, tests do that by patching `/status`. With a node, every controller
    /// (Deployments, ReplicaSets, EndpointSlices, garbage collection, service-account tokens'
    /// CA), as a real cluster runs them.
    fn start_controllers(&mut self, with_node: bool) -> Result<()> {
        let pki = self.dir.join("pki");
        let mut cmd = Command::new(&self.binaries.kube_controller_manager);
        cmd.arg(format!(
            "--kubeconfig={}",
            self.kubeconfig(User::Admin).display()
        ))
        .arg("--leader-elect=false")
        .arg("--bind-address=127.0.0.1")
        .arg("--secure-port=0")
        .arg("--use-service-account-credentials=false");
        if with_node {
            cmd.arg("--controllers=*")
                .arg(format!(
                    "--service-account-private-key-file={}",
                    pki.join("sa.key").display()
                ))
                .arg(format!("--root-ca-file={}", pki.join("ca.crt").display()));
        } else {
            cmd.arg("--controllers=clusterrole-aggregation,namespace");
        }
        self.controllers = Some(Process::spawn(
            "kube-controller-manager",
            cmd,
            &self.dir.join("kube-controller-manager.log"),
        )?);
        Ok(())
    }

    /// What a node needs to join the cluster.
    fn join(&self) -> Join<'_> {
        Join {
            url: &self.url,
            ca: &self.cluster_ca,
            admin_kubeconfig: self.kubeconfig(User::Admin),
        }
    }

    /// Starts a second real node beside the first (see [`Node::start_second`]) with `images`
    /// imported, and waits until it is Ready; returns its name. It runs until
    /// [`Cluster::stop_second_node`] or the cluster stops; if it does not get Ready, it is
    /// stopped and its Node deleted.
    pub fn start_second_node(&self, images: &[&Path]) -> Result<String> {
        if self.node().is_none() {
            bail!("a second node joins a cluster started with one");
        }
        let mut second = self.second.lock().unwrap_or_else(|p| p.into_inner());
        if second.is_some() {
            bail!("the cluster has a second node already");
        }
        let dir = node_dir(&self.dir).join("second");
        let node = Node::start_second(&dir, &self.join(), images)?;
        let name = node.name().to_string();
        *second = Some(node);
        drop(second);
        if let Err(e) = self.wait_node_ready(&name, &dir, Duration::from_secs(120)) {
            if let Err(stop) = self.stop_second_node() {
                tracing::warn!(node = %name, error = %format!("{stop:#}"), "stopping the second node failed");
            }
            return Err(e);
        }
        Ok(name)
    }

    /// Stops the second node's kubelet and containers and deletes its Node (the pods still bound
    /// to it are deleted with it, by the cluster's garbage collector).
    pub fn stop_second_node(&self) -> Result<()> {
        let Some(node) = self.second.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return Ok(());
        };
        let name = node.name().to_string();
        drop(node);
        self.kubectl_run(
            User::Admin,
            &[
                "delete",
                "node",
                &name,
                "--ignore-not-found",
                "--timeout=60s",
            ],
            None,
        )
        .map(|_| ())
    }

    /// Waits for the Node `name` (its files in `dir`) to be Ready on a heartbeat from this run's
    /// kubelet (a Node object left by an earlier run reads Ready before the new kubelet reports).
    fn wait_node_ready(&self, name: &str, dir: &Path, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let started = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(1);
        loop {
            for node in [&self.node, &self.second] {
                if let Some(node) = node.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                    node.check_running()?;
                }
            }
            let ready = self
                .kubectl_run(
                    User::Admin,
                    &[
                        "get",
                        "node",
                        name,
                        "-o",
                        "jsonpath={.status.conditions[?(@.type==\"Ready\")].status} {.status.conditions[?(@.type==\"Ready\")].lastHeartbeatTime}",
                    ],
                    None,
                )
                .unwrap_or_default();
            let mut parts = ready.split_whitespace();
            let fresh = parts
                .nth(1)
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .is_some_and(|t| t >= started);
            if ready.starts_with("True") && fresh {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "node {name} not Ready after {timeout:?} ({ready}); kubelet log: {}",
                    dir.join("kubelet.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The real node, if the cluster was started with one, for tests that act on it (import an
    /// image, crash a container).
    pub fn node(&self) -> std::sync::MutexGuard<'_, Option<Node>> {
        self.node.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// kube-apiserver's process id (to measure its CPU and memory).
    pub fn apiserver_pid(&self) -> u32 {
        self.apiserver.pid()
    }

    /// etcd's process id (to measure its CPU and memory).
    pub fn etcd_pid(&self) -> u32 {
        self.etcd.pid()
    }

    /// The end of kube-apiserver's log, for error messages.
    pub fn apiserver_log_tail(&self, lines: usize) -> String {
        self.apiserver.log_tail(lines)
    }

    /// Stops kube-apiserver (SIGTERM) and starts it again on the same port with the same
    /// settings; returns once it answers `/readyz`. The new process is tied to the calling
    /// thread's life.
    pub fn restart_apiserver(&self) -> Result<()> {
        self.apiserver.restart(Duration::from_secs(10))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self
            .kubectl_run(User::Admin, &["get", "--raw", "/readyz"], None)
            .is_err()
        {
            self.apiserver.check_running()?;
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "kube-apiserver not ready a minute after its restart:\n{}",
                self.apiserver.log_tail(20)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Stops etcd (SIGTERM) and starts it again with the same data; kube-apiserver reconnects
    /// on its own. The new process is tied to the calling thread's life.
    pub fn restart_etcd(&self) -> Result<()> {
        self.etcd.restart(Duration::from_secs(10))
    }

    /// Freezes kube-apiserver (SIGSTOP) or thaws it (SIGCONT): while frozen it accepts
    /// connections and answers nothing, the way a hung or overloaded control plane does.
    pub fn freeze_apiserver(&self, frozen: bool) -> Result<()> {
        let signal = if frozen { libc::SIGSTOP } else { libc::SIGCONT };
        let pid = libc::pid_t::try_from(self.apiserver.pid())?;
        // SAFETY: signalling a child process we started and still own.
        if unsafe { libc::kill(pid, signal) } != 0 {
            anyhow::bail!(
                "signalling kube-apiserver: {}",
                std::io::Error::last_os_error()
            );
        }
        Ok(())
    }
}

impl Cluster {
    /// Stops every process and removes the directory (unless IFO_KEEP_CLUSTER_DIR is set).
    /// Safe to call more than once.
    pub fn shutdown(&self) {
        drop(self.second.lock().unwrap_or_else(|p| p.into_inner()).take());
        drop(self.node().take());
        if let Some(c) = self.controllers.as_ref() {
            c.stop(Duration::from_secs(5));
        }
        self.apiserver.stop(Duration::from_secs(5));
        self.etcd.stop(Duration::from_secs(5));
        if !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.shutdown();
    }
}
