//! One real control plane and one `ifo-apiserver` for the whole test binary. Tests isolate
//! themselves by namespace (and by ruleset name). The cluster and server are started on a thread
//! that lives as long as the process, so the kernel stops them when the tests end or are killed.
//!
//! Every test binary that uses it gets its own cluster and server, configured by a [`Builder`].
//! The tests of one binary share that one environment, so they must all ask for the same
//! configuration: [`Builder::start`] panics, naming both, when a test asks for another.

use anyhow::{Context, Result};
use ifo_dev::{Cluster, Process, User};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

/// How long the live API may take to be served through kube-apiserver after the server starts:
/// the aggregator's discovery retries a failed fetch after up to a minute.
const SERVED_WITHIN: Duration = Duration::from_secs(120);

/// The shared cluster and server of a test binary (see the [module](self) and [`Env::builder`]).
pub struct Env {
    /// The local real control plane (etcd, kube-apiserver, controllers).
    pub cluster: Cluster,
    /// The port the server's API listens on (loopback).
    pub port: u16,
    /// The port of the server's admission doors (`ADMISSION_PORT`: what the webhooks call).
    pub admission_port: u16,
    /// The port of the server's probes (`HEALTH_PORT`: plain HTTP, loopback).
    pub health_port: u16,
    /// What the environment was started with.
    config: Config,
    server: Mutex<Option<Process>>,
    /// How many times the server was started (each start logs to its own file).
    starts: AtomicUsize,
    /// The CA of the server's certificate, for calling it directly.
    pub(crate) serving_ca: PathBuf,
}

/// How the restart tests stop the server.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// SIGTERM: a graceful shutdown, as in a rollout.
    Term,
    /// SIGKILL: a crash.
    Kill,
}

/// The test server's limit on one user's open watches.
pub const MAX_WATCHES_PER_USER: usize = 64;

/// The server's `DEBOUNCE_THRESHOLD` unless a test asks for another: short, so operations are
/// seen ending quickly.
const DEFAULT_DEBOUNCE: &str = "3s";

/// The environment of this process, once started.
static ENV: OnceLock<&'static Env> = OnceLock::new();

/// What an environment runs with; two requests for the environment agree when these are equal.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Config {
    persist: bool,
    debounce: String,
    settings: Vec<(String, String)>,
    /// Whether kube-apiserver sends rulesets to the server's admission door.
    ruleset_webhook: bool,
    /// Whether kube-apiserver presents its webhook client certificate to the doors, and the
    /// server answers only it there (`ADMISSION_ALLOWED_NAMES`).
    webhook_client_certificate: bool,
    /// Manifests of the workspace applied before the server starts (what it needs at start).
    manifests: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            persist: false,
            debounce: DEFAULT_DEBOUNCE.to_owned(),
            settings: Vec::new(),
            ruleset_webhook: true,
            webhook_client_certificate: true,
            manifests: Vec::new(),
        }
    }
}

/// As the builder calls that ask for it, e.g. `Env::builder().persist(true).debounce("30s")`.
impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Env::builder()")?;
        if self.persist {
            f.write_str(".persist(true)")?;
        }
        if self.debounce != DEFAULT_DEBOUNCE {
            write!(f, ".debounce({:?})", self.debounce)?;
        }
        if !self.ruleset_webhook {
            f.write_str(".ruleset_webhook(false)")?;
        }
        if !self.webhook_client_certificate {
            f.write_str(".webhook_client_certificate(false)")?;
        }
        if !self.manifests.is_empty() {
            write!(f, ".manifests(&{:?})", self.manifests)?;
        }
        if !self.settings.is_empty() {
            f.write_str(".settings(&[")?;
            for (i, (name, value)) in self.settings.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "({name:?}, {value:?})")?;
            }
            f.write_str("])")?;
        }
        Ok(())
    }
}

/// How a test wants the environment of its binary: [`Env::builder`], then [`Builder::start`].
#[derive(Clone, Debug, Default)]
#[must_use = "the environment starts with `.start()`"]
pub struct Builder {
    config: Config,
}

impl Builder {
    /// Persistence mode (`PERSIST`): the persisted CRD and its RBAC (`deploy/persist/`)
    /// installed first, copies written at most once a second each. Off unless set.
    pub fn persist(mut self, persist: bool) -> Self {
        self.config.persist = persist;
        self
    }

    /// The server's debounce grace, `DEBOUNCE_THRESHOLD` (e.g. `30s`, the default of a real
    /// install); 3 s unless set.
    pub fn debounce(mut self, threshold: &str) -> Self {
        threshold.clone_into(&mut self.config.debounce);
        self
    }

    /// Whether the cluster sends rulesets created or changed to the server's admission door
    /// (the webhook `ifo-ruleset-validation`, as an install has it), which refuses those that
    /// do not compile. On unless set; off for a binary whose tests need such a ruleset in the
    /// cluster (what an install gets when its server is down while a ruleset is applied).
    pub fn ruleset_webhook(mut self, on: bool) -> Self {
        self.config.ruleset_webhook = on;
        self
    }

