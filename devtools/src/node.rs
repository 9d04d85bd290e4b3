//! A real node for the local cluster: containerd (with runc and the bridge CNI plugin from the
//! machine's packages), kubelet, kube-proxy and kube-scheduler, so Deployments run real pods and
//! Services route to them, the way users install the product.
//!
//! The node lives on its own bridge ([`host::BRIDGE`], `10.244.0.1/24`): kube-apiserver listens on
//! the bridge's address so pods reach it through the `kubernetes` Service, and nothing listens on
//! the machine's outside interfaces. Everything it changes on the machine is put back when it
//! stops (see [`Host`]).
//!
//! A second node can join the first ([`Node::start_second`]), for what needs two (a drain whose
//! pods must go elsewhere): its own containerd and kubelet, on the same bridge at `10.244.0.2`,
//! its pods given the upper half of the bridge's addresses and put in cgroups under a root of
//! their own (two kubelets under one root would each remove the other's pods' cgroups as
//! orphans); the first node's kube-scheduler and kube-proxy serve both.

use super::binaries::NodeBinaries;
use super::host::{self, Host};
use super::pki::{KeyPair, Usage};
use super::process::{Process, stdout_of};
use anyhow::{Context, Result, bail};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The node's address: the bridge's, which kube-apiserver and kubelet listen on.
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 1);
/// The pods' subnet on the bridge.
const POD_CIDR: &str = "10.244.0.0/24";
/// The Services' addresses of the cluster with a node, routed to its bridge (see
/// `Host::create_bridge`), and its `kubernetes` Service's: apart from the clusters without a node
/// ([`crate::cluster::SERVICE_CIDR`]) that may run on the same machine meanwhile, whose
/// kube-apiserver calls its Services' addresses (a webhook's, with no kube-proxy to rewrite them)
/// and must not find them routed to the bridge, where they would wait for their timeouts.
pub(crate) const NODE_SERVICE_CIDR: &str = "10.96.0.0/24";
/// The `kubernetes` Service's address in [`NODE_SERVICE_CIDR`].
pub(crate) const NODE_KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// Where a node sits on the machine.
#[derive(Clone, Copy)]
struct Seat {
    /// Its address on the bridge, which its kubelet listens on.
    ip: Ipv4Addr,
    /// The first and last addresses of its pods (host-local's range on the bridge).
    pods: (Ipv4Addr, Ipv4Addr),
    /// The cgroup its kubelet puts pods under, in every hierarchy.
    cgroup_root: &'static str,
    /// Its kubelet's healthz port on loopback (0: none; one kubelet on the machine has it).
    healthz_port: u16,
}

/// The first node: the bridge's own address.
const FIRST: Seat = Seat {
    ip: NODE_IP,
    pods: (
        Ipv4Addr::new(10, 244, 0, 16),
        Ipv4Addr::new(10, 244, 0, 127),
    ),
    cgroup_root: "/",
    healthz_port: 10248,
};

/// The second node.
const SECOND: Seat = Seat {
    ip: Ipv4Addr::new(10, 244, 0, 2),
    pods: (
        Ipv4Addr::new(10, 244, 0, 128),
        Ipv4Addr::new(10, 244, 0, 254),
    ),
    cgroup_root: host::SECOND_CGROUP_ROOT,
    healthz_port: 0,
};

/// The machine's state and bridge, taken before the control plane starts (kube-apiserver binds to
/// the bridge's address).
pub struct NodeNetwork {
    /// Held for its `Drop`, which puts the machine back.
    _host: Host,
}

impl NodeNetwork {
    /// Locks the machine for one node, saves its state and creates the bridge.
    pub fn create() -> Result<NodeNetwork> {
        let host = Host::save()?;
        host.create_bridge(&format!("{NODE_IP}/24"), NODE_SERVICE_CIDR)?;
        Ok(NodeNetwork { _host: host })
    }
}

/// What the node needs from the control plane to join it.
pub struct Join<'a> {
    /// kube-apiserver's URL on the node's address.
    pub url: &'a str,
    /// The cluster CA: it signs the node's identities, and kubelet trusts clients it signed.
    pub ca: &'a KeyPair,
    /// An admin kubeconfig, for kube-scheduler.
    pub admin_kubeconfig: PathBuf,
}

