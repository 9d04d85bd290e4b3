//! The ruleset controller: follows OperationRuleSets, compiles each new generation once, keeps the
//! watchers in step with the valid ones, ends the operations of rulesets that go away or break,
//! and writes each ruleset's status when it changes: what users wait on (`Ready`, `InvalidRule`,
//! a suspension) within a couple of seconds, the rest (other conditions, counts, learned
//! durations) at most once per `RULESET_STATUS_INTERVAL` (see [`due`]).

use super::schema::{self, SchemaCheck};
use super::status::{Observed, awaited_change, desired, same};
use crate::detect::Detector;
use crate::evaluate::Engine;
use crate::readiness::Pending;
use crate::ruleset::schema_check::Schemas;
use crate::ruleset::{
    CompiledRuleSet, InvalidRuleSet, OperationRuleSet, RuleSetStatus, Target, api_resource, compile,
};
use crate::watch::Watches;
use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

struct Entry {
    generation: Option<i64>,
    compiled: Result<Arc<CompiledRuleSet>, InvalidRuleSet>,
    written: Option<RuleSetStatus>,
    /// When `written` was written; paces the writes nobody waits on (see [`due`]).
    written_at: Option<tokio::time::Instant>,
    /// What the fields its expressions read were checked against (none while it does not
    /// compile).
    schema: Option<SchemaCheck>,
}

/// Most rulesets checked against their targets' schemas in one status tick (each check reads
/// at most a few CRDs, kept for a while, within a deadline): a start with every shipped
/// ruleset is checked within seconds without holding the controller's loop up.
const CHECKS_PER_TICK: usize = 16;

/// Most CRD changes queued for the loop; beyond, the oldest wait in the watch (a full queue
/// makes the watcher wait, never drops a change).
const CRD_CHANGES: usize = 256;

/// How often the rulesets whose targets' schemas were not to be had are checked again (a
/// document of `/openapi/v3` that could not be read, a CRD not listed yet); a CRD's change
/// checks its rulesets again at once.
const RECHECK_UNAVAILABLE: Duration = Duration::from_secs(30);

/// How often statuses are compared and, if something users wait on changed, written.
const STATUS_INTERVAL: Duration = Duration::from_secs(2);

/// What rulesets are compiled and checked with, shared with the rulesets' admission door: the
/// CEL environment, and the schemas of their targets (kept by this controller's watch of CRDs).
#[derive(Clone)]
pub(crate) struct Checks {
    pub engine: Engine,
    pub schemas: Arc<Schemas>,
}

