//! `ifo-apiserver`: the live InFlightOperations server and its tools. Wiring only.

use anyhow::Result;
use clap::{Parser, Subcommand};
use ifo::config::ServeArgs;
use std::path::PathBuf;

/// jemalloc rather than the C library's allocator: with glibc's per-thread arenas, memory freed
/// after a burst (an initial list, thousands of operations starting at once) stayed resident.
/// At 100,000 subjects and 20,000 operations the server peaked at 160 MiB with glibc and 145
/// MiB with jemalloc (docs/performance.md, "Scale").
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

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
    /// Report schema errors, CEL compile errors, results of the wrong type, and field paths
    /// that error on a bare object or that the target's schema does not have.
    Lint {
        #[arg(default_value = "rules")]
        paths: Vec<PathBuf>,
        /// CRD YAML files and kube-apiserver's OpenAPI v3 documents as JSON (`/openapi/v3/apis/batch/v1`),
        /// or directories of them: the paths the rules read are checked against the schemas of
        /// their targets.
        #[arg(long)]
        schemas: Vec<PathBuf>,
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
    // Colours only on a terminal: `kubectl logs` and log collectors get plain `key=value` text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if std::env::var("LOG_FORMAT").is_ok_and(|f| f == "json") {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    init_tracing("info");
    match cli.command {
        Command::Serve(args) => {
            // Failpoints exist in test builds only: there, `FAILPOINTS` injects failures.
            let _failpoints = fail::has_failpoints().then(fail::FailScenario::setup);
            runtime()?.block_on(ifo::server::serve(*args))
        }
        Command::Rules(cmd) => rules(cmd),
    }
}

fn rules(cmd: RulesCommand) -> Result<()> {
    let engine = ifo::evaluate::Engine::new();
    match cmd {
        RulesCommand::Test { paths } => {
            let files = ifo::library::load(&paths)?;
            let (count, failures) = ifo::library::run_cases(&engine, &files)?;
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
        RulesCommand::Lint { paths, schemas } => {
            let files = ifo::library::load(&paths)?;
            let schemas = ifo::library::load_schemas(&schemas)?;
            let problems = ifo::library::lint_with_schemas(&engine, &files, &schemas);
            for p in &problems {
                println!("{p}");
            }
            let checked = files
                .iter()
                .filter(|f| schemas.get(&f.spec.target).is_some())
                .count();
            println!(
                "{} rulesets, {} problems; {checked} checked against their target's schema",
                files.len(),
                problems.len()
            );
            if !problems.is_empty() {
                std::process::exit(1);
            }
        }
        RulesCommand::Bundle { paths } => {
            print!("{}", ifo::library::bundle(&ifo::library::load(&paths)?))
        }
        RulesCommand::Rbac { paths, name } => {
            print!(
                "{}",
                ifo::library::rbac(&ifo::library::load(&paths)?, &name)
            )
        }
    }
    Ok(())
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}