    /// Whether kube-apiserver presents a client certificate to the admission webhooks, and the
    /// server's doors answer it only (`ADMISSION_ALLOWED_NAMES`), as kubeadm-style clusters can
    /// be set up. On unless set; off, the cluster is as managed control planes (EKS, GKE, AKS)
    /// are: kube-apiserver presents none, and the doors answer anyone, kube-apiserver among them.
    pub fn webhook_client_certificate(mut self, on: bool) -> Self {
        self.config.webhook_client_certificate = on;
        self
    }

    /// Manifests of the workspace (paths from its root, `deploy/certificates/rbac.yaml`)
    /// applied to the cluster before the server starts: what the server needs from its first
    /// moment, as an install applies it with the server's own manifests.
    pub fn manifests(mut self, paths: &[&str]) -> Self {
        self.config
            .manifests
            .extend(paths.iter().map(|p| (*p).to_owned()));
        self
    }

    /// More settings of the server, `(variable, value)` (e.g. a shorter
    /// `WATCH_PROBE_INTERVAL`), after the environment's own, so they override them. Each call
    /// adds to the settings of the calls before.
    pub fn settings(mut self, settings: &[(&str, &str)]) -> Self {
        self.config.settings.extend(
            settings
                .iter()
                .map(|&(name, value)| (name.to_owned(), value.to_owned())),
        );
        self
    }

    /// The environment of this test binary, started on first use.
    ///
    /// # Panics
    ///
    /// If the environment cannot start, or if it was started with another configuration (the
    /// tests of one binary share one environment: a test that needs another gets a binary of
    /// its own).
    pub fn start(self) -> &'static Env {
        let env = *ENV.get_or_init(|| start_on_thread(self.config.clone()));
        assert!(
            env.config == self.config,
            "this test binary's environment was started as `{}.start()`, and this test asks \
             for `{}.start()`: the tests of one binary share one cluster and server, so they \
             must ask for the same one (a test that needs another belongs in a binary of its \
             own)",
            env.config,
            self.config,
        );
        env
    }
}

/// The shared environment with the defaults, started on first use: `Env::builder().start()`.
pub fn env() -> &'static Env {
    Env::builder().start()
}

/// The environment of this process if it was started, whatever its configuration.
pub(crate) fn running() -> Option<&'static Env> {
    ENV.get().copied()
}

/// Boots the environment on a thread that lives as long as the process (the cluster's and the
/// server's processes get the parent-death signal when the thread that spawned them ends).
fn start_on_thread(config: Config) -> &'static Env {
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("cluster".into())
        .spawn(move || {
            let result = boot(config).map_err(|e| format!("{e:#}"));
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
}

/// Stops the server and the cluster when the test binary exits (the harness calls `exit`).
extern "C" fn cleanup() {
    if let Some(env) = ENV.get() {
        if let Ok(mut server) = env.server.lock() {
            server.take();
        }
        env.cluster.shutdown();
    }
}

/// The workspace's root (this crate's parent directory).
fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("test-support/ is in the workspace's root")
}

fn start_server(
    cluster: &Cluster,
    (ports, health_port): (ifo_dev::Ports, u16),
    start: usize,
    config: &Config,
) -> Result<Process> {
    let log = match start {
        0 => "ifo-apiserver.log".to_string(),
        n => format!("ifo-apiserver.{n}.log"),
    };
    let max_watches = MAX_WATCHES_PER_USER.to_string();
    let health_port = health_port.to_string();
    let mut settings = vec![
        ("HEALTH_PORT", health_port.as_str()),
        ("DEBOUNCE_THRESHOLD", config.debounce.as_str()),
        ("LOG_LEVEL", "info,ifo=debug"),
        // Low enough for a test to reach it with one user, high enough for every other test.
        ("MAX_WATCHES_PER_USER", max_watches.as_str()),
        // Tests wait for a ruleset's conditions and counts to change one after the other; a
        // real install writes them at most once a minute.
        ("RULESET_STATUS_INTERVAL", "5s"),
        // The maintenance guard, registered with the cluster (see `boot`), checking that
        // kube-apiserver reaches it more often than a real install does.
        ("EVICTION_GUARD", "true"),
        ("GUARD_REACH_CHECK_INTERVAL", "2s"),
    ];
    if config.webhook_client_certificate {
        // The admission doors answer kube-apiserver only: it presents this certificate to them.
        settings.push(("ADMISSION_ALLOWED_NAMES", ifo_dev::WEBHOOK_CLIENT_NAME));
    }
    if config.persist {
        settings.extend([("PERSIST", "true"), ("PERSIST_INTERVAL", "1s")]);
    }
    settings.extend(
        config
            .settings
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str())),
    );
    ifo_dev::spawn_server(cluster, &crate::server_binary(), ports, &settings, &log)
}

