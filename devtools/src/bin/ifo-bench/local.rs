//! The default environment: the project's local real cluster, `ifo-apiserver` as a separate
//! process (so its CPU and memory are its own), and the shipped VM lifecycle rules.

use anyhow::{Context, Result, bail};
use ifo_dev::{Cluster, User};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

/// What the benchmark needs from the running environment.
pub struct Local {
    pub kubeconfig: PathBuf,
    pub server_pid: u32,
    pub server_log: PathBuf,
    stop: mpsc::Sender<()>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The rules the benchmark's subjects are written for.
const RULES: &str = "rules/kubevirt/vm-lifecycle-rules.yaml";

impl Local {
    /// Starts everything on a thread of its own, which lives as long as the environment: the
    /// children are tied to it and die with it.
    pub fn start(debounce: Duration) -> Result<Local> {
        let server = std::env::current_exe()?.with_file_name("ifo-apiserver");
        if !server.exists() {
            bail!(
                "{} is missing; build both binaries first: cargo build --release --bins",
                server.display()
            );
        }
        let (ready_tx, ready_rx) = mpsc::channel();
        let (stop, stop_rx) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("local-cluster".into())
            .spawn(move || {
                let started = (|| -> Result<_> {
                    let cluster = Cluster::start(None).context("starting the local cluster")?;
                    let port = ifo_dev::free_port()?;
                    let debounce = format!("{}ms", debounce.as_millis());
                    let process = ifo_dev::spawn_server(
                        &cluster,
                        &server,
                        port,
                        &[("DEBOUNCE_THRESHOLD", &debounce), ("LOG_LEVEL", "warn")],
                        "ifo-apiserver.log",
                    )?;
                    cluster.register_apiservice(port)?;
                    cluster
                        .wait_apiservice_available(Duration::from_secs(90))
                        .with_context(|| format!("server log:\n{}", process.log_tail(20)))?;
                    let rules = ifo_dev::source_dir().join(RULES);
                    let rules = rules.display().to_string();
                    cluster.kubectl_run(User::Admin, &["apply", "-f", &rules], None)?;
                    cluster.kubectl_run(
                        User::Admin,
                        &[
                            "wait",
                            "--for=condition=Ready",
                            "--timeout=60s",
                            "-f",
                            &rules,
                        ],
                        None,
                    )?;
                    Ok((cluster, process))
                })();
                match started {
                    Ok((cluster, process)) => {
                        let _ = ready_tx.send(Ok((
                            cluster.kubeconfig(User::Admin),
                            process.pid(),
                            cluster.dir().join("ifo-apiserver.log"),
                        )));
                        let _ = stop_rx.recv();
                        drop(process);
                        cluster.shutdown();
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            })?;
        let (kubeconfig, server_pid, server_log) =
            ready_rx.recv().context("the local cluster thread died")??;
        Ok(Local {
            kubeconfig,
            server_pid,
            server_log,
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        let _ = self.stop.send(());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
