//! One real control plane and one `ifo-apiserver` for the whole test binary. Tests isolate
//! themselves by namespace (and by ruleset name). The cluster and server are started on a thread
//! that lives as long as the process, so the kernel stops them when the tests end or are killed.

use anyhow::{Context, Result};
use ifo::dev::{Cluster, Process, User};
use std::process::Command;
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::Duration;

pub struct Env {
    pub cluster: Cluster,
    pub port: u16,
    server: Mutex<Option<Process>>,
}

static ENV: OnceLock<&'static Env> = OnceLock::new();

/// Removes the cluster's files when the test binary exits (the harness calls `exit`).
extern "C" fn cleanup() {
    if let Some(env) = ENV.get() {
        if let Ok(mut server) = env.server.lock() {
            server.take();
        }
        let _ = std::fs::remove_dir_all(env.cluster.dir());
    }
}

fn start_server(cluster: &Cluster, port: u16) -> Result<Process> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ifo-apiserver"));
    cmd.arg("serve")
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
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
        .env("DEBOUNCE_THRESHOLD", "3s")
        .env("LOG_LEVEL", "info,ifo=debug");
    Process::spawn(
        "ifo-apiserver",
        cmd,
        &cluster.dir().join("ifo-apiserver.log"),
    )
}

fn boot() -> Result<&'static Env> {
    let cluster = Cluster::start(None)?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let server = start_server(&cluster, port)?;
    cluster.register_apiservice(port)?;
    let env: &'static Env = Box::leak(Box::new(Env {
        cluster,
        port,
        server: Mutex::new(Some(server)),
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
                    unsafe { libc::atexit(cleanup) };
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

    pub fn server_log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.cluster.dir().join("ifo-apiserver.log"))
            .unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}
