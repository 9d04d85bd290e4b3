//! The set of running watchers. A watcher is tied to the exact rulesets it serves: when that set
//! changes it is restarted, so the fresh list re-evaluates every current object against the new rules.

use super::detector::Detector;
use super::health::WatchState;
use super::lanes::Lanes;
use crate::readiness::{Pending, Readiness};
use crate::ruleset::{CompiledRuleSet, Target};
use futures::StreamExt;
use kube::api::DynamicObject;
use kube::core::{ApiResource, GroupVersion};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

struct Running {
    /// (name, generation) of the rulesets this watcher evaluates, to notice any change.
    fingerprint: Vec<(String, Option<i64>)>,
    task: JoinHandle<()>,
}

pub struct Watches {
    client: Client,
    detector: Arc<Detector>,
    running: Mutex<HashMap<Target, Running>>,
    /// Notified when CRDs change, so watchers waiting for a missing target retry at once.
    pub crds_changed: Arc<Notify>,
    retry: Duration,
    readiness: Readiness,
}

impl Watches {
    /// Each watcher started before the server is ready holds `readiness` back until its first
    /// list has completed or failed (see [`crate::readiness`]).
    pub fn new(
        client: Client,
        detector: Arc<Detector>,
        retry: Duration,
        readiness: Readiness,
    ) -> Self {
        Watches {
            client,
            detector,
            running: Mutex::new(HashMap::new()),
            crds_changed: Arc::new(Notify::new()),
            retry,
            readiness,
        }
    }

    /// Makes the running watchers match `wanted`: one per target, with exactly those rulesets.
    pub fn reconcile(&self, wanted: BTreeMap<Target, Vec<Arc<CompiledRuleSet>>>) {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        running.retain(|target, r| {
            let keep = wanted.contains_key(target);
            if !keep {
                tracing::info!(target = %target, "stopping watch: no ruleset targets it any more");
                r.task.abort();
            }
            keep
        });
        for (target, rulesets) in wanted {
            let fingerprint: Vec<_> = rulesets
                .iter()
                .map(|r| (r.info.name.clone(), r.generation))
                .collect();
            if running
                .get(&target)
                .is_some_and(|r| r.fingerprint == fingerprint)
            {
                continue;
            }
            // Registered before the task it replaces is aborted, so readiness never slips through.
            let synced = self
                .readiness
                .pending(format!("the initial list of {target}"));
            if let Some(old) = running.remove(&target) {
                old.task.abort();
                tracing::info!(target = %target, "restarting watch: its rulesets changed");
            } else {
                tracing::info!(target = %target, "starting watch");
            }
            let task = tokio::spawn(watch_target(
                self.client.clone(),
                Progress {
                    detector: self.detector.clone(),
                    rulesets,
                    synced: Some(synced),
                },
                target.clone(),
                self.crds_changed.clone(),
                self.retry,
            ));
            running.insert(target, Running { fingerprint, task });
        }
        crate::metrics::set_watches(running.len());
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for r in self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
        {
            r.task.abort();
        }
    }
}

/// Finds the target in discovery; `Ok(None)` when the API server does not serve it.
async fn resolve(
    client: &Client,
    target: &Target,
) -> Result<Option<(ApiResource, bool)>, kube::Error> {
    let gv = GroupVersion::gv(&target.group, &target.version);
    match kube::discovery::pinned_group(client, &gv).await {
        Ok(group) => Ok(group
            .versioned_resources(&target.version)
            .into_iter()
            .find(|(ar, _)| ar.plural == target.resource)
            .map(|(ar, caps)| (ar, caps.scope == kube::discovery::Scope::Namespaced))),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(None),
        Err(e) => Err(e),
    }
}

/// Where one watcher reports what it learns: its rulesets' health, and readiness.
struct Progress {
    detector: Arc<Detector>,
    rulesets: Vec<Arc<CompiledRuleSet>>,
    /// Held until the first list completes or fails: either way the rulesets' status then
    /// says what we serve for this target, so the server need not wait for it any longer.
    synced: Option<Pending>,
}

impl Progress {
    fn set_state(&mut self, state: WatchState) {
        if state != WatchState::Starting
            && let Some(synced) = self.synced.take()
        {
            synced.done();
        }
        for rs in &self.rulesets {
            self.detector.health.set_watch(&rs.info.name, state.clone());
        }
    }
}