/// A running node. Dropping it stops its components and containers and restores the machine.
pub struct Node {
    name: String,
    dir: PathBuf,
    seat: Seat,
    // Stopped in this order by `Drop`.
    kubelet: Option<Process>,
    kube_proxy: Option<Process>,
    scheduler: Option<Process>,
    containerd: Option<Process>,
    network: Option<NodeNetwork>,
}

/// The machine's host name, which the Node is named after: kube-apiserver reaches kubelet by it
/// for `kubectl logs` and `exec`, so it must resolve.
fn host_name() -> Result<String> {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")?
        .trim()
        .to_ascii_lowercase();
    if name.is_empty() {
        bail!("the machine has no host name to name the node after");
    }
    Ok(name)
}

fn write(path: &Path, data: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, data).with_context(|| format!("writing {}", path.display()))
}

/// A kubeconfig for `cert`, against `url`.
fn kubeconfig(path: &Path, url: &str, ca: &KeyPair, cert: &KeyPair) -> Result<()> {
    use base64::Engine as _;
    let b64 = |d: &[u8]| base64::engine::general_purpose::STANDARD.encode(d);
    let config = serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": url, "certificate-authority-data": b64(&ca.cert_pem)}}],
        "users": [{"name": "node", "user": {"client-certificate-data": b64(&cert.cert_pem), "client-key-data": b64(&cert.key_pem)}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "node"}}],
        "current-context": "local",
    });
    // It carries the client key.
    crate::pki::write_private(path, serde_json::to_vec_pretty(&config)?)
}

impl Node {
    /// Starts containerd (and imports the pause image), kube-scheduler, kubelet and kube-proxy in
    /// `dir`.
    pub fn start(network: NodeNetwork, dir: &Path, join: &Join<'_>) -> Result<Node> {
        let binaries = NodeBinaries::ensure()?;
        let mut node = Node::prepare(host_name()?, FIRST, Some(network), dir, join, &binaries)?;
        let proxy_cert = join.ca.issue("system:kube-proxy", &[], Usage::Client)?;
        kubeconfig(
            &dir.join("kube-proxy.kubeconfig"),
            join.url,
            join.ca,
            &proxy_cert,
        )?;
        node.scheduler = Some(node.start_scheduler(&binaries, &join.admin_kubeconfig)?);
        node.kubelet = Some(node.start_kubelet(&binaries)?);
        node.kube_proxy = Some(node.start_kube_proxy(&binaries)?);
        Ok(node)
    }

    /// Starts a second node beside the one running, in `dir` (containerd, with the pause image
    /// and `images`, and kubelet), named after the machine with `-2`. Dropping it stops its
    /// kubelet and containers; what it leaves on the machine (its address, cgroups, mounts) goes
    /// when the first node stops.
    pub fn start_second(dir: &Path, join: &Join<'_>, images: &[&Path]) -> Result<Node> {
        let binaries = NodeBinaries::ensure()?;
        // After the bridge's own address: the bridge plugin takes the first as its gateway.
        host::add_address(&format!("{}/24", SECOND.ip))?;
        host::create_cgroup_root(SECOND.cgroup_root)?;
        let name = format!("{}-2", host_name()?);
        let mut node = Node::prepare(name, SECOND, None, dir, join, &binaries)?;
        // Before its kubelet registers the Node: no pod is placed where its image is not yet.
        for image in images {
            node.import_image(image)?;
        }
        node.kubelet = Some(node.start_kubelet(&binaries)?);
        Ok(node)
    }

    /// Starts containerd (with the pause image) and writes kubelet's identity.
    fn prepare(
        name: String,
        seat: Seat,
        network: Option<NodeNetwork>,
        dir: &Path,
        join: &Join<'_>,
        binaries: &NodeBinaries,
    ) -> Result<Node> {
        std::fs::create_dir_all(dir)?;
        let mut node = Node {
            name: name.clone(),
            dir: dir.to_path_buf(),
            seat,
            kubelet: None,
            kube_proxy: None,
            scheduler: None,
            containerd: None,
            network,
        };
        node.containerd = Some(node.start_containerd()?);
        node.import_image(&binaries.pause_image)?;

        let kubelet_cert = join.ca.issue(
            &format!("system:node:{name}"),
            &["system:nodes"],
            Usage::Client,
        )?;
        kubeconfig(
            &dir.join("kubelet.kubeconfig"),
            join.url,
            join.ca,
            &kubelet_cert,
        )?;
        write(&dir.join("ca.crt"), &join.ca.cert_pem)?;
        Ok(node)
    }

