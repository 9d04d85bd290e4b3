//! What the node's steps observe and drive: the server's pods and Lease, VirtualMachines whose
//! status the shipped rules detect, and lists of operations through kube-apiserver.

use anyhow::{Context, Result, bail};
use ifo_dev::User;
use ifo_dev::install::NAMESPACE;
use serde_json::Value;
use std::time::{Duration, Instant};

use super::Ctx;

/// One of the server's pods, as kubectl reports it.
#[derive(Clone, Debug)]
pub(crate) struct Pod {
    pub name: String,
    pub uid: String,
    pub ip: String,
    pub ready: bool,
    pub leader: bool,
    pub restarts: u64,
    pub container_id: String,
    pub deleting: bool,
    /// The node it is bound to (empty while pending).
    pub node: String,
}

/// What `pod` reports on `/metrics`, read straight from it with the admin's client certificate
/// (which the server accepts from the cluster CA).
pub(crate) fn metrics_of(ctx: &Ctx, pod: &Pod) -> Result<String> {
    let pki = ctx.cluster.dir().join("pki");
    let (cert, key) = (pki.join("admin-client.crt"), pki.join("admin-client.key"));
    if !cert.exists() {
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(ctx.cluster.kubeconfig(User::Admin))?)?;
        let user = &config["users"][0]["user"];
        use base64::Engine as _;
        let decode = |field: &str| {
            base64::engine::general_purpose::STANDARD.decode(user[field].as_str().unwrap_or(""))
        };
        std::fs::write(&cert, decode("client-certificate-data")?)?;
        std::fs::write(&key, decode("client-key-data")?)?;
    }
    let out = std::process::Command::new("curl")
        .args(["-sk", "--max-time", "10", "--cert"])
        .arg(&cert)
        .arg("--key")
        .arg(&key)
        .arg(format!("https://{}:8443/metrics", pod.ip))
        .output()
        .context("running curl")?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    anyhow::ensure!(
        text.contains("ifo_leader"),
        "no metrics from pod {}: {text}",
        pod.name
    );
    Ok(text)
}

/// The server's pods.
pub(crate) fn pods(ctx: &Ctx) -> Result<Vec<Pod>> {
    let text = ctx.cluster.kubectl_run(
        User::Admin,
        &[
            "-n",
            NAMESPACE,
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/name=ifo-apiserver",
            "-o",
            "json",
        ],
        None,
    )?;
    let list: Value = serde_json::from_str(&text)?;
    let items = list["items"].as_array().cloned().unwrap_or_default();
    Ok(items
        .iter()
        .map(|p| {
            let status = &p["status"]["containerStatuses"][0];
            Pod {
                name: p["metadata"]["name"].as_str().unwrap_or_default().into(),
                uid: p["metadata"]["uid"].as_str().unwrap_or_default().into(),
                ip: p["status"]["podIP"].as_str().unwrap_or_default().into(),
                ready: status["ready"].as_bool().unwrap_or(false),
                leader: p["metadata"]["labels"]["ifo.kubevirt.io/leader"] == "true",
                restarts: status["restartCount"].as_u64().unwrap_or(0),
                container_id: status["containerID"].as_str().unwrap_or_default().into(),
                deleting: !p["metadata"]["deletionTimestamp"].is_null(),
                node: p["spec"]["nodeName"].as_str().unwrap_or_default().into(),
            }
        })
        .collect())
}

/// The Lease's holder: `<pod>_<random>` (a restarted container is a new candidate).
pub(crate) fn lease_holder(ctx: &Ctx) -> Result<String> {
    ctx.cluster
        .kubectl_run(
            User::Admin,
            &[
                "-n",
                NAMESPACE,
                "get",
                "lease",
                "ifo-apiserver",
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ],
            None,
        )
        .map(|s| s.trim().to_string())
}

