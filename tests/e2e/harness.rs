//! One real control plane and one `ifo-apiserver` for the whole test binary. Tests isolate
//! themselves by namespace (and by ruleset name). The cluster and server are started on a thread
//! that lives as long as the process, so the kernel stops them when the tests end or are killed.
//!
//! Shared by the `e2e` and `restart` test binaries (each gets its own cluster and server); each
//! uses only part of it.

use anyhow::{Context, Result};
use ifo_dev::{Cluster, Process, User};
use serde_json::json;
use std::process::Command;
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

pub struct Env {
    pub cluster: Cluster,
    pub port: u16,
    server: Mutex<Option<Process>>,
    /// How many times the server was started (each start logs to its own file).
    starts: std::sync::atomic::AtomicUsize,
    /// The CA of the server's certificate, for calling it directly.
    serving_ca: std::path::PathBuf,
}

/// How the restart tests stop the server.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// SIGTERM: a graceful shutdown, as in a rollout.
    Term,
    /// SIGKILL: a crash.
    Kill,
}

static ENV: OnceLock<&'static Env> = OnceLock::new();

/// Whether the server runs in persistence mode (set before the environment starts).
static PERSIST: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The server's `DEBOUNCE_THRESHOLD` (set before the environment starts); 3 s unless set.
static DEBOUNCE: OnceLock<&'static str> = OnceLock::new();

/// The shared environment with the server's debounce grace at `threshold` (e.g. `30s`, the
/// default of a real install) instead of the tests' short one.
pub fn env_with_debounce(threshold: &'static str) -> &'static Env {
    let _ = DEBOUNCE.set(threshold);
    env()
}

/// More settings of the server (set before the environment starts).
static SETTINGS: OnceLock<&'static [(&'static str, &'static str)]> = OnceLock::new();

/// [`persistent_env`] with more settings of the server (e.g. a shorter `WATCH_PROBE_INTERVAL`).
pub fn persistent_env_with(settings: &'static [(&'static str, &'static str)]) -> &'static Env {
    let _ = SETTINGS.set(settings);
    persistent_env()
}

/// The shared environment with the server in persistence mode: the persisted CRD and its RBAC
/// (`deploy/persist/`) installed first, copies written at most once a second each.
pub fn persistent_env() -> &'static Env {
    PERSIST.store(true, std::sync::atomic::Ordering::SeqCst);
    env()
}

/// The `kubectl-ifo` binary of this build (a workspace member of its own: `cargo build
/// --workspace` builds it next to the test binaries' directory).
pub fn plugin_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test> → target/<profile>/kubectl-ifo
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps")
        .join("kubectl-ifo");
    assert!(
        path.exists(),
        "{} is missing: build the workspace first (cargo build --workspace)",
        path.display()
    );
    path
}

/// The test server's limit on one user's open watches.
pub const MAX_WATCHES_PER_USER: usize = 64;

/// Stops the server and the cluster when the test binary exits (the harness calls `exit`).
extern "C" fn cleanup() {
    if let Some(env) = ENV.get() {
        if let Ok(mut server) = env.server.lock() {
            server.take();
        }
        env.cluster.shutdown();
    }
}

fn start_server(cluster: &Cluster, port: u16, start: usize) -> Result<Process> {
    let log = match start {
        0 => "ifo-apiserver.log".to_string(),
        n => format!("ifo-apiserver.{n}.log"),
    };
    let max_watches = MAX_WATCHES_PER_USER.to_string();
    let mut settings = vec![
        (
            "DEBOUNCE_THRESHOLD",
            DEBOUNCE.get().copied().unwrap_or("3s"),
        ),
        ("LOG_LEVEL", "info,ifo=debug"),
        // Low enough for a test to reach it with one user, high enough for every other test.
        ("MAX_WATCHES_PER_USER", max_watches.as_str()),
    ];
    if PERSIST.load(std::sync::atomic::Ordering::SeqCst) {
        settings.extend([("PERSIST", "true"), ("PERSIST_INTERVAL", "1s")]);
    }
    settings.extend(SETTINGS.get().copied().unwrap_or_default());
    ifo_dev::spawn_server(
        cluster,
        std::path::Path::new(env!("CARGO_BIN_EXE_ifo-apiserver")),
        port,
        &settings,
        &log,
    )
}

