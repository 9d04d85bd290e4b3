//! `ifo-bench`: the end-to-end benchmark. It drives subjects' `/status` through states the
//! rules detect at a fixed rate, watches InFlightOperations through kube-apiserver (the
//! aggregation layer) like any client, and matches every transition to its watch event.
//! It reports latency, losses and duplicates, the server's CPU and memory, and the writes
//! kube-apiserver served meanwhile, as a table and as JSON.

#![warn(missing_docs)]

mod baseline;
mod ledger;
mod local;
mod observer;
mod report;
mod stats;
mod subjects;
mod target;
mod usage;
mod writes;

use anyhow::{Context, Result, bail};
use clap::Parser;
use ledger::Ledger;
use observer::Watcher;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use subjects::Subjects;
use tokio::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "ifo-bench",
    about = "End-to-end benchmark of live InFlightOperations on a real cluster"
)]
struct Cli {
    /// Subjects (VirtualMachines) to create and drive.
    #[arg(long, default_value_t = 2_000)]
    subjects: usize,
    /// Status transitions per second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// How long to drive transitions.
    #[arg(long, default_value = "60s", value_parser = duration)]
    duration: Duration,
    /// Concurrent watching clients; each must see every operation.
    #[arg(long, default_value_t = 1)]
    watchers: usize,
    /// Measure at several scales instead: per level, a fifth of the subjects hold an
    /// operation active while the rest are driven; prints RSS and p99 per level.
    #[arg(long)]
    scale: bool,
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,50000")]
    scale_levels: Vec<usize>,
    /// How long to drive transitions at each scale level.
    #[arg(long, default_value = "20s", value_parser = duration)]
    scale_duration: Duration,
    /// The server's debounce threshold (set on the local server; give the measured server's).
    #[arg(long, default_value = "5s", value_parser = duration)]
    debounce: Duration,
    /// Measure an existing cluster instead of starting the local one: its kubeconfig. The
    /// VirtualMachine CRD and rules detecting `status.printableStatus` states must be there.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The server process to measure (CPU, RSS) with --kubeconfig.
    #[arg(long)]
    server_pid: Option<u32>,
    /// Where to write the JSON report.
    #[arg(long, default_value = "target/ifo-bench.json")]
    json: PathBuf,
    #[command(flatten)]
    api: target::IfoApi,
}

fn duration(s: &str) -> Result<Duration, String> {
    let d = ifo_apimachinery::duration::parse_duration(s)?;
    Duration::try_from(d).map_err(|_| format!("{s}: must not be negative"))
}

#[derive(Serialize)]
struct Output<'a> {
    subjects: usize,
    rate: f64,
    watchers: usize,
    debounce_seconds: f64,
    ifo_api: String,
    phases: &'a [report::Phase],
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("LOG_LEVEL")
                .unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    if cli.rate <= 0.0 || cli.subjects == 0 || cli.watchers == 0 {
        bail!("--rate, --subjects and --watchers must be positive");
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (kubeconfig, local) = match &cli.kubeconfig {
        Some(path) => (path.clone(), None),
        None => {
            eprintln!("starting the local cluster and ifo-apiserver ...");
            let local = local::Local::start(cli.debounce)?;
            (local.kubeconfig.clone(), Some(local))
        }
    };
    let pid = cli.server_pid.or(local.as_ref().map(|l| l.server_pid));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let phases = runtime.block_on(bench(&cli, kubeconfig, pid));
    // Stops the watchers before the environment they watch goes away.
    drop(runtime);
    let phases = match phases {
        Ok(phases) => phases,
        Err(e) => {
            if let Some(local) = &local {
                eprintln!("server log: {}", local.server_log.display());
            }
            return Err(e);
        }
    };
    let output = Output {
        subjects: cli.subjects,
        rate: cli.rate,
        watchers: cli.watchers,
        debounce_seconds: cli.debounce.as_secs_f64(),
        ifo_api: cli.api.path(),
        phases: &phases,
    };
    if let Some(dir) = cli.json.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&cli.json, serde_json::to_string_pretty(&output)?)
        .with_context(|| format!("writing {}", cli.json.display()))?;
    println!("\nJSON report: {}", cli.json.display());
    drop(local);
    Ok(())
}