fn boot(config: Config) -> Result<&'static Env> {
    let cluster = if config.webhook_client_certificate {
        Cluster::start(None)?
    } else {
        Cluster::start_without_webhook_client_certificate(None)?
    };
    if config.persist {
        let dir = workspace_root().join("deploy/persist");
        for file in ["crd.yaml", "rbac.yaml"] {
            let path = dir.join(file);
            let path = path.to_str().context("a path that is not UTF-8")?;
            cluster.kubectl_run(User::Admin, &["apply", "--server-side", "-f", path], None)?;
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
    for manifest in &config.manifests {
        let path = workspace_root().join(manifest);
        let path = path.to_str().context("a path that is not UTF-8")?;
        cluster.kubectl_run(User::Admin, &["apply", "-f", path], None)?;
    }
    let (ports, health_port) = (ifo_dev::Ports::free()?, ifo_dev::free_port()?);
    let server = start_server(&cluster, (ports, health_port), 0, &config)?;
    cluster.register_apiservice(ports)?;
    if config.ruleset_webhook {
        cluster.register_ruleset_webhook(ports)?;
    }
    cluster.register_guard_webhook(ports)?;
    let serving_ca = cluster.dir().join("pki/serving-ca.crt");
    std::fs::write(&serving_ca, &cluster.serving.ca_pem)?;
    let env: &'static Env = Box::leak(Box::new(Env {
        cluster,
        port: ports.api,
        admission_port: ports.admission,
        health_port,
        config,
        server: Mutex::new(Some(server)),
        starts: AtomicUsize::new(1),
        serving_ca,
    }));
    env.cluster
        .wait_live_api(SERVED_WITHIN)
        .with_context(|| format!("server log:\n{}", env.server_log_tail(30)))?;
    Ok(env)
}

impl Env {
    /// How a test asks for the environment of its binary: the defaults unless set, then
    /// [`Builder::start`], e.g. `Env::builder().persist(true).start()`.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The server's API and admission ports.
    pub fn ports(&self) -> ifo_dev::Ports {
        ifo_dev::Ports {
            api: self.port,
            admission: self.admission_port,
        }
    }

    /// The process id of the running server.
    pub fn server_pid(&self) -> u32 {
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner());
        server.as_ref().expect("the server runs").pid()
    }

    /// The last `lines` lines of the running server's log (empty when none runs).
    pub fn server_log_tail(&self, lines: usize) -> String {
        let server = self.server.lock().unwrap_or_else(|p| p.into_inner());
        server
            .as_ref()
            .map(|p| p.log_tail(lines))
            .unwrap_or_default()
    }

    /// Waits until kubectl can use the live API through kube-apiserver (after a start or a
    /// restart of the server: [`Cluster::wait_live_api`]), or panics with the server's log.
    pub fn wait_served(&self) {
        self.cluster
            .wait_live_api(SERVED_WITHIN)
            .unwrap_or_else(|e| panic!("{e:#}\nserver log:\n{}", self.server_log_tail(30)));
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
        let start = self.starts.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(format!("server-{start}"))
            .spawn(move || {
                if tx
                    .send(start_server(
                        &self.cluster,
                        (self.ports(), self.health_port),
                        start,
                        &self.config,
                    ))
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_tests_short_debounce_without_persistence() {
        let config = Env::builder().config;
        assert_eq!(
            config,
            Config {
                persist: false,
                debounce: "3s".into(),
                settings: Vec::new(),
                ruleset_webhook: true,
                webhook_client_certificate: true,
                manifests: Vec::new(),
            }
        );
        assert_eq!(config.to_string(), "Env::builder()");
        assert_eq!(Env::builder().debounce("3s").config, config);
    }

    #[test]
    fn a_configuration_reads_as_the_calls_that_ask_for_it() {
        let config = Env::builder()
            .persist(true)
            .debounce("30s")
            .settings(&[("WATCH_PROBE_INTERVAL", "2s")])
            .settings(&[("K8S_API_TIMEOUT", "5s")])
            .ruleset_webhook(false)
            .webhook_client_certificate(false)
            .manifests(&["deploy/certificates/rbac.yaml"])
            .config;
        assert_eq!(
            config.to_string(),
            r#"Env::builder().persist(true).debounce("30s").ruleset_webhook(false).webhook_client_certificate(false).manifests(&["deploy/certificates/rbac.yaml"]).settings(&[("WATCH_PROBE_INTERVAL", "2s"), ("K8S_API_TIMEOUT", "5s")])"#
        );
        assert_ne!(config, Env::builder().persist(true).config);
    }

    #[test]
    fn the_workspace_root_holds_the_persisted_crd() {
        assert!(workspace_root().join("deploy/persist/crd.yaml").is_file());
    }
}
