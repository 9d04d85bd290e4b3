//! `ifo-bench`: the end-to-end benchmark. It drives subjects' `/status` through states the
//! rules detect at a fixed rate, watches InFlightOperations through kube-apiserver (the
//! aggregation layer) like any client, and matches every transition to its watch event.
//! It reports latency, losses and duplicates, the server's CPU and memory, and the writes
//! kube-apiserver served meanwhile, as a table and as JSON. `--pods` runs the pod workload
//! instead (see [`pods`]): pods holding their nodes under the shipped pod rules, detected on the
//! nodes' gates, and the maintenance guard's decisions.

mod baseline;
mod cold_start;
mod flips;
mod flood;
mod floor;
mod jobs;
mod kwok;
mod ledger;
mod local;
mod observer;
mod pace;
mod pod_bench;
mod pods;
mod probes;
mod report;
mod resume;
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
use std::path::{Path, PathBuf};
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
    /// Completion delays are measured from an operation's end plus this.
    #[arg(long, default_value = "5s", value_parser = duration)]
    debounce: Duration,
    /// After the driving stops, the longest the watchers are given to see every start and
    /// completion (and, with persistence, the custom resources to catch up) before what is
    /// missing counts as lost. Give more than the debounce threshold: completions come after it.
    #[arg(long, default_value = "60s", value_parser = duration)]
    catch_up: Duration,
    /// Run the local server with persistence (`PERSIST=true`): every live operation is
    /// mirrored into an `inflightoperations.ifo.kubevirt.io` custom resource. Applies
    /// deploy/persist/crd.yaml first.
    #[arg(long, conflicts_with = "compare_persist")]
    persist: bool,
    /// Apply every shipped ruleset (deploy/rules/bundle.yaml, 47 of them, with the read access
    /// they need) to the local cluster instead of the VM lifecycle rules alone: what the others
    /// cost beside the same workload, their status writes included.
    #[arg(long, conflicts_with = "kubeconfig")]
    all_rules: bool,
    /// Run the same scenario twice on one local cluster, persistence off and then on (fresh
    /// subjects in a namespace of their own each), and print both side by side.
    #[arg(long)]
    compare_persist: bool,
    /// Also change one VirtualMachine of a namespace of its own (`ifo-bench-flood`) this many
    /// times a second while each phase drives the subjects, as a tenant patching her object in
    /// a loop, under a rule added to the subjects' ruleset that is slow on that object alone
    /// (`--flood-cost`): the start → event latency is then the other objects' detection delay
    /// during one object's flood. 0: no flood.
    #[arg(long, default_value_t = 0.0, conflicts_with = "kubeconfig")]
    flood: f64,
    /// Iterations of the slow rule on the flooded object (its `spec.n`); the default, about as
    /// many as the default cost limit allows, takes about 35 ms of evaluation in a release
    /// build on the benchmark's machine.
    #[arg(long, default_value_t = 100_000)]
    flood_cost: u64,
    /// Measure an existing cluster instead of starting the local one: its kubeconfig. The
    /// VirtualMachine CRD and rules detecting `status.printableStatus` states must be there.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The server process to measure (CPU, RSS) with --kubeconfig.
    #[arg(long, requires = "kubeconfig")]
    server_pid: Option<u32>,
    /// The kube-apiserver process to measure with --kubeconfig (on this machine).
    #[arg(long, requires = "kubeconfig")]
    apiserver_pid: Option<u32>,
    /// The etcd process to measure with --kubeconfig (on this machine).
    #[arg(long, requires = "kubeconfig")]
    etcd_pid: Option<u32>,
    /// An environment variable of the local server, `NAME=VALUE` (repeatable): a setting, or a
    /// heap profiler's `LD_PRELOAD` for the server alone.
    #[arg(long, value_parser = env_pair, conflicts_with = "kubeconfig")]
    server_env: Vec<(String, String)>,
    /// Where to write the JSON report.
    #[arg(long, default_value = "target/ifo-bench.json")]
    json: PathBuf,
    #[command(flatten)]
    api: target::IfoApi,
    #[command(flatten)]
    pod: pods::PodArgs,
}

fn env_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_string(), value.to_string())),
        _ => Err(format!("{s}: expected NAME=VALUE")),
    }
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
    catch_up_seconds: f64,
    ifo_api: String,
    /// One run, or two with --compare-persist (persistence off, then on).
    runs: &'a [Run],
}

/// One scenario on one server.
#[derive(Serialize)]
struct Run {
    /// Whether the local server ran with persistence (`null` when measuring another cluster).
    persist: Option<bool>,
    namespace: String,
    phases: Vec<report::Phase>,
}