/// Waits until two pods are Ready and exactly one carries the leader label and holds the Lease;
/// returns the pods, leader first.
pub(crate) fn settled(ctx: &Ctx, timeout: Duration) -> Result<Vec<Pod>> {
    let deadline = Instant::now() + timeout;
    loop {
        let pods = pods(ctx)?;
        let live: Vec<Pod> = pods.iter().filter(|p| !p.deleting).cloned().collect();
        let leaders: Vec<&Pod> = pods.iter().filter(|p| p.leader).collect();
        let holder = lease_holder(ctx).unwrap_or_default();
        if live.len() == 2
            && live.iter().all(|p| p.ready)
            && pods.len() == 2
            && leaders.len() == 1
            && holder.starts_with(&format!("{}_", leaders[0].name))
        {
            let mut sorted = live;
            sorted.sort_by_key(|p| !p.leader);
            return Ok(sorted);
        }
        if Instant::now() > deadline {
            bail!(
                "the Deployment did not settle on two Ready pods and one leader within \
                 {timeout:?}: {pods:#?}, Lease holder {holder:?}"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// Creates (if needed) a VirtualMachine and sets its `status.printableStatus`, as KubeVirt would.
pub(crate) fn set_vm(ctx: &Ctx, name: &str, state: &str) -> Result<()> {
    set_vm_status(ctx, name, serde_json::json!({"printableStatus": state}))
}

/// Creates (if needed) a VirtualMachine and merges `status` into its status.
pub(crate) fn set_vm_status(ctx: &Ctx, name: &str, status: Value) -> Result<()> {
    ctx.cluster.apply(&format!(
        r#"{{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{{"name":"{name}","namespace":"{}"}},"spec":{{"running":true}}}}"#,
        ctx.ns
    ))?;
    let status = serde_json::json!({ "status": status }).to_string();
    ctx.cluster.kubectl_run(
        User::Admin,
        &[
            "-n",
            &ctx.ns,
            "patch",
            "vm",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ],
        None,
    )?;
    Ok(())
}

/// `kubectl get ifos -n <ns> -o name`, through kube-apiserver, the Service and the leader: the
/// operations' names.
pub(crate) fn list(ctx: &Ctx) -> Result<Vec<String>> {
    let text = ctx.cluster.kubectl_run(
        User::Admin,
        &[
            "get",
            "ifos",
            "-n",
            &ctx.ns,
            "-o",
            "name",
            "--request-timeout=5s",
        ],
        None,
    )?;
    Ok(text
        .lines()
        .map(|l| l.rsplit('/').next().unwrap_or(l).to_string())
        .collect())
}

/// Whether `names` holds an operation of each `(subject, operation)`: operations are named
/// `<subject>-<operation>-<hash>`.
pub(crate) fn holds(names: &[String], expected: &[(&str, &str)]) -> bool {
    expected.iter().all(|(subject, op)| {
        let prefix = format!("{subject}-{}-", op.to_ascii_lowercase());
        names.iter().any(|n| n.starts_with(&prefix))
    })
}

/// Lists until the list holds `expected`; returns how long that took from `since`.
pub(crate) fn until_listed(
    ctx: &Ctx,
    expected: &[(&str, &str)],
    since: Instant,
    timeout: Duration,
) -> Result<Duration> {
    loop {
        let last = match list(ctx) {
            Ok(names) if holds(&names, expected) => return Ok(since.elapsed()),
            Ok(names) => format!("listed {names:?}"),
            Err(e) => format!("{e:#}"),
        };
        if since.elapsed() > timeout {
            bail!("no correct list within {timeout:?} (expected {expected:?}); last: {last}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `kubectl get ifos -n <ns> -w` started now, stopped after `for_`: what it printed first
/// (the current state) must hold `expected`.
pub(crate) fn watch_shows(ctx: &Ctx, expected: &[(&str, &str)], for_: Duration) -> Result<()> {
    let mut child = ctx
        .cluster
        .kubectl(User::Admin)
        .args(["get", "ifos", "-n", &ctx.ns, "-w", "-o", "name"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .context("starting kubectl get ifos -w")?;
    std::thread::sleep(for_);
    let _ = child.kill();
    let out = child.wait_with_output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<String> = text
        .lines()
        .map(|l| l.rsplit('/').next().unwrap_or(l).to_string())
        .collect();
    if !holds(&names, expected) {
        bail!(
            "a restarted watch showed {names:?}, expected {expected:?}; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// Median and maximum of durations, in seconds.
pub(crate) fn median_max(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let median = samples[samples.len() / 2].as_secs_f64();
    let max = samples.last().map_or(0.0, Duration::as_secs_f64);
    (median, max)
}