/// Runs for the life of the server (started again by its supervisor if it fails). `listed`, if
/// any, is released once the first list of rulesets has been loaded and the watchers it needs
/// are started (each of which holds readiness back until its own first list).
/// `status_interval` paces the status writes that nobody waits on (see [`due`]).
pub(crate) async fn run(
    client: Client,
    checks: Checks,
    watches: Arc<Watches>,
    detector: Arc<Detector>,
    mut listed: Option<Pending>,
    leading: tokio::sync::watch::Receiver<bool>,
    status_interval: Duration,
) {
    let Checks { engine, schemas } = checks;
    // Ends with this run.
    let mut crds = tokio::task::JoinSet::new();
    let (crd_changed, mut crd_changes) = tokio::sync::mpsc::channel(CRD_CHANGES);
    crds.spawn(follow_crds(
        client.clone(),
        watches.clone(),
        schemas.clone(),
        crd_changed,
    ));
    let api: Api<OperationRuleSet> = Api::all_with(client.clone(), &api_resource());
    let mut events =
        std::pin::pin!(watcher::watcher(api.clone(), watcher::Config::default()).default_backoff());
    let mut entries: HashMap<String, Entry> = HashMap::new();
    let mut seen_in_list: Option<Vec<String>> = None;
    // Rulesets gone since the last reconcile: their operations end once their watchers stopped.
    let mut removed: Vec<String> = Vec::new();
    let mut status_tick = tokio::time::interval(STATUS_INTERVAL);
    let mut recheck_tick = tokio::time::interval(RECHECK_UNAVAILABLE);
    loop {
        let event = tokio::select! {
            e = events.next() => match e { Some(e) => e, None => return },
            _ = status_tick.tick() => {
                if *leading.borrow() {
                    check_schemas(&schemas, &mut entries).await;
                    write_statuses(&api, &mut entries, &detector, status_interval).await;
                }
                continue;
            }
            _ = recheck_tick.tick() => {
                for entry in entries.values_mut() {
                    if matches!(entry.schema, Some(SchemaCheck::Unavailable(_))) {
                        entry.schema = Some(SchemaCheck::Pending);
                    }
                }
                continue;
            }
            Some(crd) = crd_changes.recv() => {
                for (name, entry) in entries.iter_mut() {
                    if let Ok(rs) = &entry.compiled
                        && schema::crds_of(rs).any(|c| c == crd)
                    {
                        tracing::debug!(ruleset = %name, %crd, "a target's CRD changed: checking the ruleset against it again");
                        entry.schema = Some(SchemaCheck::Pending);
                    }
                }
                continue;
            }
        };
        // Test builds: lets a test make the controller fail (it is started again).
        fail::fail_point!("ruleset-controller-event");
        let changed = match event {
            Ok(watcher::Event::Init) => {
                seen_in_list = Some(Vec::new());
                false
            }
            Ok(watcher::Event::InitApply(ors)) => {
                if let (Some(seen), Some(name)) = (seen_in_list.as_mut(), ors.metadata.name.clone())
                {
                    seen.push(name);
                }
                upsert(&engine, &detector, &mut entries, ors)
            }
            Ok(watcher::Event::InitDone) => {
                let seen = seen_in_list.take().unwrap_or_default();
                for name in gone(&entries, detector.known_rulesets(), &seen) {
                    entries.remove(&name);
                    removed.push(name);
                }
                true
            }
            Ok(watcher::Event::Apply(ors)) => upsert(&engine, &detector, &mut entries, ors),
            Ok(watcher::Event::Delete(ors)) => {
                if let Some(name) = ors.metadata.name
                    && entries.remove(&name).is_some()
                {
                    removed.push(name);
                }
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "watching OperationRuleSets failed; retrying");
                false
            }
        };
        if changed && seen_in_list.is_none() {
            watches.reconcile(wanted(&entries)).await;
            // Only now: a watcher still running a removed ruleset's rules could otherwise start
            // an operation after its removal ended them, and it would stay Active for good.
            for name in removed.drain(..) {
                tracing::info!(ruleset = %name, "ruleset removed; its operations end");
                detector.ruleset_removed(&name);
                detector.reset_ruleset(&name);
                detector.durations.forget(&name);
            }
            // After reconcile: the watchers it started already hold readiness.
            if let Some(listed) = listed.take() {
                listed.done();
            }
        }
    }
}

/// The rulesets deleted while they were not watched, once a list saw `seen`: those this run
/// knows of (a relist after a watch error) and those detection still knows of (a controller
/// started again after a failure begins with no entries, while the detector kept the rulesets
/// loaded, and their operations, from before).
fn gone(
    entries: &HashMap<String, Entry>,
    known: BTreeSet<String>,
    seen: &[String],
) -> BTreeSet<String> {
    let mut gone = known;
    gone.extend(entries.keys().cloned());
    gone.retain(|name| !seen.contains(name));
    gone
}

fn wanted(entries: &HashMap<String, Entry>) -> BTreeMap<Target, Vec<Arc<CompiledRuleSet>>> {
    let mut wanted: BTreeMap<Target, Vec<Arc<CompiledRuleSet>>> = BTreeMap::new();
    for entry in entries.values() {
        if let Ok(rs) = &entry.compiled {
            // Its related parts are watched as rulesets of their own targets.
            for rs in std::iter::once(rs).chain(&rs.related) {
                wanted
                    .entry(rs.target.clone())
                    .or_default()
                    .push(rs.clone());
            }
        }
    }
    for list in wanted.values_mut() {
        list.sort_by(|a, b| a.info.name.cmp(&b.info.name));
    }
    wanted
}