/// The processes measured in a run.
#[derive(Clone, Copy, Debug, Default)]
struct Pids {
    server: Option<u32>,
    apiserver: Option<u32>,
    etcd: Option<u32>,
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
    if cli.flood < 0.0 {
        bail!("--flood must not be negative");
    }
    if cli.kubeconfig.is_some() && (cli.persist || cli.compare_persist) {
        bail!(
            "--persist and --compare-persist start the local server; with --kubeconfig, \
             run the measured server with persistence yourself"
        );
    }
    if cli.persist || cli.compare_persist {
        local::persist_crd()?;
    }
    if cli.catch_up <= cli.debounce {
        eprintln!(
            "warning: --catch-up ({:?}) is not longer than --debounce ({:?}): completions may \
             not arrive in time and count as lost",
            cli.catch_up, cli.debounce
        );
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    if cli.pod.pods && !cli.pod.cold_start.is_empty() {
        return cold_start::run(&cli);
    }
    if cli.pod.pods {
        return pod_bench::run(&cli);
    }
    // Persistence off, then on; or the one mode asked for (`None`: another cluster's server).
    let modes: Vec<Option<bool>> = match (&cli.kubeconfig, cli.compare_persist) {
        (Some(_), _) => vec![None],
        (None, true) => vec![Some(false), Some(true)],
        (None, false) => vec![Some(cli.persist)],
    };
    let (kubeconfig, local) = match &cli.kubeconfig {
        Some(path) => (path.clone(), None),
        None => {
            eprintln!("starting the local cluster ...");
            let local = local::Local::start()?;
            (local.kubeconfig.clone(), Some(local))
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut runs = Vec::new();
    for (i, &persist) in modes.iter().enumerate() {
        let last = i + 1 == modes.len();
        let namespace = match persist {
            Some(on) if cli.compare_persist => {
                format!(
                    "{}-persist-{}",
                    subjects::NAMESPACE,
                    if on { "on" } else { "off" }
                )
            }
            _ => subjects::NAMESPACE.to_string(),
        };
        let mut pids = Pids {
            server: cli.server_pid,
            apiserver: cli.apiserver_pid,
            etcd: cli.etcd_pid,
        };
        let mut server_log = None;
        // The local environment and how its server runs (`None`: another cluster's server).
        let serving = local.as_ref().zip(persist).map(|(local, persist)| {
            let settings = local::Settings {
                debounce: cli.debounce,
                persist,
                env: cli.server_env.clone(),
                all_rules: cli.all_rules,
                slow_rule: cli.flood > 0.0,
                pod_rules: None,
                guard: false,
            };
            (local, settings)
        });
        if let Some((local, settings)) = &serving {
            eprintln!(
                "starting ifo-apiserver (persistence {}) ...",
                if settings.persist { "on" } else { "off" }
            );
            let server = local.serve(settings.clone())?;
            pids = Pids {
                server: Some(server.pid),
                apiserver: Some(local.apiserver_pid),
                etcd: Some(local.etcd_pid),
            };
            server_log = Some(server.log);
        }
        let spec = RunSpec {
            kubeconfig: &kubeconfig,
            namespace: &namespace,
            persist: persist == Some(true),
            local: serving,
            pids,
            // A following run starts without this run's subjects.
            remove_subjects: !last,
        };
        let phases = runtime.block_on(bench(&cli, &spec));
        let phases = match phases {
            Ok(phases) => phases,
            Err(e) => {
                if let Some(log) = &server_log {
                    print_log_tail(log);
                }
                return Err(e);
            }
        };
        if let Some(local) = &local
            && !last
        {
            local.stop_server()?;
        }
        runs.push(Run {
            persist,
            namespace,
            phases,
        });
    }
    // Stops whatever the runs left running before the environment they use goes away.
    drop(runtime);
    if let [off, on] = &runs[..] {
        report::print_comparison(&off.phases, &on.phases);
    }
    let output = Output {
        subjects: cli.subjects,
        rate: cli.rate,
        watchers: cli.watchers,
        debounce_seconds: cli.debounce.as_secs_f64(),
        catch_up_seconds: cli.catch_up.as_secs_f64(),
        ifo_api: cli.api.path(),
        runs: &runs,
    };
    write_json(&cli.json, &output)?;
    drop(local);
    Ok(())
}

/// The client configuration of the kubeconfig at `path`.
async fn kube_config(path: &Path) -> Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(path)?;
    Ok(kube::Config::from_custom_kubeconfig(kc, &Default::default()).await?)
}

/// Writes the JSON report to `path`, and says where.
fn write_json(path: &Path, output: &impl Serialize) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(output)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!("\nJSON report: {}", path.display());
    Ok(())
}

/// Prints the last lines of the server's log, after a run failed.
fn print_log_tail(log: &Path) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    eprintln!(
        "last lines of the server log ({}):\n{}",
        log.display(),
        lines[lines.len().saturating_sub(20)..].join("\n")
    );
}