fn boot() -> Result<&'static Env> {
    let cluster = Cluster::start(None)?;
    if PERSIST.load(std::sync::atomic::Ordering::SeqCst) {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/persist");
        for file in ["crd.yaml", "rbac.yaml"] {
            let path = format!("{dir}/{file}");
            cluster.kubectl_run(User::Admin, &["apply", "--server-side", "-f", &path], None)?;
        }
        cluster.kubectl_run(
            User::Admin,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd/inflightoperations.ifo.kubevirt.io",
            ],
            None,
        )?;
    }
    let port = ifo_dev::free_port()?;
    let server = start_server(&cluster, port, 0)?;
    cluster.register_apiservice(port)?;
    let serving_ca = cluster.dir().join("pki/serving-ca.crt");
    std::fs::write(&serving_ca, &cluster.serving.ca_pem)?;
    let env: &'static Env = Box::leak(Box::new(Env {
        cluster,
        port,
        server: Mutex::new(Some(server)),
        starts: std::sync::atomic::AtomicUsize::new(1),
        serving_ca,
    }));
    env.cluster
        .wait_apiservice_available(Duration::from_secs(90))
        .with_context(|| format!("server log:\n{}", env.server_log_tail(30)))?;
    Ok(env)
}

/// The shared environment, started on first use.
pub fn env() -> &'static Env {
    ENV.get_or_init(|| {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("cluster".into())
            .spawn(move || {
                let result = boot().map_err(|e| format!("{e:#}"));
                let ok = result.is_ok();
                tx.send(result).unwrap();
                if ok {
                    // SAFETY: registering a plain extern "C" function.
                    #[allow(unsafe_code)]
                    unsafe {
                        libc::atexit(cleanup)
                    };
                    loop {
                        std::thread::park();
                    }
                }
            })
            .expect("spawning the cluster thread");
        match rx.recv().expect("cluster thread") {
            Ok(env) => env,
            Err(e) => panic!("could not start the test cluster: {e}"),
        }
    })
}

impl Env {
    pub fn kubectl(&self, user: User, args: &[&str]) -> Result<String> {
        self.cluster.kubectl_run(user, args, None)
    }

    /// kubectl talking to our server directly (not through kube-apiserver), authenticated by
    /// `user`'s bearer token, which the server checks with a TokenReview.
    pub fn kubectl_direct(&self, user: User, args: &[&str]) -> Result<String> {
        use base64::Engine;
        let token = user
            .token()
            .with_context(|| format!("{} has no bearer token", user.name()))?;
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "ifo", "cluster": {
                "server": format!("https://127.0.0.1:{}", self.port),
                "certificate-authority-data":
                    base64::engine::general_purpose::STANDARD.encode(&self.cluster.serving.ca_pem),
            }}],
            "users": [{"name": user.name(), "user": {"token": token}}],
            "contexts": [{"name": "ifo", "context": {"cluster": "ifo", "user": user.name()}}],
            "current-context": "ifo",
        });
        let path = self
            .cluster
            .dir()
            .join(format!("kubeconfig-direct-{}.json", user.name()));
        std::fs::write(&path, serde_json::to_vec(&config)?)?;
        let out = self
            .cluster
            .kubectl(user)
            .env("KUBECONFIG", &path)
            .args(args)
            .stdin(std::process::Stdio::null())
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The process id of the running server.
    pub fn server_pid(&self) -> u32 {
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner());
        server.as_ref().expect("the server runs").pid()
    }

    pub fn server_log_tail(&self, lines: usize) -> String {
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner());
        server
            .as_ref()
            .map(|p| p.log_tail(lines))
            .unwrap_or_default()
    }

    /// Stops the server and waits until its process is gone.
    pub fn stop_server(&self, how: Stop) {
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(p) = server.as_ref() {
            match how {
                Stop::Term => p.stop(Duration::from_secs(10)),
                Stop::Kill => p.kill(),
            }
        }
    }

    /// Starts the server again, on the same port and with the same settings, from a thread
    /// that lives as long as the test binary: the process gets the parent-death signal when
    /// the thread that spawned it ends, and the server must outlive the test that restarted it.
    pub fn restart_server(&'static self) -> Result<()> {
        let start = self
            .starts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("server-{start}"))
            .spawn(move || {
                if tx
                    .send(start_server(&self.cluster, self.port, start))
                    .is_ok()
                {
                    loop {
                        std::thread::park();
                    }
                }
            })?;
        let process = rx.recv()??;
        let mut server = self.server.lock().unwrap_or_else(|p| p.into_inner());
        *server = Some(process);
        Ok(())
    }

    /// curl arguments that present `user`'s client certificate (from its kubeconfig), issued by
    /// the cluster's client CA.
    pub fn client_cert_args(&self, user: User) -> Vec<String> {
        use base64::Engine;
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(self.cluster.kubeconfig(user)).unwrap()).unwrap();
        let creds = &config["users"][0]["user"];
        let mut args = Vec::new();
        for (field, flag, ext) in [
            ("client-certificate-data", "--cert", "crt"),
            ("client-key-data", "--key", "key"),
        ] {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(creds[field].as_str().unwrap())
                .unwrap();
            let path = self
                .cluster
                .dir()
                .join(format!("client-{}.{ext}", user.name()));
            std::fs::write(&path, pem).unwrap();
            args.push(flag.to_string());
            args.push(path.display().to_string());
        }
        args
    }

    /// Calls our server directly, bypassing kube-apiserver: `(HTTP status, body)`. `extra` are
    /// more curl arguments (headers).
    pub fn direct(&self, path: &str, extra: &[&str]) -> (String, String) {
        self.direct_to(self.port, path, extra)
    }

    /// [`Env::direct_to`] with the response's `Warning` headers: `(HTTP status, warnings,
    /// body)`; status `000` when nothing answered. `extra`: more curl arguments (a client
    /// certificate, from [`Env::client_cert_args`]).
    pub fn direct_warned(
        &self,
        port: u16,
        path: &str,
        extra: &[&str],
    ) -> (String, Vec<String>, String) {
        let headers = self.cluster.dir().join(format!(
            "headers-{}-{:?}.txt",
            std::process::id(),
            std::thread::current().id()
        ));
        let mut args = vec!["-D", headers.to_str().unwrap()];
        args.extend(extra);
        let (code, body) = self.direct_to(port, path, &args);
        let warnings = std::fs::read_to_string(&headers)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("warning")
                    .then(|| value.trim().to_owned())
            })
            .collect();
        (code, warnings, body)
    }

    /// [`Env::direct`] to another server of this cluster, listening on `port`.
    pub fn direct_to(&self, port: u16, path: &str, extra: &[&str]) -> (String, String) {
        let out = Command::new("curl")
            .args(["-s", "--max-time", "10", "-w", "\n%{http_code}", "--cacert"])
            .arg(&self.serving_ca)
            .args(extra)
            .arg(format!("https://127.0.0.1:{port}{path}"))
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", ""));
        (code.to_string(), body.to_string())
    }
}

