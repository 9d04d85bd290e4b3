//! The default environment: the project's local real cluster, `ifo-apiserver` as a separate
//! process (so its CPU and memory are its own), and the shipped VM lifecycle rules (or, for the
//! pod workload, the shipped pod rules). The server can be restarted with other settings
//! (persistence on or off) on the same cluster.

use anyhow::{Context, Result, bail};
use ifo_dev::{Cluster, Process, User};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The rules the benchmark's subjects are written for.
const RULES: &str = "rules/kubevirt/vm-lifecycle-rules.yaml";

/// The shipped pod rules (`--pods`): `pod-rules` granted every namespace (its `spec.namespaces`
/// taken off, as an admin who lets every namespace's Jobs hold their nodes would), and
/// `protected-pod-rules`, whose `spec.namespaces` the benchmark sets to the namespaces it opts
/// in to protection, as an admin would.
const POD_RULES: &str = "rules/kubernetes/pod-rules.yaml";
const PROTECTED_POD_RULES: &str = "rules/kubernetes/protected-pod-rules.yaml";

/// Every shipped ruleset (`--all-rules`), and the read access their targets need.
const ALL_RULES: [&str; 2] = ["deploy/rbac/rule-targets.yaml", "deploy/rules/bundle.yaml"];

/// The CRD `ifo-apiserver serve --persist` mirrors live operations into.
pub(crate) const PERSIST_CRD: &str = "deploy/persist/crd.yaml";

/// The persistence CRD in the source tree; an error saying what is missing when it is not there.
pub(crate) fn persist_crd() -> Result<PathBuf> {
    let path = ifo_dev::source_dir().join(PERSIST_CRD);
    if !path.is_file() {
        bail!(
            "{} is missing: persistence (`ifo-apiserver serve --persist`) needs its CRD, and \
             this source tree has none",
            path.display()
        );
    }
    Ok(path)
}

/// How to run the server.
#[derive(Clone, Debug)]
pub(crate) struct Settings {
    pub debounce: Duration,
    /// `PERSIST=true`: mirror every live operation into an `inflightoperations.ifo.kubevirt.io`
    /// custom resource.
    pub persist: bool,
    /// More of the server's environment (`--server-env`), set last.
    pub env: Vec<(String, String)>,
    /// Apply every shipped ruleset, not only [`RULES`].
    pub all_rules: bool,
    /// `--flood`: [`RULES`] with the rule that is slow on the flooded object
    /// ([`crate::flood::SLOW_RULE`]).
    pub slow_rule: bool,
    /// `--pods`: the shipped pod rules instead of [`RULES`], protection granted to these
    /// namespaces (besides the shipped `kube-system`).
    pub pod_rules: Option<Vec<String>>,
    /// `EVICTION_GUARD=true`, and the guard's webhook registered with kube-apiserver: every
    /// eviction is judged by the server.
    pub guard: bool,
}

/// A running server.
#[derive(Clone, Debug)]
pub(crate) struct Server {
    pub pid: u32,
    pub log: PathBuf,
    pub cold_start: ColdStart,
}

/// How long a server took to start, with what the cluster held at the time.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub(crate) struct ColdStart {
    /// Process start → `/readyz` answers 200, seen from outside (asked every 20 ms).
    pub ready_seconds: f64,
    /// The server's own figure (`ifo_initial_sync_seconds{stage="complete"}`) for its start →
    /// every first list of the initial sync evaluated: the rules' targets are all listed.
    pub complete_seconds: f64,
    /// The server's resident memory then (`VmRSS`), and its peak so far (`VmHWM`), in MiB.
    pub rss_mib: Option<f64>,
    pub peak_rss_mib: Option<f64>,
    /// The floor: kube-apiserver streaming the same subjects to a client that only reads them
    /// (measured after the server is ready, by the benchmark), and listing them in pages.
    pub stream_floor_seconds: Option<f64>,
    pub list_floor_seconds: Option<f64>,
}

enum Request {
    Serve(Settings, mpsc::Sender<Result<Server>>),
    StopServer(mpsc::Sender<()>),
}

