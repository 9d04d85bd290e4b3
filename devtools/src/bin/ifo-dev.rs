//! `ifo-dev`: the product on a local real cluster, for trying it out (`deploy/local.sh`).
//!
//! Starts etcd, kube-apiserver and the controllers it needs, runs `ifo-apiserver` (the binary
//! next to this one) registered as the APIService and as the webhook that validates rulesets
//! (`ifo-ruleset-validation`), applies the shipped rules and the read access they need, drives a
//! small VirtualMachine workload, and streams
//! `kubectl get ifos -A -w --output-watch-events -o wide` (each row labelled with its event:
//! `ADDED`, `MODIFIED`, `DELETED`) until Ctrl-C, which stops everything.
//!
//! With `--node`, the cluster gets a real node and the product is installed the way users
//! install it: the image from `deploy/image.sh`, `kubectl apply -k deploy/` and
//! `certs/generate.sh`; two replicas behind the Service. With `--guard`, the maintenance guard
//! is on and registered (`apiservice/with-guard/` with `--node`), so that a `kubectl drain` of
//! a node with operations in flight waits.
//!
//! Either way the debounce grace is a demo setting, [`DEMO_GRACE`] instead of the 30 s of a real
//! install, so operations are seen to end and complete while watching.

use anyhow::{Context, Result, bail};
use clap::Parser;
use ifo_dev::{Cluster, User};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `DEBOUNCE_THRESHOLD` of the demo: short, so that operations complete while one watches
/// (a real install keeps the default, 30 s).
const DEMO_GRACE: &str = "5s";