/// `curl` sending `count` requests at `per_second` over one kept-alive HTTP/2 connection (curl
/// reuses it while the server keeps it open).
pub struct KeepAliveClient(std::process::Child);

impl KeepAliveClient {
    /// Waits for the requests to finish; for each, how many connections it had to open.
    pub fn connects(self) -> Vec<u32> {
        let out = self.0.wait_with_output().expect("curl");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.strip_prefix("CONNECTS ")?.trim().parse().ok())
            .collect()
    }
}

impl Env {
    /// Starts a [`KeepAliveClient`] against the server on `port`, as admin.
    pub fn keep_alive_client(
        &self,
        port: u16,
        path: &str,
        count: usize,
        per_second: u32,
    ) -> KeepAliveClient {
        let url = format!("https://127.0.0.1:{port}{path}");
        let child = Command::new("curl")
            .args(["-s", "--http2", "--max-time", "60", "--rate"])
            .arg(format!("{per_second}/s"))
            .args(["-w", "\nCONNECTS %{num_connects}\n", "--cacert"])
            .arg(&self.serving_ca)
            .args(self.client_cert_args(User::Admin))
            .args(std::iter::repeat_n(url, count))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("curl");
        KeepAliveClient(child)
    }
}

/// Polls `f` until it returns `Some`, or panics with `what` after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() <= deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Env {
    /// A fresh namespace for one test.
    pub fn namespace(&self, prefix: &str) -> String {
        static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let name = format!("{prefix}-{}-{n}", std::process::id() % 10_000);
        self.kubectl(User::Admin, &["create", "namespace", &name])
            .unwrap();
        name
    }

    /// Waits until OperationRuleSet `ruleset` watches its target (a minute: after an outage
    /// of kube-apiserver, the ruleset watch may be in its longest backoff, 30 s).
    pub fn wait_watching(&self, ruleset: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let ors = self.get_json(User::Admin, &["get", "ors", ruleset]);
            if ors["status"]["watchActive"] == true {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "ruleset {ruleset} not watching after 60s: {:#}\nserver log:\n{}",
                ors["status"],
                self.server_log_tail(30)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A fresh namespace with VirtualMachines `vms` and a [`vm_ruleset`] for it, watching.
    /// Returns the namespace and the ruleset's name.
    pub fn vms_with_ruleset(&self, prefix: &str, vms: &[&str]) -> (String, String) {
        let ns = self.namespace(prefix);
        let rs = format!("vm-rules-{ns}");
        self.apply(&vm_ruleset(&rs, &ns));
        for name in vms {
            self.apply(&vm(name, &ns));
        }
        self.wait_watching(&rs);
        (ns, rs)
    }

    /// Gives alice the `view` role in `namespace` (and with it, read access to its operations).
    pub fn grant_alice_view(&self, namespace: &str) {
        self.kubectl(
            User::Admin,
            &[
                "create",
                "rolebinding",
                "alice-view",
                "--clusterrole=view",
                "--user=alice",
                "-n",
                namespace,
            ],
        )
        .unwrap();
    }

    pub fn apply(&self, manifest: &str) {
        self.cluster.apply(manifest).unwrap();
    }

    pub fn get_json(&self, user: User, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        serde_json::from_str(&self.kubectl(user, &all).unwrap()).unwrap()
    }

    /// The live operations in `namespace`, as kubectl reads them through the aggregation layer.
    pub fn ifos(&self, namespace: &str) -> Vec<serde_json::Value> {
        let list = self.get_json(User::Admin, &["get", "ifos", "-n", namespace]);
        list["items"].as_array().cloned().unwrap_or_default()
    }

    /// Patches a subject's status subresource (what a controller would do).
    pub fn set_status(&self, kind: &str, namespace: &str, name: &str, status: serde_json::Value) {
        let patch = serde_json::json!({"status": status}).to_string();
        self.kubectl(
            User::Admin,
            &[
                "patch",
                kind,
                name,
                "-n",
                namespace,
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch,
            ],
        )
        .unwrap();
    }

    /// Streams raw watch events of a path through kube-apiserver.
    pub fn watch(&self, path: &str) -> WatchStream {
        let mut child = self
            .cluster
            .kubectl(User::Admin)
            .args(["get", "--raw", path, "--request-timeout=0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        WatchStream { child, rx }
    }
}

pub struct WatchStream {
    child: std::process::Child,
    rx: mpsc::Receiver<serde_json::Value>,
}

impl WatchStream {
    /// Events until one satisfies `pred` (returned last), or panics after `timeout`.
    pub fn until(
        &self,
        timeout: Duration,
        what: &str,
        pred: impl Fn(&serde_json::Value) -> bool,
    ) -> Vec<serde_json::Value> {
        let deadline = std::time::Instant::now() + timeout;
        let mut seen = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(ev) => {
                    let done = pred(&ev);
                    seen.push(ev);
                    if done {
                        return seen;
                    }
                }
                Err(e) => panic!("{e} while waiting for {what}; events seen: {seen:#?}"),
            }
        }
    }
}

impl Drop for WatchStream {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A namespace with a ruleset and two VMs in flight (vm1 Migrating, vm2 Starting).
pub fn populated(env: &Env, prefix: &str) -> (String, String) {
    let (ns, rs) = env.vms_with_ruleset(prefix, &["vm1", "vm2"]);
    env.set_status(
        "vm",
        &ns,
        "vm1",
        json!({"printableStatus": "Migrating", "migrationTarget": "node-9"}),
    );
    env.set_status("vm", &ns, "vm2", json!({"printableStatus": "Starting"}));
    eventually(Duration::from_secs(30), "two operations", || {
        Some(env.ifos(&ns)).filter(|o| o.len() == 2)
    });
    (ns, rs)
}

/// An OperationRuleSet for VirtualMachines in `namespace`, detecting `printableStatus` states.
pub fn vm_ruleset(name: &str, namespace: &str) -> String {
    format!(
        r#"{{"apiVersion":"ifo.kubevirt.io/v1alpha1","kind":"OperationRuleSet","metadata":{{"name":"{name}"}},
"spec":{{"component":"kubevirt","target":{{"group":"kubevirt.io","version":"v1","resource":"virtualmachines"}},
 "namespaces":["{namespace}"],
 "labels":{{"example.com/team":"virt","ifo.kubevirt.io/operation":"ignored"}},
 "labelExpressions":[{{"key":"example.com/node","expression":"object.status.?nodeName.orValue('none')"}}],
 "rules":[
  {{"operation":"Migrating","expression":"has(object.status) && has(object.status.printableStatus) && object.status.printableStatus == 'Migrating'",
    "message":"'to ' + object.status.?migrationTarget.orValue('?')",
    "outcome":"object.status.?lastMigration.orValue('') == 'Failed' ? 'Failed' : 'Succeeded'"}},
  {{"operation":"Starting","expression":"has(object.status) && has(object.status.printableStatus) && object.status.printableStatus == 'Starting'"}}
 ]}}}}"#
    )
}

pub fn vm(name: &str, namespace: &str) -> String {
    format!(
        r#"{{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{{"name":"{name}","namespace":"{namespace}",
"ownerReferences":[{{"apiVersion":"pool.kubevirt.io/v1alpha1","kind":"VirtualMachinePool","name":"pool-1","uid":"00000000-0000-0000-0000-00000000beef"}}]}},
"spec":{{"running":true}}}}"#
    )
}