/// What the benchmark needs from the running environment.
pub(crate) struct Local {
    pub kubeconfig: PathBuf,
    pub apiserver_pid: u32,
    pub etcd_pid: u32,
    requests: Option<mpsc::Sender<Request>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Local {
    /// Starts the cluster on a thread of its own, which lives as long as the environment: the
    /// children are tied to it and die with it. No server runs until [`Local::serve`].
    pub(crate) fn start() -> Result<Local> {
        let server = std::env::current_exe()?.with_file_name("ifo-apiserver");
        if !server.exists() {
            bail!(
                "{} is missing; build both binaries first: cargo build --release --bins",
                server.display()
            );
        }
        let (ready_tx, ready_rx) = mpsc::channel();
        let (requests, requests_rx) = mpsc::channel::<Request>();
        let thread = std::thread::Builder::new()
            .name("local-cluster".into())
            .spawn(move || {
                let cluster = match Cluster::start(None).context("starting the local cluster") {
                    Ok(cluster) => cluster,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok((
                    cluster.kubeconfig(User::Admin),
                    cluster.apiserver_pid(),
                    cluster.etcd_pid(),
                )));
                let mut running: Option<Process> = None;
                let mut rules_applied = false;
                // Until the benchmark drops its handle.
                while let Ok(request) = requests_rx.recv() {
                    match request {
                        Request::Serve(settings, reply) => {
                            if let Some(old) = running.take() {
                                old.stop(Duration::from_secs(10));
                            }
                            let started = serve(&cluster, &server, settings, &mut rules_applied);
                            let answer = started.map(|(process, log, cold_start)| {
                                let server = Server {
                                    pid: process.pid(),
                                    log,
                                    cold_start,
                                };
                                running = Some(process);
                                server
                            });
                            let _ = reply.send(answer);
                        }
                        Request::StopServer(reply) => {
                            if let Some(old) = running.take() {
                                old.stop(Duration::from_secs(10));
                            }
                            let _ = reply.send(());
                        }
                    }
                }
                drop(running);
                cluster.shutdown();
            })?;
        let (kubeconfig, apiserver_pid, etcd_pid) =
            ready_rx.recv().context("the local cluster thread died")??;
        Ok(Local {
            kubeconfig,
            apiserver_pid,
            etcd_pid,
            requests: Some(requests),
            thread: Some(thread),
        })
    }

    /// Starts the server with `settings` (stopping the one running), registers it as the
    /// APIService and waits until it has synced the rules' targets and is served through
    /// kube-apiserver.
    pub(crate) fn serve(&self, settings: Settings) -> Result<Server> {
        let (reply, answer) = mpsc::channel();
        self.send(Request::Serve(settings, reply))?;
        answer.recv().context("the local cluster thread died")?
    }

    /// Stops the running server, if any.
    pub(crate) fn stop_server(&self) -> Result<()> {
        let (reply, answer) = mpsc::channel();
        self.send(Request::StopServer(reply))?;
        answer.recv().context("the local cluster thread died")
    }

    fn send(&self, request: Request) -> Result<()> {
        self.requests
            .as_ref()
            .context("the local cluster is stopped")?
            .send(request)
            .ok()
            .context("the local cluster thread died")
    }
}

fn serve(
    cluster: &Cluster,
    binary: &Path,
    settings: Settings,
    rules_applied: &mut bool,
) -> Result<(Process, PathBuf, ColdStart)> {
    if settings.persist {
        let crd = persist_crd()?.display().to_string();
        let rbac = ifo_dev::source_dir()
            .join("deploy/persist/rbac.yaml")
            .display()
            .to_string();
        cluster.kubectl_run(
            User::Admin,
            &["apply", "--server-side", "-f", &crd, "-f", &rbac],
            None,
        )?;
        cluster.kubectl_run(
            User::Admin,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "-f",
                &crd,
            ],
            None,
        )?;
    }
    let ports = ifo_dev::Ports::free()?;
    let port = ports.api;
    let debounce = format!("{}ms", settings.debounce.as_millis());
    let log = if settings.persist {
        "ifo-apiserver-persist.log"
    } else {
        "ifo-apiserver.log"
    };
    let spawned = Instant::now();
    let mut env = vec![
        ("DEBOUNCE_THRESHOLD", debounce.as_str()),
        ("LOG_LEVEL", "warn"),
        // Set either way, so a PERSIST in the benchmark's environment cannot change a run.
        ("PERSIST", if settings.persist { "true" } else { "false" }),
        (
            "EVICTION_GUARD",
            if settings.guard { "true" } else { "false" },
        ),
    ];
    env.extend(settings.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let process = ifo_dev::spawn_server(cluster, binary, ports, &env, log)?;
    let log = cluster.dir().join(log);
    let with_log = |e: anyhow::Error| e.context(format!("server log:\n{}", process.log_tail(20)));
    // A restarted server is served before it has synced the rules' targets, and the
    // APIService may still say Available from the previous one: wait for readiness first.
    wait_until(
        Duration::from_secs(180),
        Duration::from_millis(20),
        "the server's /readyz",
        || {
            process.check_running()?;
            Ok(readyz(port))
        },
    )
    .map_err(with_log)?;
    let ready = spawned.elapsed();
    cluster.register_apiservice(ports).map_err(with_log)?;
    cluster
        .wait_live_api(Duration::from_secs(90))
        .map_err(with_log)?;
    if settings.guard {
        cluster.register_guard_webhook(ports).map_err(with_log)?;
    }
    if let Some(namespaces) = settings.pod_rules.as_ref().filter(|_| !*rules_applied) {
        apply_pod_rules(cluster, namespaces).map_err(with_log)?;
        *rules_applied = true;
    }
    if !*rules_applied {
        let rules = ifo_dev::source_dir().join(RULES);
        let rules = rules.display().to_string();
        if settings.slow_rule {
            let mut ruleset = manifest(cluster, &rules)?;
            ruleset["spec"]["rules"]
                .as_array_mut()
                .context("the VM rules have no rules")?
                .push(serde_json::json!({
                    "operation": "Churning",
                    "expression": crate::flood::SLOW_RULE,
                }));
            apply_object(cluster, &ruleset)?;
        } else {
            cluster.kubectl_run(User::Admin, &["apply", "-f", &rules], None)?;
        }
        wait_ready(cluster, &[&rules]).map_err(with_log)?;
        if settings.all_rules {
            for file in ALL_RULES {
                let file = ifo_dev::source_dir().join(file).display().to_string();
                cluster.kubectl_run(User::Admin, &["apply", "-f", &file], None)?;
            }
        }
        *rules_applied = true;
    }
    wait_until(
        Duration::from_secs(60),
        Duration::from_millis(250),
        "the live API through kube-apiserver",
        || {
            Ok(cluster
                .kubectl_run(
                    User::Admin,
                    &[
                        "get",
                        "--raw",
                        "/apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations?limit=1",
                    ],
                    None,
                )
                .is_ok())
        },
    )
    .map_err(with_log)?;
    let direct = direct_kubeconfig(cluster, port)?;
    let mut complete = None;
    wait_until(
        Duration::from_secs(180),
        Duration::from_millis(250),
        "the server's initial sync (ifo_initial_sync_seconds)",
        || {
            complete = initial_sync_complete(cluster, &direct)?;
            Ok(complete.is_some())
        },
    )
    .map_err(with_log)?;
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", process.pid())).unwrap_or_default();
    let cold_start = ColdStart {
        ready_seconds: ready.as_secs_f64(),
        complete_seconds: complete.unwrap_or_default(),
        rss_mib: mib(&status, "VmRSS:"),
        peak_rss_mib: mib(&status, "VmHWM:"),
        stream_floor_seconds: None,
        list_floor_seconds: None,
    };
    Ok((process, log, cold_start))
}

/// Applies the shipped pod rules, `pod-rules` granted every namespace and
/// `protected-pod-rules` granted `namespaces` as well, and waits until both are Ready.
fn apply_pod_rules(cluster: &Cluster, namespaces: &[String]) -> Result<()> {
    let pod_rules = ifo_dev::source_dir().join(POD_RULES).display().to_string();
    let protected = ifo_dev::source_dir()
        .join(PROTECTED_POD_RULES)
        .display()
        .to_string();
    let mut ruleset = manifest(cluster, &protected)?;
    let granted = ruleset["spec"]["namespaces"]
        .as_array_mut()
        .with_context(|| format!("{PROTECTED_POD_RULES} lists no namespaces"))?;
    granted.extend(namespaces.iter().map(|ns| serde_json::json!(ns)));
    let mut jobs = manifest(cluster, &pod_rules)?;
    if let Some(spec) = jobs["spec"].as_object_mut() {
        spec.remove("namespaces");
    }
    apply_object(cluster, &jobs)?;
    apply_object(cluster, &ruleset)?;
    wait_ready(cluster, &[&pod_rules, &protected]).context("waiting for the pod rules to be Ready")
}

/// `kubectl apply` of `object`.
fn apply_object(cluster: &Cluster, object: &serde_json::Value) -> Result<()> {
    cluster.kubectl_run(
        User::Admin,
        &["apply", "-f", "-"],
        Some(&object.to_string()),
    )?;
    Ok(())
}

/// Waits (60 s at the most) until the objects of the manifest `files` are Ready.
fn wait_ready(cluster: &Cluster, files: &[&str]) -> Result<()> {
    let mut args = vec!["wait", "--for=condition=Ready", "--timeout=60s"];
    for file in files {
        args.extend(["-f", file]);
    }
    cluster.kubectl_run(User::Admin, &args, None)?;
    Ok(())
}

/// The object of a one-object manifest file, as JSON.
fn manifest(cluster: &Cluster, path: &str) -> Result<serde_json::Value> {
    let text = cluster.kubectl_run(
        User::Admin,
        &["create", "--dry-run=client", "-o", "json", "-f", path],
        None,
    )?;
    serde_json::from_str(&text).with_context(|| format!("reading {path}"))
}

/// A `/proc/<pid>/status` line's size (`VmRSS:    1234 kB`) in MiB.
fn mib(status: &str, field: &str) -> Option<f64> {
    let line = status.lines().find_map(|l| l.strip_prefix(field))?;
    let kib: f64 = line.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some(kib / 1024.0)
}

/// A kubeconfig reaching the server on loopback `port` directly, as the admin (its client
/// certificate is of the cluster's CA, which the server trusts); the serving certificate is
/// not checked on loopback.
fn direct_kubeconfig(cluster: &Cluster, port: u16) -> Result<PathBuf> {
    let admin = std::fs::read(cluster.kubeconfig(User::Admin))?;
    let mut config: serde_json::Value = serde_json::from_slice(&admin)?;
    config["clusters"][0]["cluster"] = serde_json::json!({
        "server": format!("https://127.0.0.1:{port}"),
        "insecure-skip-tls-verify": true,
    });
    let path = cluster.dir().join("kubeconfig-admin-direct.json");
    ifo_dev::pki::write_private(&path, serde_json::to_vec(&config)?)?;
    Ok(path)
}

/// The server's `ifo_initial_sync_seconds{stage="complete"}`, once it has one.
fn initial_sync_complete(cluster: &Cluster, kubeconfig: &Path) -> Result<Option<f64>> {
    let out = std::process::Command::new(&cluster.binaries.kubectl)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(["get", "--raw", "/metrics"])
        .output()?;
    if !out.status.success() {
        bail!(
            "reading the server's /metrics: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("ifo_initial_sync_seconds{stage=\"complete\"} "))
        .and_then(|v| v.trim().parse().ok()))
}

fn wait_until(
    timeout: Duration,
    every: Duration,
    what: &str,
    mut ok: impl FnMut() -> Result<bool>,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while !ok()? {
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(every);
    }
    Ok(())
}

/// True when the server on loopback `port` answers `/readyz` with 200 (it needs no
/// credentials; the certificate is not checked on loopback).
fn readyz(port: u16) -> bool {
    let probe = || -> Result<bool> {
        let mut builder = openssl::ssl::SslConnector::builder(openssl::ssl::SslMethod::tls())?;
        builder.set_verify(openssl::ssl::SslVerifyMode::NONE);
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let tcp = TcpStream::connect_timeout(&address, Duration::from_secs(1))?;
        tcp.set_read_timeout(Some(Duration::from_secs(2)))?;
        tcp.set_write_timeout(Some(Duration::from_secs(2)))?;
        let mut tls = builder
            .build()
            .configure()?
            .verify_hostname(false)
            .connect("localhost", tcp)?;
        tls.write_all(b"GET /readyz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
        let mut head = [0u8; 12];
        tls.read_exact(&mut head)?;
        Ok(head.starts_with(b"HTTP/1.1 200"))
    };
    probe().unwrap_or(false)
}

impl Drop for Local {
    fn drop(&mut self) {
        // Closing the channel ends the thread, which stops everything.
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