/// Returns whether the set of valid rulesets changed.
fn upsert(
    engine: &Engine,
    detector: &Detector,
    entries: &mut HashMap<String, Entry>,
    ors: OperationRuleSet,
) -> bool {
    let Some(name) = ors.metadata.name.clone() else {
        return false;
    };
    let generation = ors.metadata.generation;
    if entries
        .get(&name)
        .is_some_and(|e| e.generation == generation)
    {
        // Only status or metadata changed (our own status writes come back here).
        return false;
    }
    let compiled = compile(engine, &name, generation, &ors.spec).map(Arc::new);
    match &compiled {
        Ok(rs) => {
            tracing::info!(ruleset = %name, generation, target = %rs.target, rules = rs.operations.len(), "ruleset loaded")
        }
        Err(errors) => {
            tracing::warn!(ruleset = %name, generation, errors = ?errors, "ruleset invalid; none of its rules run");
        }
    }
    let previous = entries.remove(&name);
    let was_valid = previous.as_ref().is_some_and(|e| e.compiled.is_ok());
    // The old rules stop now: an invalid ruleset or a new target ends all its operations; a
    // dropped operation ends too (nothing would evaluate it again). The restarted watch then
    // re-evaluates every object and keeps the occurrences that still match.
    if was_valid {
        let old_target = previous
            .as_ref()
            .and_then(|e| e.compiled.as_ref().ok())
            .map(|r| r.target.clone());
        match &compiled {
            Ok(rs) if Some(&rs.target) == old_target.as_ref() => detector.retain_rules(rs),
            _ => detector.ruleset_removed(&name),
        }
    }
    if let Ok(rs) = &compiled {
        // What was learned before a restart or failover, for what nothing was learned of yet;
        // and nothing of operations the rules no longer have.
        if let Some(status) = &ors.status {
            detector
                .durations
                .seed(&name, &rs.info.component, &status.operation_durations);
        }
        detector.durations.retain(&name, &rs.operations);
        detector.durations.keyed_by(&name, &rs.durations_by);
        // From here on, evaluations by older generations (watchers not restarted yet) are ignored.
        detector.ruleset_loaded(&name, rs.generation);
    }
    detector.reset_ruleset(&name);
    if let Ok(rs) = &compiled {
        detector.related_loaded(rs);
    }
    if let Err(invalid) = &compiled {
        let error = invalid
            .problems
            .first()
            // A compile error's first line: its caret lines are for the ruleset's status.
            .and_then(|p| p.to_string().lines().next().map(str::to_owned))
            .unwrap_or_else(|| "it does not compile".to_owned());
        detector.ruleset_invalid(&name, &ors.spec, error);
    }
    let (written, written_at) = previous.map_or((None, None), |e| (e.written, e.written_at));
    let schema = compiled.is_ok().then_some(SchemaCheck::Pending);
    entries.insert(
        name,
        Entry {
            generation,
            compiled,
            written: written.or(ors.status),
            written_at,
            schema,
        },
    );
    true
}

/// Whether a ruleset's status, written as `written` at `written_at`, is to be written as
/// `status` at `now`: at once when it was never written or something users wait on changed
/// ([`awaited_change`]: `Ready`, `InvalidRule`, a suspension); otherwise (the other conditions,
/// counts, learned durations) once `interval` has passed since the last write. A change after
/// a quiet interval goes out at the next tick; a ruleset whose counts change all the time, or
/// whose condition flips and flips back, is written about once per interval, the flip and its
/// return not at all when both fall within it. Each write is a request to kube-apiserver, a
/// write to etcd and an event for every watcher of rulesets: the demo's busy rulesets were
/// written 5 times a minute each.
fn due(
    written: Option<&RuleSetStatus>,
    written_at: Option<tokio::time::Instant>,
    status: &RuleSetStatus,
    interval: Duration,
    now: tokio::time::Instant,
) -> bool {
    match written {
        None => true,
        Some(w) if same(w, status) => false,
        Some(w) if awaited_change(w, status) => true,
        Some(_) => written_at.is_none_or(|at| now.duration_since(at) >= interval),
    }
}

