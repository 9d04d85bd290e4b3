//! `ifo-apiserver`: the live InFlightOperations server and its tools. Wiring only.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use ifo::config::ServeArgs;
use ifo::dev::{Cluster, User};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser)]
#[command(
    name = "ifo-apiserver",
    version,
    about = "Live InFlightOperations: every operation in flight, served through the Kubernetes aggregation layer"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the live API (what the Deployment runs).
    Serve(Box<ServeArgs>),
    /// Start a local real cluster (etcd + kube-apiserver) with this server registered, for trying it out.
    Dev {
        /// Where to put the cluster's files (default: the system temp dir).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Tools for rule authors.
    #[command(subcommand)]
    Rules(RulesCommand),
}

#[derive(Subcommand)]
enum RulesCommand {
    /// Run the cases beside each ruleset (`<name>.cases.yaml`); exit 1 on any mismatch.
    Test {
        #[arg(default_value = "rules")]
        paths: Vec<PathBuf>,
    },
    /// Report schema errors, CEL compile errors and field paths that error on a bare object.
    Lint {
        #[arg(default_value = "rules")]
        paths: Vec<PathBuf>,
    },
    /// Print every ruleset as one YAML stream.
    Bundle {
        #[arg(default_value = "rules")]
        paths: Vec<PathBuf>,
    },
    /// Print the ClusterRole that lets the server watch every target of the rulesets.
    Rbac {
        #[arg(default_value = "rules")]
        paths: Vec<PathBuf>,
        #[arg(long, default_value = "ifo-apiserver:rule-targets")]
        name: String,
    },
}

/// `default` applies when `LOG_LEVEL` is unset.
fn init_tracing(default: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("LOG_LEVEL").unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if std::env::var("LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    // The demo's terminal belongs to `kubectl get ifos -w`: only warnings interrupt it.
    init_tracing(match cli.command {
        Command::Dev { .. } => "warn",
        _ => "info",
    });
    match cli.command {
        Command::Serve(args) => runtime()?.block_on(ifo::server::serve(*args)),
        Command::Dev { dir } => dev(dir),
        Command::Rules(cmd) => rules(cmd),
    }
}

fn rules(cmd: RulesCommand) -> Result<()> {
    let engine = ifo::evaluate::Engine::new();
    match cmd {
        RulesCommand::Test { paths } => {
            let files = ifo::rules::load(&paths)?;
            let (count, failures) = ifo::rules::run_cases(&engine, &files)?;
            for f in &failures {
                println!("FAIL {f}");
            }
            println!(
                "{} passed, {} failed",
                count.saturating_sub(failures.len()),
                failures.len()
            );
            if !failures.is_empty() {
                std::process::exit(1);
            }
        }
        RulesCommand::Lint { paths } => {
            let files = ifo::rules::load(&paths)?;
            let problems = ifo::rules::lint(&engine, &files);
            for p in &problems {
                println!("{p}");
            }
            println!("{} rulesets, {} problems", files.len(), problems.len());
            if !problems.is_empty() {
                std::process::exit(1);
            }
        }
        RulesCommand::Bundle { paths } => {
            print!("{}", ifo::rules::bundle(&ifo::rules::load(&paths)?))
        }
        RulesCommand::Rbac { paths, name } => {
            print!("{}", ifo::rules::rbac(&ifo::rules::load(&paths)?, &name))
        }
    }
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

/// The local cluster is started on the main thread: its processes live as long as that thread.
fn dev(dir: Option<PathBuf>) -> Result<()> {
    let cluster = Cluster::start(dir.as_deref()).context("starting the local cluster")?;
    let port = ifo::dev::free_port()?;
    let args = ServeArgs {
        bind_address: "127.0.0.1".parse()?,
        secure_port: port,
        tls_cert_file: cluster.serving.cert_file.clone(),
        tls_private_key_file: cluster.serving.key_file.clone(),
        kubeconfig: Some(cluster.kubeconfig(User::Server)),
        // A short grace keeps the demo lively; the server's default is 30s.
        debounce_threshold: jiff::SignedDuration::from_secs(5),
        ..ServeArgs::defaults()
    };
    let rt = runtime()?;
    let server = rt.spawn(ifo::server::serve(args));
    cluster.register_apiservice(port)?;
    cluster.wait_apiservice_available(Duration::from_secs(60))?;
    // The shipped rules, the read access they need, and a workload for them to detect.
    let source = ifo::dev::source_dir();
    for file in ["deploy/rbac/rule-targets.yaml", "deploy/rules/bundle.yaml"] {
        cluster.kubectl_run(
            User::Admin,
            &["apply", "-f", &source.join(file).display().to_string()],
            None,
        )?;
    }
    println!("\nThe local cluster is up and live.ifo.kubevirt.io is served by this process.");
    println!("To use kubectl yourself:\n");
    println!(
        "  export KUBECONFIG={}",
        cluster.kubeconfig(User::Admin).display()
    );
    println!("  alias kubectl={}", cluster.binaries.kubectl.display());
    println!(
        "\nStreaming `kubectl get ifos -A -w` while a workload moves VMs through states. Ctrl-C stops everything.\n"
    );
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut watch = cluster
        .kubectl(User::Admin)
        .args(["get", "ifos", "-A", "-w", "-o", "wide"])
        .spawn()
        .context("starting kubectl get ifos -A -w")?;
    std::thread::scope(|scope| -> Result<()> {
        let workload_stop = stop.clone();
        let cluster = &cluster;
        scope.spawn(move || {
            if let Err(e) = ifo::dev::workload::run(cluster, 4, workload_stop) {
                eprintln!("workload stopped: {e:#}");
            }
        });
        let result = rt.block_on(async {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => Ok(()),
                result = server => result.context("server task")?,
            }
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = watch.kill();
        let _ = watch.wait();
        result
    })?;
    drop(cluster);
    Ok(())
}