/// What one run measures, and where.
struct RunSpec<'a> {
    kubeconfig: &'a Path,
    namespace: &'a str,
    /// The local server mirrors operations into custom resources.
    persist: bool,
    /// The local environment and the server's settings, to restart it (`None` with
    /// `--kubeconfig`).
    local: Option<(&'a local::Local, local::Settings)>,
    pids: Pids,
    /// Delete the subjects at the end of the run.
    remove_subjects: bool,
}

/// The state shared by every phase of one run.
struct Bench<'a> {
    cli: &'a Cli,
    spec: &'a RunSpec<'a>,
    client: kube::Client,
    ledger: Arc<Ledger>,
    subjects: Subjects,
    watchers: Vec<Arc<Watcher>>,
    baseline: Arc<baseline::Baseline>,
    /// `--flood`: the object changed during each phase.
    flood: Option<Arc<flood::Flood>>,
    /// The watch loops; stopped when the run ends.
    watch_tasks: tokio::task::JoinSet<()>,
    server: usage::Meter,
    apiserver: usage::Meter,
    etcd: usage::Meter,
}

async fn bench(cli: &Cli, spec: &RunSpec<'_>) -> Result<Vec<report::Phase>> {
    let client = kube::Client::try_from(kube_config(spec.kubeconfig).await?)?;
    let ledger = Arc::new(Ledger::default());
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
        kube::Api::all(client.clone());
    let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": spec.namespace}}))?;
    match namespaces.create(&Default::default(), &ns).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => return Err(e).context("creating the benchmark namespace"),
    }
    let mut bench = Bench {
        cli,
        spec,
        client: client.clone(),
        subjects: Subjects::new(client.clone(), ledger.clone(), spec.namespace),
        ledger,
        watchers: Vec::new(),
        baseline: Arc::default(),
        flood: None,
        watch_tasks: tokio::task::JoinSet::new(),
        server: usage::Meter::new(spec.pids.server),
        apiserver: usage::Meter::new(spec.pids.apiserver),
        etcd: usage::Meter::new(spec.pids.etcd),
    };
    bench.start_watchers().await?;
    if cli.flood > 0.0 {
        bench.flood = Some(Arc::new(
            flood::Flood::prepare(client.clone(), cli.flood_cost).await?,
        ));
    }
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
            let mut phase = bench.phase(held..level, cli.scale_duration).await?;
            phase.cold_start = bench.cold_start(level).await?;
            phase.print();
            phases.push(phase);
        }
        report::print_scale(&phases);
    } else {
        eprintln!(
            "creating {} subjects in namespace {} ...",
            cli.subjects, spec.namespace
        );
        bench.subjects.grow(cli.subjects).await?;
        let phase = bench.phase(0..cli.subjects, cli.duration).await?;
        phase.print();
        phases.push(phase);
    }
    if spec.remove_subjects {
        eprintln!("deleting the subjects of namespace {} ...", spec.namespace);
        bench.subjects.remove_all().await?;
    }
    Ok(phases)
}

