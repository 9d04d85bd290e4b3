//! The ruleset controller: follows OperationRuleSets, compiles each new generation once, keeps the
//! watchers in step with the valid ones, ends the operations of rulesets that go away or break,
//! and writes each ruleset's status when it changes (at most every couple of seconds).

use super::status::{Observed, desired, only_counts_differ, same};
use crate::detect::Detector;
use crate::evaluate::Engine;
use crate::readiness::Pending;
use crate::ruleset::{
    CompiledRuleSet, InvalidRuleSet, OperationRuleSet, RuleSetStatus, Target, api_resource, compile,
};
use crate::watch::Watches;
use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

struct Entry {
    generation: Option<i64>,
    compiled: Result<Arc<CompiledRuleSet>, InvalidRuleSet>,
    written: Option<RuleSetStatus>,
    /// When `written` was written; paces writes that only refresh counts.
    written_at: Option<tokio::time::Instant>,
}

/// How often statuses are compared and, if a condition changed, written.
const STATUS_INTERVAL: Duration = Duration::from_secs(2);
/// How often a status is written when only its counts changed: on a busy cluster they change
/// all the time, and each write is a request to kube-apiserver and an event for its watchers.
const COUNTS_INTERVAL: Duration = Duration::from_secs(10);

/// Runs for the life of the server (started again by its supervisor if it fails). `listed`, if
/// any, is released once the first list of rulesets has been loaded and the watchers it needs
/// are started (each of which holds readiness back until its own first list).
pub async fn run(
    client: Client,
    engine: Engine,
    watches: Arc<Watches>,
    detector: Arc<Detector>,
    mut listed: Option<Pending>,
    leading: tokio::sync::watch::Receiver<bool>,
) {
    // Ends with this run.
    let mut crds = tokio::task::JoinSet::new();
    crds.spawn(follow_crds(client.clone(), watches.clone()));
    let api: Api<OperationRuleSet> = Api::all_with(client.clone(), &api_resource());
    let mut events =
        std::pin::pin!(watcher::watcher(api.clone(), watcher::Config::default()).default_backoff());
    let mut entries: HashMap<String, Entry> = HashMap::new();
    let mut seen_in_list: Option<Vec<String>> = None;
    // Rulesets gone since the last reconcile: their operations end once their watchers stopped.
    let mut removed: Vec<String> = Vec::new();
    let mut status_tick = tokio::time::interval(STATUS_INTERVAL);
    loop {
        let event = tokio::select! {
            e = events.next() => match e { Some(e) => e, None => return },
            _ = status_tick.tick() => {
                if *leading.borrow() {
                    write_statuses(&api, &mut entries, &detector).await;
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
            wanted
                .entry(rs.target.clone())
                .or_default()
                .push(rs.clone());
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
            Ok(rs) if Some(&rs.target) == old_target.as_ref() => {
                detector.retain_operations(&name, &rs.operations)
            }
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
        // From here on, evaluations by older generations (watchers not restarted yet) are ignored.
        detector.ruleset_loaded(&name, rs.generation);
    }
    detector.reset_ruleset(&name);
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
    entries.insert(
        name,
        Entry {
            generation,
            compiled,
            written: written.or(ors.status),
            written_at,
        },
    );
    true
}

async fn write_statuses(
    api: &Api<OperationRuleSet>,
    entries: &mut HashMap<String, Entry>,
    detector: &Detector,
) {
    for (name, entry) in entries.iter_mut() {
        let observed = Observed {
            generation: entry.generation,
            invalid: entry.compiled.as_ref().err(),
            health: detector.health_reader().ruleset(name),
            active_operations: detector.active_count(name),
            operation_durations: detector.durations.published(name),
        };
        let status = desired(&observed, entry.written.as_ref());
        let due = match &entry.written {
            None => true,
            Some(w) if same(w, &status) => false,
            Some(w) if only_counts_differ(w, &status) => entry
                .written_at
                .is_none_or(|t| t.elapsed() >= COUNTS_INTERVAL),
            Some(_) => true,
        };
        if !due {
            continue;
        }
        let patch = serde_json::json!({"status": status});
        match api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => {
                entry.written = Some(status);
                entry.written_at = Some(tokio::time::Instant::now());
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => {
                tracing::warn!(ruleset = %name, error = %e, "writing ruleset status failed; will retry")
            }
        }
    }
}

/// Wakes watchers waiting for a missing target whenever a CRD is added or changes.
async fn follow_crds(client: Client, watches: Arc<Watches>) {
    let api: Api<CustomResourceDefinition> = Api::all(client);
    let mut events =
        std::pin::pin!(watcher::watcher(api, watcher::Config::default()).default_backoff());
    while let Some(event) = events.next().await {
        match event {
            Ok(watcher::Event::Apply(_) | watcher::Event::InitDone) => {
                // Established takes a moment after creation; give discovery time to catch up.
                let notify = watches.crds_changed.clone();
                tokio::spawn(async move {
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
mod tests {
    use super::*;

    #[test]
    fn rulesets_deleted_while_not_watched_are_gone_after_a_restart_too() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        let seen = ["kept".to_string()];
        // A controller started again: no entries, but detection still knows every ruleset.
        let known = names(&["kept", "deleted-meanwhile", "invalid-deleted"]);
        assert_eq!(
            gone(&HashMap::new(), known, &seen),
            names(&["deleted-meanwhile", "invalid-deleted"])
        );
        // A relist of a running controller: nothing known but its entries.
        assert!(gone(&HashMap::new(), BTreeSet::new(), &seen).is_empty());
    }
}
