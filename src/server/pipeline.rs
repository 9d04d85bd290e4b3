//! The second phase of building the server: the pipeline assembled and started, from the
//! index back to the watches (index → debounce table → detector → watchers → ruleset
//! controller), with what feeds the gates besides it (the inventory of nodes, namespaces and,
//! with the guard, pods). Its tasks run under the server's [`Tasks`] from here on.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use tokio::sync::watch;

use super::persistence::{Persistence, restore};
use crate::config::ServeArgs;
use crate::detect::{Detector, Health};
use crate::evaluate::Engine;
use crate::index::{Epochs, Index, IndexReader};
use crate::inventory::pods::Pods;
use crate::inventory::{Inventory, Kind};
use crate::readiness::{self, Readiness};
use crate::reconcile;
use crate::ruleset::schema_check::Schemas;
use crate::supervise::Tasks;
use crate::track::{Settings as TrackSettings, Tracker};
use crate::watch::{InitialList, Liveness, Watches};

/// How often active operations' expected ends and overdue stalls are brought up to date.
const EXPECTATIONS_INTERVAL: Duration = Duration::from_secs(5);

/// The pipeline, started: what the API, the admission doors and leadership read of it.
pub(super) struct Pipeline {
    /// What the API and persistence read.
    pub(super) reader: IndexReader,
    /// The index's epochs, for leadership to begin (taken by it).
    pub(super) epochs: Option<Epochs>,
    /// What detection knows of itself.
    pub(super) targets: Arc<Health>,
    /// The copies read back, in persistence mode.
    pub(super) persistence: Option<Persistence>,
    /// The CEL environment of the ruleset controller, for the admission door to compile with.
    pub(super) engine: Engine,
    /// The schemas rulesets are checked against, kept by the ruleset controller, for the
    /// admission door to check with.
    pub(super) schemas: Arc<Schemas>,
    /// The names of the cluster's nodes and namespaces.
    pub(super) inventory: Arc<Inventory>,
    /// Where each pod runs, with the maintenance guard.
    pub(super) pods: Option<Arc<Pods>>,
    /// What the rules announce of the objects.
    pub(super) schedules: crate::schedule::Schedules,
}

impl Pipeline {
    /// Assembles the pipeline and starts its tasks: `rulesets_listed` is released once the
    /// ruleset controller has listed the rulesets; ruleset statuses are written while `leading`.
    pub(super) async fn start(
        args: &ServeArgs,
        client: &kube::Client,
        readiness: &Readiness,
        rulesets_listed: readiness::Pending,
        leading: watch::Receiver<bool>,
        tasks: &mut Tasks,
    ) -> Result<Pipeline> {
        let base_rv = jiff::Timestamp::now().as_microsecond().max(1) as u64;
        let index = Index::new(base_rv, args.event_history, args.watch_buffer)
            .with_history_bytes(args.event_history_mib.saturating_mul(1 << 20))
            .into_handles();
        crate::metrics::serve_active_from(index.reader.clone());
        let tracker = Tracker::new(TrackSettings {
            debounce: args.debounce_threshold,
            retain_completed: args.retain_completed_ifos,
            completed_retention: args.completed_retention,
            max_completed: args.max_completed_ifos,
        });
        // What detection knows of itself (where it is not current, what each ruleset hit):
        // written by the watchers and the detector, read by the API (and gates) and the
        // rulesets' status.
        let targets = Arc::new(Health::default());
        tasks.restarting("feeds-reporter", {
            let (targets, feeds, readiness) = (targets.reader(), index.feeds, readiness.clone());
            move || targets.clone().report_to(feeds.clone(), readiness.clone())
        });
        let detector = Arc::new(Detector::new(
            tracker,
            index.writer,
            targets.clone(),
            args.evaluation_limits(),
        ));
        tasks.restarting("operation-deadlines", {
            let detector = detector.clone();
            move || detector.clone().run_deadlines()
        });
        tasks.restarting("operation-expectations", {
            let detector = detector.clone();
            move || detector.clone().run_expectations(EXPECTATIONS_INTERVAL)
        });
        crate::metrics::serve_learned_from(detector.durations.clone());
        let schedules = detector.schedules().clone();
        let persistence = if args.persist {
            Some(restore(args, client, &detector, readiness, tasks).await?)
        } else {
            None
        };
        let retry = Duration::from_secs(args.requeue_interval.as_secs().max(1));
        let probe_interval = args.watch_probe_interval.max(Duration::from_secs(1));
        let liveness = Liveness {
            probe_interval,
            probe_timeout: crate::client::api_timeout(args),
        };
        let initial_list = if args.streaming_lists {
            InitialList::Streaming
        } else {
            InitialList::Paged
        };
        let watches = Arc::new(Watches::new(
            client.clone(),
            detector.clone(),
            targets.clone(),
            retry,
            initial_list,
            liveness,
            readiness.clone(),
        ));
        // One CEL environment for the controller and the admission door, so that a ruleset the
        // door lets through is one the controller compiles.
        let engine = Engine::new();
        let schemas = Arc::new(Schemas::new(Some(client.clone())));
        let status_interval = args.ruleset_status_interval.max(Duration::from_secs(1));
        tasks.restarting("ruleset-controller", {
            let (client, detector) = (client.clone(), detector.clone());
            let checks = reconcile::Checks {
                engine: engine.clone(),
                schemas: schemas.clone(),
            };
            // The first run releases readiness once the rulesets are listed; a later one (after a
            // failure) lists them again while the server serves.
            let mut listed = Some(rulesets_listed);
            move || {
                reconcile::run(
                    client.clone(),
                    checks.clone(),
                    watches.clone(),
                    detector.clone(),
                    listed.take(),
                    leading.clone(),
                    status_interval,
                )
            }
        });

        // The names of the cluster's nodes and namespaces: the gates of those it does not have
        // do not exist.
        let inventory = Arc::new(Inventory::default());
        for kind in [Kind::Node, Kind::Namespace] {
            let (inventory, client) = (inventory.clone(), client.clone());
            tasks.restarting(kind.task(), move || {
                inventory.clone().follow(client.clone(), kind)
            });
        }
        tasks.restarting("gate-existence-reporter", {
            let (inventory, scopes) = (inventory.clone(), index.scopes);
            move || inventory.clone().report_to(scopes.clone())
        });

        // The maintenance guard's facts besides the gates: where each pod runs. Listed once the
        // server is ready (the rules' targets listed and evaluated, or the initial sync given
        // up): it is a list of every pod of the cluster, and on a cold start that list would
        // share kube-apiserver with the rules' own lists and hold back every gate.
        // Until then the guard answers that it cannot place a pod, as it does before any list.
        let pods = args.eviction_guard.then(|| {
            let pods = Arc::new(Pods::default());
            let (pods_, client, readiness) = (pods.clone(), client.clone(), readiness.clone());
            tasks.restarting("pod-nodes", move || {
                let (pods, client, readiness) = (pods_.clone(), client.clone(), readiness.clone());
                async move {
                    readiness.wait().await;
                    pods.follow(client).await;
                }
            });
            pods
        });
        Ok(Pipeline {
            schemas,
            reader: index.reader,
            epochs: Some(index.epochs),
            targets,
            persistence,
            engine,
            inventory,
            pods,
            schedules,
        })
    }
}