    /// The Node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("containerd.sock")
    }

    fn start_containerd(&self) -> Result<Process> {
        let cni_dir = self.dir.join("cni");
        std::fs::create_dir_all(&cni_dir)?;
        let network = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": "ifo",
            "plugins": [{
                "type": "bridge",
                "bridge": host::BRIDGE,
                "isGateway": true,
                "ipMasq": false,
                "hairpinMode": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{
                        "subnet": POD_CIDR,
                        "rangeStart": self.seat.pods.0.to_string(),
                        "rangeEnd": self.seat.pods.1.to_string(),
                        "gateway": NODE_IP.to_string(),
                    }]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": self.dir.join("cni-ipam"),
                },
            }, {"type": "loopback"}],
        });
        write(
            &cni_dir.join("10-ifo.conflist"),
            serde_json::to_vec_pretty(&network)?,
        )?;
        let config = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{socket}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{pause}"
  # Lowering a container's oom_score_adj needs CAP_SYS_RESOURCE, which machines like this one
  # do not grant even to root: without this, every sandbox fails to start.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{cni}"
"#,
            root = self.dir.join("containerd/root").display(),
            state = self.dir.join("containerd/state").display(),
            socket = self.socket().display(),
            pause = NodeBinaries::PAUSE_IMAGE,
            cni = cni_dir.display(),
        );
        let config_file = self.dir.join("containerd.toml");
        write(&config_file, config)?;
        let mut cmd = Command::new("containerd");
        cmd.arg("--config").arg(&config_file);
        let process = Process::spawn("containerd", cmd, &self.dir.join("containerd.log"))?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.ctr(&["version"]).is_err() {
            process.check_running()?;
            if Instant::now() > deadline {
                bail!(
                    "containerd did not answer within 30 s; its log:\n{}",
                    process.log_tail(20)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(process)
    }

    /// Runs `ctr` against the node's containerd, in the namespace kubelet uses.
    fn ctr(&self, args: &[&str]) -> Result<String> {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(self.socket())
            .args(["--namespace", "k8s.io"])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .context("running ctr")?;
        stdout_of(out, "ctr", args)
    }

    /// Imports an OCI image archive into the node's containerd, as a registry pull would: pods
    /// naming the image (with `imagePullPolicy: IfNotPresent` or `Never`) start from it.
    pub fn import_image(&self, archive: &Path) -> Result<()> {
        self.ctr(&["images", "import", &archive.display().to_string()])
            .map(|_| ())
            .with_context(|| format!("importing {} into containerd", archive.display()))
    }

    /// Kills a container with SIGKILL, as a crash would: `containerd://<id>` from a pod's status.
    pub fn kill_container(&self, container_id: &str) -> Result<()> {
        let id = container_id
            .strip_prefix("containerd://")
            .unwrap_or(container_id);
        self.ctr(&["tasks", "kill", "--signal", "SIGKILL", id])
            .map(|_| ())
    }

    fn start_scheduler(&self, binaries: &NodeBinaries, kubeconfig: &Path) -> Result<Process> {
        let mut cmd = Command::new(&binaries.kube_scheduler);
        cmd.arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!(
                "--authentication-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg(format!(
                "--authorization-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg("--secure-port=0");
        Process::spawn("kube-scheduler", cmd, &self.dir.join("kube-scheduler.log"))
    }

    fn start_kubelet(&self, binaries: &NodeBinaries) -> Result<Process> {
        let config = format!(
            r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "{ip}"
healthzBindAddress: 127.0.0.1
healthzPort: {healthz_port}
readOnlyPort: 0
cgroupRoot: "{cgroup_root}"
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: "{ca}"}}
authorization: {{mode: Webhook}}
containerRuntimeEndpoint: "unix://{socket}"
# This machine has cgroup v1 and no systemd.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podCIDR: "{pod_cidr}"
clusterDomain: cluster.local
resolvConf: /etc/resolv.conf
# Images come from archives, not a registry: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {{memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}}
# Secrets reach pods' volumes within seconds (certificate rotation), not a minute.
syncFrequency: 10s
serializeImagePulls: false
# Containers' logs with the node's files, not in the machine's /var/log.
podLogsDir: "{logs}"
"#,
            logs = self.dir.join("pod-logs").display(),
            ip = self.seat.ip,
            healthz_port = self.seat.healthz_port,
            cgroup_root = self.seat.cgroup_root,
            ca = self.dir.join("ca.crt").display(),
            socket = self.socket().display(),
            pod_cidr = POD_CIDR,
        );
        let config_file = self.dir.join("kubelet.yaml");
        write(&config_file, config)?;
        let mut cmd = Command::new(&binaries.kubelet);
        cmd.arg(format!("--config={}", config_file.display()))
            .arg(format!(
                "--kubeconfig={}",
                self.dir.join("kubelet.kubeconfig").display()
            ))
            .arg(format!("--root-dir={}", self.dir.join("kubelet").display()))
            .arg(format!(
                "--cert-dir={}",
                self.dir.join("kubelet-pki").display()
            ))
            .arg(format!("--hostname-override={}", self.name))
            .arg(format!("--node-ip={}", self.seat.ip))
            .arg("--v=1");
        Process::spawn("kubelet", cmd, &self.dir.join("kubelet.log"))
    }

    fn start_kube_proxy(&self, binaries: &NodeBinaries) -> Result<Process> {
        let mut cmd = Command::new(&binaries.kube_proxy);
        cmd.arg(format!(
            "--kubeconfig={}",
            self.dir.join("kube-proxy.kubeconfig").display()
        ))
        .arg(format!("--hostname-override={}", self.name))
        .arg(format!("--bind-address={NODE_IP}"))
        .arg(format!("--cluster-cidr={POD_CIDR}"))
        .arg("--proxy-mode=iptables")
        .arg("--metrics-bind-address=127.0.0.1:10249")
        .arg("--healthz-bind-address=127.0.0.1:10256")
        // Leave the machine's conntrack settings alone (and NodePorts off loopback).
        .arg("--conntrack-max-per-core=0")
        .arg("--conntrack-tcp-timeout-established=0")
        .arg("--conntrack-tcp-timeout-close-wait=0")
        .arg("--iptables-localhost-nodeports=false");
        Process::spawn("kube-proxy", cmd, &self.dir.join("kube-proxy.log"))
    }

    /// An error if a component has exited, with the end of its log.
    pub fn check_running(&self) -> Result<()> {
        for process in [
            &self.kubelet,
            &self.kube_proxy,
            &self.scheduler,
            &self.containerd,
        ]
        .into_iter()
        .flatten()
        {
            process.check_running()?;
        }
        Ok(())
    }

    /// Stops the containers (their shims outlive containerd), then the components.
    fn stop(&mut self) {
        for process in [&mut self.kubelet, &mut self.kube_proxy, &mut self.scheduler] {
            if let Some(p) = process.take() {
                p.stop(Duration::from_secs(5));
            }
        }
        if self.containerd.is_some()
            && let Ok(tasks) = self.ctr(&["tasks", "list", "--quiet"])
        {
            for id in tasks.lines().filter(|l| !l.trim().is_empty()) {
                let _ = self.ctr(&["tasks", "kill", "--signal", "SIGKILL", id.trim()]);
            }
        }
        if let Some(p) = self.containerd.take() {
            p.stop(Duration::from_secs(5));
        }
        // Last: kills what is left, unmounts, and restores iptables and kernel settings.
        drop(self.network.take());
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The node's directory in the cluster's: its name is the mark [`Host`] recognises a killed run's
/// leftovers by.
pub(crate) fn node_dir(cluster_dir: &Path) -> PathBuf {
    cluster_dir.join(host::NODE_DIR_MARK.trim_matches('/'))
}