/// The state shared by every phase of one run.
struct Bench<'a> {
    cli: &'a Cli,
    client: kube::Client,
    ledger: Arc<Ledger>,
    subjects: Subjects,
    watchers: Vec<Arc<Watcher>>,
    baseline: Arc<baseline::Baseline>,
    /// The watch loops; stopped before the environment goes away.
    watch_tasks: tokio::task::JoinSet<()>,
    pid: Option<u32>,
    rss: Option<usage::RssSampler>,
}

async fn bench(cli: &Cli, kubeconfig: PathBuf, pid: Option<u32>) -> Result<Vec<report::Phase>> {
    let kc = kube::config::Kubeconfig::read_from(&kubeconfig)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?;
    let client = kube::Client::try_from(config)?;
    let ledger = Arc::new(Ledger::default());
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    let ns =
        serde_json::from_value(serde_json::json!({"metadata": {"name": subjects::NAMESPACE}}))?;
    match namespaces.create(&Default::default(), &ns).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => return Err(e).context("creating the benchmark namespace"),
    }
    let mut bench = Bench {
        cli,
        client: client.clone(),
        subjects: Subjects::new(client.clone(), ledger.clone()),
        ledger,
        watchers: Vec::new(),
        baseline: Arc::default(),
        watch_tasks: tokio::task::JoinSet::new(),
        pid,
        rss: pid.map(usage::RssSampler::start),
    };
    bench.start_watchers().await?;
    let mut phases = Vec::new();
    if cli.scale {
        let mut held = 0;
        for &level in &cli.scale_levels {
            eprintln!("scale level {level}: creating subjects ...");
            bench.subjects.grow(level).await?;
            let hold = level / 5;
            eprintln!("scale level {level}: holding {hold} operations active ...");
            bench.subjects.hold(held..hold).await;
            held = held.max(hold);
            bench.wait_active(held).await?;
            let phase = bench.phase(held..level, cli.scale_duration).await?;
            phase.print();
            phases.push(phase);
        }
        report::print_scale(&phases);
    } else {
        eprintln!("creating {} subjects ...", cli.subjects);
        bench.subjects.grow(cli.subjects).await?;
        let phase = bench.phase(0..cli.subjects, cli.duration).await?;
        phase.print();
        phases.push(phase);
    }
    Ok(phases)
}