impl Bench<'_> {
    async fn start_watchers(&mut self) -> Result<()> {
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel(self.cli.watchers);
        for _ in 0..self.cli.watchers {
            let watcher = Watcher::new(self.ledger.clone(), self.cli.debounce, self.spec.namespace);
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

    /// Restarts the local server (none with `--kubeconfig`) and reports how long it took to
    /// be ready and to list every target again, with `subjects` in the cluster. The meter
    /// follows the new process; the watchers resume through kube-apiserver as clients do.
    async fn cold_start(&mut self, subjects: usize) -> Result<Option<local::ColdStart>> {
        let Some((local, settings)) = &self.spec.local else {
            return Ok(None);
        };
        eprintln!("scale level {subjects}: restarting the server (a cold start) ...");
        let server = tokio::task::block_in_place(|| local.serve(settings.clone()))?;
        self.server = usage::Meter::new(Some(server.pid));
        let mut c = server.cold_start;
        let everywhere = self.subjects.everywhere();
        c.stream_floor_seconds = Some(floor::streamed(everywhere).await?.0.as_secs_f64());
        c.list_floor_seconds = Some(floor::paged(everywhere).await?.as_secs_f64());
        eprintln!(
            "scale level {subjects}: ready after {:.2} s, every target listed after {:.2} s, \
             RSS then {} (peak {}); kube-apiserver alone streams the subjects in {:.2} s, \
             lists them in pages in {:.2} s",
            c.ready_seconds,
            c.complete_seconds,
            report::mib(c.rss_mib),
            report::mib(c.peak_rss_mib),
            c.stream_floor_seconds.unwrap_or_default(),
            c.list_floor_seconds.unwrap_or_default(),
        );
        Ok(Some(c))
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
    /// everything (at most `--catch-up`), and reports.
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
        self.server.begin()?;
        self.apiserver.begin()?;
        self.etcd.begin()?;
        let began = Instant::now();
        eprintln!(
            "driving {} subjects at {}/s for {:?} ...",
            driven.len(),
            cli.rate,
            duration
        );
        let flooding = self.flood.clone().map(|flood| {
            eprintln!(
                "changing one object of namespace {} at {}/s meanwhile ...",
                flood::NAMESPACE,
                cli.flood
            );
            tokio::spawn(flood.run(cli.flood, duration))
        });
        let achieved = self
            .subjects
            .drive(driven.clone(), cli.rate, duration)
            .await;
        let flood = match flooding {
            Some(task) => Some(task.await.context("the flood")?),
            None => None,
        };
        self.subjects.settle(driven.clone(), cli.rate).await;
        let counts = self.ledger.counts() - counts0;
        // Every started operation must be seen, and seen completing after the threshold.
        let deadline = Instant::now() + cli.catch_up;
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
        if self.spec.persist {
            self.wait_persisted(deadline).await;
        }
        let wall = began.elapsed().as_secs_f64();
        let server = self.server.end(wall)?;
        let apiserver = self.apiserver.end(wall)?;
        let etcd = self.etcd.end(wall)?;
        let writes = writes::read(&self.client).await?.since(&writes0);
        let operation_writes = writes
            .0
            .iter()
            .filter(|((_, g, r, _), _)| cli.api.is_operation_resource(g, r))
            .map(|(_, n)| n)
            .sum();
        if self.spec.persist && operation_writes == 0 && counts.started > 0 {
            eprintln!(
                "warning: persistence was asked for but no InFlightOperation was written; does \
                 this ifo-apiserver know PERSIST?"
            );
        }
        let ruleset_status_writes = report::ruleset_status_writes(&writes);
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
            completed_by_delete: 0,
            duplicates: 0,
            unexpected: 0,
            relists: 0,
            events: 0,
            server,
            apiserver,
            etcd,
            operation_writes,
            lifecycles: counts.started,
            operation_writes_per_1000_lifecycles: report::per_thousand(
                operation_writes,
                counts.started,
            ),
            apiserver_writes: report::write_rows(&writes, counts.writes),
            ruleset_status_writes,
            ruleset_status_writes_per_minute: ruleset_status_writes as f64 * 60.0 / wall,
            cold_start: None,
            flood,
        };
        let (mut starts, mut completions) = (Vec::new(), Vec::new());
        for w in &self.watchers {
            let books = w.take();
            phase.lost_starts += counts.started.saturating_sub(books.matched);
            phase.lost_completions += books.matched.saturating_sub(books.completed);
            phase.completed_by_delete += books.completed_by_delete;
            phase.duplicates += books.duplicates;
            phase.unexpected += books.unexpected;
            phase.relists += books.relists;
            phase.events += books.events;
            starts.extend(books.start_latencies);
            completions.extend(books.completion_delays);
        }
        phase.start_latency = stats::Summary::of(starts);
        phase.completion_delay = stats::Summary::of(completions);
        Ok(phase)
    }

    /// With persistence, waits (until `deadline`) for the custom resources to mirror the live
    /// operations again, so the writes that follow a completion (the update, the delete) are
    /// counted in the phase that caused them.
    async fn wait_persisted(&self, deadline: Instant) {
        let count = |path: String| {
            let client = self.client.clone();
            async move {
                let list: serde_json::Value = client
                    .request(kube::core::Request::new(path).list(&Default::default())?)
                    .await?;
                anyhow::Ok(list["items"].as_array().map_or(0, Vec::len))
            }
        };
        let live_path = "/apis/live.ifo.kubevirt.io/v1alpha1/inflightoperations".to_string();
        let persisted_path = format!("/apis/{PERSIST_GROUP}/v1alpha1/inflightoperations");
        loop {
            let (live, persisted) = match (
                count(live_path.clone()).await,
                count(persisted_path.clone()).await,
            ) {
                (Ok(live), Ok(persisted)) => (live, persisted),
                (Err(e), _) | (_, Err(e)) => {
                    eprintln!(
                        "warning: could not compare the persisted operations with the live \
                         ones ({e:#}); the writes still to come are not counted"
                    );
                    return;
                }
            };
            if live == persisted {
                return;
            }
            if Instant::now() > deadline {
                eprintln!(
                    "warning: {persisted} persisted operations and {live} live ones at the end \
                     of --catch-up: the writes still to come are not counted"
                );
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// The group of the custom resources `ifo-apiserver serve --persist` writes.
const PERSIST_GROUP: &str = "ifo.kubevirt.io";
