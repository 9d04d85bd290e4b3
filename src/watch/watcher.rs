//! The set of running watchers. A watcher is tied to the exact rulesets it serves: when that set
//! changes it is restarted, so the fresh list re-evaluates every current object against the new rules.
//!
//! Each watcher also says whether it is current ([`Health`]): a list or watch that fails
//! makes its stream stale until a list completes again, and a periodic liveness probe catches a
//! watch that stalls without failing.
//!
//! Following a watcher's streams is `follow.rs`; how each stream is listed and listed again,
//! `relist.rs`.

mod follow;
mod relist;

use super::object::Object;
use crate::detect::{Detector, Health, Reach, Stream, WatchState};
use crate::readiness::{Pending, Readiness};
use crate::ruleset::{CompiledRuleSet, Target};
use kube::api::ListParams;
use kube::core::{ApiResource, GroupVersion};
use kube::{Api, Client};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::Instrument;

use follow::follow_events;
use relist::kube_error_message;
pub(crate) use relist::{InitialList, watch_error_message};

struct Running {
    /// (name, generation) of the rulesets this watcher evaluates, to notice any change.
    fingerprint: Vec<(String, Option<i64>)>,
    task: JoinHandle<()>,
}

/// How watchers find out whether they are current.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Liveness {
    /// How often each stream's target is listed (one object) to catch a silently stalled watch.
    pub probe_interval: Duration,
    /// How long such a list may take before the stream counts as stalled.
    pub probe_timeout: Duration,
}

pub(crate) struct Watches {
    client: Client,
    detector: Arc<Detector>,
    health: Arc<Health>,
    running: Mutex<HashMap<Target, Running>>,
    /// Notified when CRDs change, so watchers waiting for a missing target retry at once.
    pub crds_changed: Arc<Notify>,
    retry: Duration,
    initial_list: InitialList,
    liveness: Liveness,
    readiness: Readiness,
}

impl Watches {
    /// Each watcher started before the server is ready holds `readiness` back until its first
    /// list has completed or failed (see [`crate::readiness`]).
    pub(crate) fn new(
        client: Client,
        detector: Arc<Detector>,
        health: Arc<Health>,
        retry: Duration,
        initial_list: InitialList,
        liveness: Liveness,
        readiness: Readiness,
    ) -> Self {
        Watches {
            client,
            detector,
            health,
            running: Mutex::new(HashMap::new()),
            crds_changed: Arc::new(Notify::new()),
            retry,
            initial_list,
            liveness,
            readiness,
        }
    }

    /// Makes the running watchers match `wanted`: one per target, with exactly those rulesets.
    /// Returns once every watcher it stopped or replaced has stopped: from then on nothing
    /// evaluates their rulesets any more (the caller may then end their operations).
    pub(crate) async fn reconcile(&self, wanted: BTreeMap<Target, Vec<Arc<CompiledRuleSet>>>) {
        let stopped = self.restart(wanted);
        for task in stopped {
            // Cancelled: it stops at its next await point, and never evaluates after that.
            let _ = task.await;
        }
    }

    /// Starts, restarts and stops watchers; returns the tasks it aborted.
    fn restart(&self, wanted: BTreeMap<Target, Vec<Arc<CompiledRuleSet>>>) -> Vec<JoinHandle<()>> {
        let mut stopped = Vec::new();
        let mut running = self.running.lock();
        let gone: Vec<Target> = running
            .keys()
            .filter(|t| !wanted.contains_key(*t))
            .cloned()
            .collect();
        for target in gone {
            tracing::info!(target = %target, "stopping watch: no ruleset targets it any more");
            if let Some(r) = running.remove(&target) {
                r.task.abort();
                stopped.push(r.task);
            }
            self.health.forget(&target);
        }
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
                stopped.push(old.task);
                tracing::info!(target = %target, "restarting watch: its rulesets changed");
            } else {
                tracing::info!(target = %target, "starting watch");
            }
            self.health.watching(&target, feeds(&rulesets));
            self.health.reaches(&target, reach(&rulesets));
            let ctx = Context {
                client: self.client.clone(),
                health: self.health.clone(),
                crds_changed: self.crds_changed.clone(),
                retry: self.retry,
                initial_list: self.initial_list,
                liveness: self.liveness,
            };
            let (detector, health, watched) =
                (self.detector.clone(), self.health.clone(), target.clone());
            let mut synced = Some(synced);
            let span = tracing::info_span!("watcher", target = %target);
            // A watcher that fails is started again (it lists its target afresh). Owned by
            // `Watches` through its handle, which aborts it when its target is no longer wanted
            // or is watched anew: a task per target, which the server's `Tasks` cannot stop one
            // by one.
            #[allow(clippy::disallowed_methods)]
            let task = tokio::spawn(
                crate::supervise::restarting("watcher", move || {
                    watch_target(
                        ctx.clone(),
                        Progress {
                            detector: detector.clone(),
                            health: health.clone(),
                            rulesets: rulesets.clone(),
                            synced: synced.take(),
                        },
                        watched.clone(),
                    )
                })
                .instrument(span),
            );
            running.insert(target, Running { fingerprint, task });
        }
        crate::metrics::set_watches(running.len());
        stopped
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for r in self.running.lock().values() {
            r.task.abort();
        }
    }
}

/// The namespaces whose operations `rulesets` produce; `None`: any.
fn feeds(rulesets: &[Arc<CompiledRuleSet>]) -> Option<BTreeSet<String>> {
    if rulesets.iter().any(|r| r.namespaces.is_empty()) {
        return None;
    }
    Some(
        rulesets
            .iter()
            .flat_map(|r| r.namespaces.iter().cloned())
            .collect(),
    )
}