impl Bench<'_> {
    async fn start_watchers(&mut self) -> Result<()> {
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(self.cli.watchers);
        for _ in 0..self.cli.watchers {
            let watcher = Watcher::new(self.ledger.clone(), self.cli.debounce);
            let run =
                watcher
                    .clone()
                    .run(self.client.clone(), self.cli.api.clone(), ready_tx.clone());
            self.watch_tasks.spawn(async move {
                if let Err(e) = run.await {
                    tracing::error!(error = %format!("{e:#}"), "watcher stopped");
                }
            });
            self.watchers.push(watcher);
        }
        drop(ready_tx);
        let baseline = self
            .baseline
            .clone()
            .run(self.subjects.api.clone(), self.ledger.clone());
        self.watch_tasks.spawn(baseline);
        for _ in 0..self.cli.watchers {
            tokio::time::timeout(Duration::from_secs(60), ready_rx.recv())
                .await
                .ok()
                .flatten()
                .with_context(|| {
                    format!(
                        "could not watch {} (is the APIService Available, and the API names right?)",
                        self.cli.api.path()
                    )
                })?;
        }
        Ok(())
    }

    /// Waits until every watcher shows at least `count` active operations.
    async fn wait_active(&self, count: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.watchers.iter().any(|w| w.active() < count) {
            if Instant::now() > deadline {
                bail!("watchers did not see {count} active operations within 120 s");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for w in &self.watchers {
            w.take();
        }
        Ok(())
    }

    /// Drives `driven` for `duration`, ends their operations, waits for the watchers to see
    /// everything (or for the debounce threshold plus 30 s), and reports.
    async fn phase(
        &mut self,
        driven: std::ops::Range<usize>,
        duration: Duration,
    ) -> Result<report::Phase> {
        let cli = self.cli;
        // A subject repeats an operation once per script cycle; it must have completed by then
        // or the repeat would continue it rather than start a new one.
        let cycle = subjects::SCRIPT.len() as f64 * driven.len() as f64 / cli.rate;
        if cycle < cli.debounce.as_secs_f64() + 5.0 {
            bail!(
                "{} subjects at {}/s repeat an operation every {cycle:.1} s, within the debounce \
                 threshold ({:?}) + 5 s; use more subjects or a lower rate",
                driven.len(),
                cli.rate,
                cli.debounce
            );
        }
        let counts0 = self.ledger.counts();
        self.ledger.take_write_latencies();
        self.baseline.take();
        let writes0 = writes::read(&self.client).await?;
        let usage0 = self.pid.map(usage::read).transpose()?;
        if let Some(rss) = &self.rss {
            rss.take_max();
        }
        let began = Instant::now();
        eprintln!(
            "driving {} subjects at {}/s for {:?} ...",
            driven.len(),
            cli.rate,
            duration
        );
        let achieved = self
            .subjects
            .drive(driven.clone(), cli.rate, duration)
            .await;
        self.subjects.settle(driven.clone(), cli.rate).await;
        let counts = self.ledger.counts() - counts0;
        // Every started operation must be seen, and seen completing after the threshold.
        let deadline = Instant::now() + cli.debounce + Duration::from_secs(30);
        loop {
            let done = self.watchers.iter().all(|w| {
                let (matched, completed) = w.progress();
                matched >= counts.started && completed >= matched
            });
            if done || Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let wall = began.elapsed().as_secs_f64();
        let usage1 = self.pid.map(usage::read).transpose()?;
        let writes = writes::read(&self.client).await?.since(&writes0);
        let mut phase = report::Phase {
            subjects: self.subjects.len(),
            driven: driven.len(),
            held_active: self.subjects.len() - driven.len(),
            watchers: self.watchers.len(),
            duration_seconds: duration.as_secs_f64(),
            rate_requested: cli.rate,
            rate_achieved: achieved,
            transitions: counts,
            start_latency: Default::default(),
            completion_delay: Default::default(),
            write_latency: stats::Summary::of(self.ledger.take_write_latencies()),
            subject_event_latency: stats::Summary::of(self.baseline.take()),
            lost_starts: 0,
            lost_completions: 0,
            duplicates: 0,
            unexpected: 0,
            relists: 0,
            events: 0,
            server: None,
            operation_writes: writes
                .0
                .iter()
                .filter(|((_, g, r, _), _)| cli.api.is_operation_resource(g, r))
                .map(|(_, n)| n)
                .sum(),
            apiserver_writes: report::write_rows(&writes, counts.writes),
        };
        let (mut starts, mut completions) = (Vec::new(), Vec::new());
        for w in &self.watchers {
            let books = w.take();
            phase.lost_starts += counts.started.saturating_sub(books.matched);
            phase.lost_completions += books.matched.saturating_sub(books.completed);
            phase.duplicates += books.duplicates;
            phase.unexpected += books.unexpected;
            phase.relists += books.relists;
            phase.events += books.events;
            starts.extend(books.start_latencies);
            completions.extend(books.completion_delays);
        }
        phase.start_latency = stats::Summary::of(starts);
        phase.completion_delay = stats::Summary::of(completions);
        if let (Some(u0), Some(u1)) = (usage0, usage1) {
            let rss_max = self.rss.as_ref().map_or(u1.rss_bytes, |r| r.take_max());
            phase.server = Some(report::server(
                u1.cpu_seconds - u0.cpu_seconds,
                wall,
                rss_max.max(u1.rss_bytes),
                u1.peak_rss_bytes,
            ));
        }
        Ok(phase)
    }
}