/// Watches one target for as long as the task lives.
async fn watch_target(
    client: Client,
    mut progress: Progress,
    target: Target,
    crds_changed: Arc<Notify>,
    retry: Duration,
) {
    progress.set_state(WatchState::Starting);
    let (ar, namespaced) = loop {
        match resolve(&client, &target).await {
            Ok(Some(found)) => break found,
            Ok(None) => {
                let msg =
                    format!("the server does not serve {target}; the watch starts when it does");
                tracing::warn!(target = %target, "{msg}");
                progress.set_state(WatchState::InvalidTarget(msg));
            }
            Err(e) => {
                tracing::warn!(target = %target, error = %e, "discovery failed");
                progress.set_state(WatchState::Failed(format!(
                    "discovery of {target} failed: {e}"
                )));
            }
        }
        tokio::select! {
            _ = crds_changed.notified() => {}
            _ = tokio::time::sleep(retry) => {}
        }
    };

    // Namespace-scoped watches when every ruleset lists its namespaces (less to stream, and RBAC
    // may only allow those namespaces).
    let (detector, rulesets) = (progress.detector.clone(), progress.rulesets.clone());
    let namespaces: Option<Vec<String>> =
        if namespaced && rulesets.iter().all(|r| !r.namespaces.is_empty()) {
            let set: std::collections::BTreeSet<String> =
                rulesets.iter().flat_map(|r| r.namespaces.clone()).collect();
            Some(set.into_iter().collect())
        } else {
            None
        };
    let apis: Vec<(Option<String>, Api<DynamicObject>)> = match &namespaces {
        Some(list) => list
            .iter()
            .map(|ns| {
                (
                    Some(ns.clone()),
                    Api::namespaced_with(client.clone(), ns, &ar),
                )
            })
            .collect(),
        None => vec![(None, Api::all_with(client.clone(), &ar))],
    };
    let target_name = target.to_string();
    // Evaluation happens in the lanes, off this task: it only reads the stream and routes events.
    let lanes = Lanes::start(&detector, &rulesets);
    let streams = apis.into_iter().map(|(ns, api)| {
        watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .map(move |event| (ns.clone(), event))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    // Subjects seen by the latest complete list of each namespace stream.
    let mut listed: HashMap<Option<String>, HashSet<String>> = HashMap::new();
    let mut listing: HashMap<Option<String>, HashSet<String>> = HashMap::new();
    let streams_total = namespaces.as_ref().map_or(1, Vec::len);
    while let Some((ns, event)) = events.next().await {
        match event {
            Ok(watcher::Event::Init) => {
                listing.insert(ns, HashSet::new());
            }
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some(uid) = obj.metadata.uid.clone() {
                    listing.entry(ns).or_default().insert(uid);
                }
                evaluate(&lanes, &target_name, &obj);
            }
            Ok(watcher::Event::InitDone) => {
                listed.insert(ns.clone(), listing.remove(&ns).unwrap_or_default());
                // Only a complete picture may say a subject is gone: until every namespace has
                // listed, the others' subjects are merely unknown.
                if listed.len() == streams_total {
                    let present: HashSet<String> = listed.values().flatten().cloned().collect();
                    let count = present.len();
                    lanes.resync(present);
                    progress.set_state(WatchState::Active);
                    tracing::info!(target = %target_name, objects = count, "watch active");
                }
            }
            Ok(watcher::Event::Apply(obj)) => evaluate(&lanes, &target_name, &obj),
            Ok(watcher::Event::Delete(obj)) => {
                if let Some(uid) = obj.metadata.uid.as_deref() {
                    lanes.delete(uid);
                }
            }
            // The history kube-apiserver keeps moved past us: the watcher lists again. That is
            // routine (e.g. right after a CRD is created), not a failure of the ruleset.
            Err(watcher::Error::WatchError(s)) if s.code == 410 => {
                tracing::debug!(target = %target_name, error = %s.message, "watch expired; listing again");
            }
            Err(e) => {
                let message = watch_error_message(&e);
                tracing::warn!(target = %target_name, error = %message, "watch failed; retrying with backoff");
                progress.set_state(WatchState::Failed(message));
            }
        }
    }
}

fn watch_error_message(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(kube::Error::Api(s))
        | watcher::Error::WatchStartFailed(kube::Error::Api(s))
        | watcher::Error::WatchFailed(kube::Error::Api(s)) => s.message.clone(),
        other => other.to_string(),
    }
}

/// Hands an object to the lanes of the rulesets it concerns.
fn evaluate(lanes: &Lanes, target: &str, obj: &DynamicObject) {
    crate::metrics::object_event(target);
    match serde_json::to_value(obj) {
        Ok(value) => lanes.apply(value),
        Err(e) => tracing::warn!(target, error = %e, "object could not be read"),
    }
}