/// Checks up to [`CHECKS_PER_TICK`] rulesets waiting for it against their targets' schemas.
async fn check_schemas(schemas: &Schemas, entries: &mut HashMap<String, Entry>) {
    let waiting = entries
        .iter_mut()
        .filter(|(_, e)| e.schema == Some(SchemaCheck::Pending))
        .take(CHECKS_PER_TICK);
    for (name, entry) in waiting {
        let Ok(rs) = &entry.compiled else { continue };
        let check = schema::check(schemas, rs).await;
        match &check {
            SchemaCheck::Problems(problems) => {
                tracing::warn!(ruleset = %name, target = %rs.target, problems = ?problems, "the ruleset reads what its target's schema does not have")
            }
            SchemaCheck::Unavailable(why) => {
                tracing::debug!(ruleset = %name, target = %rs.target, why, "the ruleset's fields are not checked")
            }
            SchemaCheck::Checked { .. } | SchemaCheck::Pending => {}
        }
        entry.schema = Some(check);
    }
}

async fn write_statuses(
    api: &Api<OperationRuleSet>,
    entries: &mut HashMap<String, Entry>,
    detector: &Detector,
    interval: Duration,
) {
    for (name, entry) in entries.iter_mut() {
        let observed = Observed {
            generation: entry.generation,
            invalid: entry.compiled.as_ref().err(),
            health: detector.ruleset_health(name),
            active_operations: detector.active_count(name),
            operation_durations: detector.durations.published(name),
            schema: entry.schema.as_ref(),
        };
        let status = desired(&observed, entry.written.as_ref());
        let now = tokio::time::Instant::now();
        if !due(
            entry.written.as_ref(),
            entry.written_at,
            &status,
            interval,
            now,
        ) {
            continue;
        }
        let patch = serde_json::json!({"status": status});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                crate::metrics::ruleset_status_written(name);
                tracing::debug!(ruleset = %name, "ruleset status written");
                entry.written = Some(status);
                entry.written_at = Some(now);
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(ruleset = %name, error = %e, "writing ruleset status failed; will retry")
            }
        }
    }
}

/// Keeps `schemas` in step with the cluster's CRDs, wakes watchers waiting for a missing target
/// whenever a CRD is added or changes, and tells the controller's loop the name of each CRD
/// added, changed, deleted, or listed again after the watch was down, or found gone then (its
/// rulesets are checked against it again).
async fn follow_crds(
    client: Client,
    watches: Arc<Watches>,
    schemas: Arc<Schemas>,
    changed: tokio::sync::mpsc::Sender<String>,
) {
    // As JSON, not typed: the schemas are kept as the checker walks them, and a CRD's schema
    // (hundreds of kilobytes for KubeVirt's) is read once, not parsed into types and back.
    let api: Api<DynamicObject> = Api::all_with(
        client,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let mut events =
        std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    // The wake-ups under way, ended with this loop.
    let mut wakes = tokio::task::JoinSet::new();
    while let Some(event) = events.next().await {
        while wakes.try_join_next().is_some() {}
        let names = match &event {
            Ok(watcher::Event::Init) => {
                schemas.crds_relisting();
                Vec::new()
            }
            // After a relist too (InitApply): a CRD may have changed while the watch was down.
            Ok(watcher::Event::Apply(crd) | watcher::Event::InitApply(crd)) => {
                let name = crd.metadata.name.clone().unwrap_or_default();
                schemas.crd_applied(&name, &crd.data["spec"]);
                vec![name]
            }
            Ok(watcher::Event::Delete(crd)) => {
                let name = crd.metadata.name.clone().unwrap_or_default();
                schemas.crd_deleted(&name);
                vec![name]
            }
            Ok(watcher::Event::InitDone) => schemas.crds_listed(),
            Err(_) => Vec::new(),
        };
        for name in names {
            if changed.send(name).await.is_err() {
                // The loop is gone: so is this run.
                return;
            }
        }
        match event {
            Ok(watcher::Event::Apply(_) | watcher::Event::InitDone) => {
                // Established takes a moment after creation; give discovery time to catch up.
                let notify = watches.crds_changed.clone();
                wakes.spawn(async move {
                    for delay in [0u64, 1, 3] {
                        tokio::time::sleep(Duration::from_secs(delay)).await;
                        notify.notify_waiters();
                    }
                });
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(error = %e, "watching CRDs failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests;