/// The maintenance gates each of `rulesets` can put operations in (see [`Reach`]).
fn reach(rulesets: &[Arc<CompiledRuleSet>]) -> BTreeMap<String, Reach> {
    rulesets
        .iter()
        .map(|r| (r.info.name.clone(), Reach::of(r)))
        .collect()
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

/// What every watcher shares.
#[derive(Clone)]
struct Context {
    client: Client,
    health: Arc<Health>,
    crds_changed: Arc<Notify>,
    retry: Duration,
    initial_list: InitialList,
    liveness: Liveness,
}

/// Where one watcher reports what it learns: its rulesets' health, and readiness.
struct Progress {
    detector: Arc<Detector>,
    health: Arc<Health>,
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
            self.health.set_watch(&rs.info.name, state.clone());
        }
    }
}

/// Watches one target for as long as the task lives.
async fn watch_target(ctx: Context, mut progress: Progress, target: Target) {
    progress.set_state(WatchState::Starting);
    let (ar, namespaced) = loop {
        match resolve(&ctx.client, &target).await {
            Ok(Some(found)) => break found,
            Ok(None) => {
                let msg =
                    format!("the server does not serve {target}; the watch starts when it does");
                tracing::warn!(target = %target, "{msg}");
                ctx.health.not_served(&target);
                progress.set_state(WatchState::InvalidTarget(msg));
            }
            Err(e) => {
                tracing::warn!(target = %target, error = %e, "discovery failed");
                let msg = format!("discovery of {target} failed: {e}");
                ctx.health.unresolved(&target, msg.clone());
                progress.set_state(WatchState::Failed(msg));
            }
        }
        tokio::select! {
            _ = ctx.crds_changed.notified() => {}
            _ = tokio::time::sleep(ctx.retry) => {}
        }
    };

    // Namespace-scoped watches when every ruleset lists its namespaces (less to stream, and RBAC
    // may only allow those namespaces).
    let namespaces: Option<Vec<String>> = if namespaced {
        feeds(&progress.rulesets).map(|set| set.into_iter().collect())
    } else {
        None
    };
    let apis: Vec<(Stream, Api<Object>)> = match &namespaces {
        Some(list) => list
            .iter()
            .map(|ns| {
                (
                    Some(ns.clone()),
                    Api::namespaced_with(ctx.client.clone(), ns, &ar),
                )
            })
            .collect(),
        None => vec![(None, Api::all_with(ctx.client.clone(), &ar))],
    };
    let streams: Vec<Stream> = apis.iter().map(|(s, _)| s.clone()).collect();
    ctx.health.resolved(&target, namespaced, &streams);
    let _failed_if_panicking = PanicMarksFailed {
        health: &ctx.health,
        target: &target,
        streams,
    };
    tokio::select! {
        _ = follow_events(&ctx, &mut progress, &target, &ar, &apis) => {}
        _ = probe(&ctx, &target, &apis) => {}
    }
}

/// Marks a watcher's streams failed when its task panics: it is started again after a backoff
/// (see `supervise`), and until its new list completes nothing of the target is seen. Without
/// it, the streams would read current all that time.
struct PanicMarksFailed<'a> {
    health: &'a Health,
    target: &'a Target,
    streams: Vec<Stream>,
}

impl Drop for PanicMarksFailed<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            for stream in &self.streams {
                self.health.failed(
                    self.target,
                    stream,
                    "its watcher failed (it panicked) and is started again".to_owned(),
                );
            }
        }
    }
}

/// Lists one object of each stream every probe interval: a watch can stall without failing
/// (etcd unavailable: kube-apiserver keeps the watch open, and nothing arrives), and a list is
/// what tells. RBAC revoked while a watch is open is caught the same way.
async fn probe(ctx: &Context, target: &Target, apis: &[(Stream, Api<Object>)]) {
    let Liveness {
        probe_interval,
        probe_timeout,
    } = ctx.liveness;
    let one = ListParams::default().limit(1);
    loop {
        tokio::time::sleep(probe_interval).await;
        for (ns, api) in apis {
            let failure = match tokio::time::timeout(probe_timeout, api.list_metadata(&one)).await {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(format!("list failed: {}", kube_error_message(&e))),
                Err(_) => Some(format!(
                    "list did not answer within {}s",
                    probe_timeout.as_secs()
                )),
            };
            if let Some(reason) = &failure {
                tracing::warn!(target = %target, namespace = ns.as_deref(), error = %reason, "liveness probe failed");
                crate::metrics::target_watch_failure(target);
            }
            ctx.health.probed(target, ns, failure);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watcher task that panics leaves its streams failed, not current, for the time its
    /// restart takes; one that ends otherwise (stopped) leaves them as they were.
    #[test]
    fn a_panicking_watcher_marks_its_streams_failed() {
        let health = Arc::new(Health::default());
        let target = Target::of("example.com", "v1", "things");
        health.watching(&target, None);
        health.resolved(&target, true, &[None]);
        health.listed(&target, &None, jiff::Timestamp::UNIX_EPOCH);
        let guard = |health: Arc<Health>, target: Target, panic: bool| {
            std::thread::spawn(move || {
                let _guard = PanicMarksFailed {
                    health: &health,
                    target: &target,
                    streams: vec![None],
                };
                assert!(!panic, "the watcher's bug");
            })
            .join()
        };
        assert!(guard(health.clone(), target.clone(), false).is_ok());
        assert!(health.reader().stale(None).is_empty());
        assert!(guard(health.clone(), target.clone(), true).is_err());
        let stale = health.reader().stale(None);
        assert_eq!(stale.len(), 1, "{stale:?}");
        assert!(
            format!("{}", stale[0].reason).contains("it panicked"),
            "{stale:?}"
        );
    }
}