#[derive(Parser)]
#[command(
    version,
    about = "The live InFlightOperations server on a local real cluster"
)]
struct Cli {
    /// Where to put the cluster's files (default: the system temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// VirtualMachines the workload moves through their states.
    #[arg(long, default_value_t = 4)]
    vms: usize,
    /// Run a real node (containerd, kubelet, kube-proxy; needs root) and install the product
    /// from `deploy/` as users do, instead of running the server on this machine.
    #[arg(long)]
    node: bool,
    /// Turn on the maintenance guard: evictions of pods on a node whose gate is not Clear are
    /// refused (429) until it is, so `kubectl drain` waits by itself (`deploy/guard/`).
    #[arg(long)]
    guard: bool,
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let server = std::env::current_exe()?.with_file_name("ifo-apiserver");
    if !cli.node && !server.exists() {
        bail!(
            "{} is missing; build it first: cargo build --release --bin ifo-apiserver",
            server.display()
        );
    }
    // The cluster's processes live as long as this thread.
    let (cluster, process, log) = if cli.node {
        let cluster = Cluster::start_with_node(cli.dir.as_deref())
            .context("starting the local cluster with a real node")?;
        let image = cluster.dir().join("ifo-apiserver.oci.tar");
        println!("building the image (deploy/image.sh)…");
        print!("{}", ifo_dev::install::build_image(&image)?);
        let install = ifo_dev::install::Install::run(
            &cluster,
            &image,
            &cluster.dir().join("certs"),
            cli.guard,
        )?;
        // The demo's grace, as a user would change a setting of the installed Deployment.
        cluster.kubectl_run(
            User::Admin,
            &[
                "-n",
                ifo_dev::install::NAMESPACE,
                "set",
                "env",
                "deployment/ifo-apiserver",
                &format!("DEBOUNCE_THRESHOLD={DEMO_GRACE}"),
            ],
            None,
        )?;
        install.wait_available(&cluster, Duration::from_secs(180))?;
        let log = format!(
            "kubectl -n {} logs -l app.kubernetes.io/name=ifo-apiserver",
            ifo_dev::install::NAMESPACE
        );
        (cluster, None, log)
    } else {
        let cluster = Cluster::start(cli.dir.as_deref()).context("starting the local cluster")?;
        let ports = ifo_dev::Ports::free()?;
        let guard = if cli.guard { "true" } else { "false" };
        let process = ifo_dev::spawn_server(
            &cluster,
            &server,
            ports,
            &[
                ("DEBOUNCE_THRESHOLD", DEMO_GRACE),
                ("LOG_LEVEL", "info"),
                ("EVICTION_GUARD", guard),
                // The local cluster's kube-apiserver presents this certificate to webhooks: the
                // doors answer it only.
                ("ADMISSION_ALLOWED_NAMES", ifo_dev::WEBHOOK_CLIENT_NAME),
            ],
            "ifo-apiserver.log",
        )?;
        cluster.register_apiservice(ports)?;
        cluster.register_ruleset_webhook(ports)?;
        if cli.guard {
            cluster.register_guard_webhook(ports)?;
        }
        cluster
            .wait_live_api(Duration::from_secs(60))
            .with_context(|| format!("server log:\n{}", process.log_tail(20)))?;
        // The shipped rules and the read access they need (`deploy/` has them with --node).
        let source = ifo_dev::source_dir();
        for file in ["deploy/rbac/rule-targets.yaml", "deploy/rules/bundle.yaml"] {
            cluster.kubectl_run(
                User::Admin,
                &["apply", "-f", &source.join(file).display().to_string()],
                None,
            )?;
        }
        let log = cluster
            .dir()
            .join("ifo-apiserver.log")
            .display()
            .to_string();
        (cluster, Some(process), log)
    };
    println!("\nThe local cluster is up and live.ifo.kubevirt.io is served by ifo-apiserver.");
    println!("To use kubectl yourself:\n");
    println!(
        "  export KUBECONFIG={}",
        cluster.kubeconfig(User::Admin).display()
    );
    println!("  alias kubectl={}", cluster.binaries.kubectl.display());
    // deploy/local.sh builds the plugin beside this binary.
    let plugin = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("kubectl-ifo")))
        .filter(|plugin| plugin.exists());
    if let Some(plugin) = plugin {
        println!(
            "\nThe timeline in a browser (open the URL it prints), with that KUBECONFIG:\n\n  {} ui -A",
            plugin.display()
        );
    }
    println!("\nServer log: {log}");
    if cli.guard {
        println!(
            "\nThe maintenance guard is on: `kubectl drain node-1 --ignore-daemonsets` evicts the \
             pod app-node-1 only while node-1 is clear, and prints why it waits until then."
        );
    }
    println!(
        "\nStreaming `kubectl get ifos -A -w --output-watch-events -o wide` while a workload moves VMs \
         through states.\nDemo setting: operations complete {DEMO_GRACE} after they stop being \
         detected (a real install waits 30s); meanwhile they show `ending in …`.\n\
         Ctrl-C stops everything.\n"
    );
    settle(&cluster);
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc_handler(move || stop.store(true, Ordering::Relaxed))?;
    }
    let mut watch = cluster
        .kubectl(User::Admin)
        .args([
            "get",
            "ifos",
            "-A",
            "-w",
            "--output-watch-events",
            "-o",
            "wide",
        ])
        .spawn()
        .context("starting kubectl get ifos -A -w --output-watch-events")?;
    std::thread::scope(|scope| {
        let workload_stop = stop.clone();
        let cluster = &cluster;
        scope.spawn(move || {
            if let Err(e) = ifo_dev::workload::run(cluster, cli.vms, workload_stop) {
                eprintln!("workload stopped: {e:#}");
            }
        });
        while !stop.load(Ordering::Relaxed) {
            let running = match &process {
                Some(p) => p.check_running(),
                None => cluster
                    .node()
                    .as_ref()
                    .map_or(Ok(()), |n| n.check_running()),
            };
            if let Err(e) = running {
                eprintln!("{e:#}");
                stop.store(true, Ordering::Relaxed);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let _ = watch.kill();
    let _ = watch.wait();
    drop(process);
    drop(cluster);
    Ok(())
}

/// Waits (up to a minute) for the server's initial sync, so the stream starts with what is in
/// flight rather than with warnings that the first lists are not done; says what it waits for.
fn settle(cluster: &Cluster) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut said = false;
    loop {
        let warned = cluster
            .kubectl(User::Admin)
            .args(["get", "ifos", "-A", "-o", "name"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned());
        match warned {
            Ok(stderr) if !stderr.contains("Warning:") => return,
            Ok(stderr) if std::time::Instant::now() >= deadline => {
                eprintln!("the server's answers are still incomplete:\n{stderr}");
                return;
            }
            Err(e) => {
                eprintln!("kubectl get ifos failed: {e}");
                return;
            }
            Ok(_) => {}
        }
        if !said {
            println!("\nWaiting for the server's initial sync (its first list of every target)…");
            said = true;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Runs `f` on SIGINT or SIGTERM (instead of dying at once), so the cluster is stopped cleanly.
fn ctrlc_handler(f: impl Fn() + Send + 'static) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            runtime.block_on(async {
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                        .expect("installing a SIGTERM handler");
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            });
            f();
        })?;
    Ok(())
}
