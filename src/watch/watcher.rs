//! The set of running watchers. A watcher is tied to the exact rulesets it serves: when that set
//! changes it is restarted, so the fresh list re-evaluates every current object against the new rules.
//!
//! Each watcher also says whether it is current ([`Health`]): a list or watch that fails
//! makes its stream stale until a list completes again, and a periodic liveness probe catches a
//! watch that stalls without failing.

use super::object::Object;
use crate::detect::{Detector, Health, Lanes, Reach, Stream, WatchState};
use crate::readiness::{Pending, Readiness};
use crate::ruleset::{CompiledRuleSet, Target};
use futures::StreamExt;
use futures::stream::BoxStream;
use kube::api::ListParams;
use kube::core::{ApiResource, GroupVersion};
use kube::runtime::watcher;
use kube::{Api, Client};
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tracing::Instrument;

struct Running {
    /// (name, generation) of the rulesets this watcher evaluates, to notice any change.
    fingerprint: Vec<(String, Option<i64>)>,
    task: JoinHandle<()>,
}

/// How watchers find out whether they are current.
#[derive(Clone, Copy, Debug)]
pub struct Liveness {
    /// How often each stream's target is listed (one object) to catch a silently stalled watch.
    pub probe_interval: Duration,
    /// How long such a list may take before the stream counts as stalled.
    pub probe_timeout: Duration,
}

pub struct Watches {
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
    pub fn new(
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
    pub async fn reconcile(&self, wanted: BTreeMap<Target, Vec<Arc<CompiledRuleSet>>>) {
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
            // A watcher that fails is started again (it lists its target afresh).
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

/// How long after a lane dropped events its target is listed again (the lanes start empty).
const RELIST_DELAY: Duration = Duration::from_secs(1);

/// Evaluates every event of the target's streams, and tracks whether each stream is current.
/// When an evaluation lane drops events, it starts over with fresh lists (and fresh lanes), so
/// that what those events said is not lost.
async fn follow_events(
    ctx: &Context,
    progress: &mut Progress,
    target: &Target,
    ar: &ApiResource,
    apis: &[(Stream, Api<Object>)],
) {
    loop {
        let relist = Arc::new(Notify::new());
        follow_until_relist(ctx, progress, target, ar, apis, &relist).await;
        tracing::warn!(target = %target, "evaluation dropped events: listing the target again");
        tokio::time::sleep(RELIST_DELAY).await;
    }
}

/// [`follow_events`] until `relist` is notified (a lane dropped events).
async fn follow_until_relist(
    ctx: &Context,
    progress: &mut Progress,
    target: &Target,
    ar: &ApiResource,
    apis: &[(Stream, Api<Object>)],
    relist: &Arc<Notify>,
) {
    let (detector, rulesets) = (progress.detector.clone(), progress.rulesets.clone());
    let target_name = target.to_string();
    // Evaluation happens in the lanes, off this task: it only reads the stream and routes events.
    let lanes = Lanes::start(&detector, &rulesets, target, relist.clone());
    let streams = apis.iter().map(|(ns, api)| {
        let ns = ns.clone();
        relisting(api.clone(), ctx.crds_changed.clone(), ctx.initial_list)
            .map(move |event| (ns.clone(), event))
            .boxed()
    });
    let mut events = futures::stream::select_all(streams);
    // Subjects seen so far by the list each namespace stream is running.
    let mut listing: HashMap<Stream, HashSet<String>> = HashMap::new();
    // Lists received whose evaluation the lanes have not finished: each stream's, with the
    // stream's generation then. Events go on being routed meanwhile.
    let mut evaluating = futures::stream::FuturesUnordered::new();
    // Each stream's lists and failures so far: a list whose stream listed again or failed
    // before its evaluation finished no longer makes the stream current.
    let mut generation: HashMap<Stream, u64> = HashMap::new();
    // Streams whose latest list completed and whose watch has not failed since.
    let mut current: HashSet<Stream> = HashSet::new();
    let streams_total = apis.len();
    let skip = Skipper {
        ctx,
        rulesets: &rulesets,
        target,
    };
    loop {
        let (ns, event) = tokio::select! {
            next = events.next() => match next {
                Some(next) => next,
                None => return,
            },
            Some((ns, at, listed)) = evaluating.next() => {
                if generation.get(&ns) == Some(&listed) {
                    ctx.health.listed(target, &ns, at);
                    current.insert(ns.clone());
                    if current.len() == streams_total {
                        if !lanes.dropped() {
                            // Listed since events were last dropped: nothing is missing now.
                            ctx.health.relisted(target);
                        }
                        progress.set_state(WatchState::Active);
                        tracing::info!(target = %target_name, namespace = ns.as_deref(), "watch active");
                    }
                }
                continue;
            }
            () = relist.notified() => {
                lanes.stop_for_relist();
                return;
            }
        };
        match event {
            Ok(watcher::Event::Init) => {
                *generation.entry(ns.clone()).or_default() += 1;
                listing.insert(ns, HashSet::new());
            }
            Ok(watcher::Event::InitApply(obj)) => {
                if let Some(uid) = obj.metadata.uid.clone() {
                    listing.entry(ns).or_default().insert(uid);
                }
                evaluate_listed(&lanes, &skip, ar, &target_name, obj).await;
            }
            Ok(watcher::Event::InitDone) => {
                let at = jiff::Timestamp::now();
                // Each stream's list is the complete picture of its namespace (and only of it):
                // streams fail and relist on their own.
                let present = listing.remove(&ns).unwrap_or_default();
                ctx.health.keep_skipped(target, &ns, &present);
                lanes.resync(ns.clone(), present).await;
                // Current (and no longer holding readiness back) once what the list said is in
                // the index, not when it arrived: until then answers would be partial.
                let evaluated = lanes.evaluated();
                let listed = generation.get(&ns).copied().unwrap_or_default();
                evaluating.push(async move {
                    evaluated.await;
                    (ns, at, listed)
                });
            }
            Ok(watcher::Event::Apply(obj)) => evaluate(&lanes, &skip, ar, &target_name, obj),
            Ok(watcher::Event::Delete(obj)) => {
                if let Some(uid) = obj.metadata.uid.as_deref() {
                    ctx.health.object_gone(target, uid);
                    lanes.delete(uid);
                }
            }
            // The history kube-apiserver keeps moved past us: the watcher lists again. That is
            // routine (e.g. right after a CRD is created), not a failure of the ruleset; but
            // what changed since the watch's last event is unseen until that list is evaluated.
            Err(e) if expired(&e) => {
                tracing::debug!(target = %target_name, namespace = ns.as_deref(), error = %e, "watch expired; listing again");
                ctx.health.failed(
                    target,
                    &ns,
                    "its watch expired (410 Gone): it is being listed again".to_owned(),
                );
                *generation.entry(ns.clone()).or_default() += 1;
                current.remove(&ns);
            }
            Err(e) => {
                let message = watch_error_message(&e);
                tracing::warn!(target = %target_name, namespace = ns.as_deref(), error = %message, "watch failed; listing again after a backoff");
                crate::metrics::target_watch_failure(target);
                ctx.health.failed(target, &ns, message.clone());
                *generation.entry(ns.clone()).or_default() += 1;
                current.remove(&ns);
                progress.set_state(WatchState::Failed(message));
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

/// What kube's watcher yields for one stream.
type Events = BoxStream<'static, Result<watcher::Event<Object>, watcher::Error>>;

/// The longest wait before listing a failed stream again.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A stream that ran this long before failing starts its backoff over.
const BACKOFF_RESET: Duration = Duration::from_secs(60);

/// How a stream gets its initial state (`STREAMING_LISTS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InitialList {
    /// One watch that streams every object, then a bookmark (`sendInitialEvents`; kube-apiserver's
    /// WatchList, on by default since v1.34): kube-apiserver sends the objects while the server
    /// decodes and evaluates the ones before, where pages wait on each other, so a cold start
    /// takes about as long as the slower of the two instead of both added up.
    Streaming,
    /// Pages of [`PAGE_SIZE`], then a watch: for an API server that refuses streaming, or whose
    /// streaming list went [`STREAMING_SILENCE`] without sending anything.
    Paged,
}

/// Objects a page of a [`InitialList::Paged`] list holds (kube's default).
const PAGE_SIZE: u32 = 500;

/// How long a streaming list may send nothing before the stream lists in pages instead: an API
/// server that ignores `sendInitialEvents` (an aggregated one may) sends what it has, if
/// anything, and never the bookmark that ends the list, so the target would never be current.
/// kube-apiserver sends without pause until that bookmark (100,000 objects in a few seconds).
/// Only the wait for the API server counts: however long the lanes take to evaluate what it sent
/// (the list waits for them) does not.
const STREAMING_SILENCE: Duration = Duration::from_secs(60);

impl InitialList {
    fn config(self) -> watcher::Config {
        match self {
            InitialList::Streaming => watcher::Config::default().streaming_lists(),
            InitialList::Paged => watcher::Config::default().page_size(PAGE_SIZE),
        }
    }
}

/// Whether `e` is an API server refusing a streaming list: `sendInitialEvents` is validated
/// (422) or not understood (400) where the WatchList feature is off.
fn streaming_refused(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::WatchStartFailed(kube::Error::Api(s)) => s.code == 422 || s.code == 400,
        watcher::Error::WatchError(s) => s.code == 422 || s.code == 400,
        _ => false,
    }
}

/// kube's watcher, started afresh (with a list) after any failure instead of resuming from the
/// last resourceVersion: a failed stream is current again only once a list completes, and a
/// relist also finds what changed while it was failing. Retries back off (1 s doubling to 30 s),
/// and a CRD change retries at once (the target may just have come back). The list is streamed
/// where the API server can ([`InitialList`]).
fn relisting(api: Api<Object>, crds_changed: Arc<Notify>, initial: InitialList) -> Events {
    struct State {
        api: Api<Object>,
        crds_changed: Arc<Notify>,
        /// The running watcher, and when it started.
        current: Option<(Events, Instant)>,
        backoff: Option<Duration>,
        initial: InitialList,
        /// Whether the running watcher's list is under way (kube's watcher lists again by
        /// itself after a 410).
        listing: bool,
    }
    let state = State {
        api,
        crds_changed,
        current: None,
        backoff: None,
        initial,
        listing: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        loop {
            if s.current.is_none() {
                if let Some(delay) = s.backoff {
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = s.crds_changed.notified() => {}
                    }
                }
                let stream = watcher::watcher(s.api.clone(), s.initial.config()).boxed();
                s.current = Some((stream, Instant::now()));
            }
            let (stream, started) = s.current.as_mut().expect("just started");
            let next = if s.listing && s.initial == InitialList::Streaming {
                match tokio::time::timeout(STREAMING_SILENCE, stream.next()).await {
                    Ok(next) => next,
                    Err(_) => {
                        tracing::warn!(url = %s.api.resource_url(), "a streaming list sent nothing for {}s and did not end: listing in pages", STREAMING_SILENCE.as_secs());
                        s.initial = InitialList::Paged;
                        s.current = None;
                        s.listing = false;
                        continue;
                    }
                }
            } else {
                stream.next().await
            };
            match next {
                Some(Err(e)) if s.initial == InitialList::Streaming && streaming_refused(&e) => {
                    tracing::info!(url = %s.api.resource_url(), error = %e, "the API server does not stream lists: listing in pages");
                    s.initial = InitialList::Paged;
                    s.current = None;
                    s.listing = false;
                }
                Some(Ok(event @ (watcher::Event::Init | watcher::Event::InitDone))) => {
                    s.listing = matches!(event, watcher::Event::Init);
                    return Some((Ok(event), s));
                }
                Some(Err(e)) if !expired(&e) => {
                    s.backoff = Some(match s.backoff {
                        Some(d) if started.elapsed() < BACKOFF_RESET => (d * 2).min(MAX_BACKOFF),
                        _ => Duration::from_secs(1),
                    });
                    s.current = None;
                    return Some((Err(e), s));
                }
                Some(item) => return Some((item, s)),
                // kube's watcher never ends; if it did, start over.
                None => s.current = None,
            }
        }
    })
    .boxed()
}

/// A watch whose resourceVersion is too old: kube's watcher lists again by itself.
fn expired(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchError(s) if s.code == 410)
}

fn kube_error_message(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// What a failed list or watch says, for a ruleset's status, a target's warning or the
/// inventory's log.
pub(crate) fn watch_error_message(e: &watcher::Error) -> String {
    match e {
        watcher::Error::InitialListFailed(k) => format!("list failed: {}", kube_error_message(k)),
        watcher::Error::WatchStartFailed(k) | watcher::Error::WatchFailed(k) => {
            format!("watch failed: {}", kube_error_message(k))
        }
        watcher::Error::WatchError(s) => format!("watch failed: {}", s.message),
        other => other.to_string(),
    }
}

/// Where an object that cannot be decoded is reported.
struct Skipper<'a> {
    ctx: &'a Context,
    rulesets: &'a [Arc<CompiledRuleSet>],
    target: &'a Target,
}

impl Skipper<'_> {
    /// `object` cannot be decoded (`why`): it is skipped, and named in the `Warning` of its
    /// namespace's answers and on the status of the rulesets that would evaluate it. The rest
    /// of the list and the watch go on.
    fn skip(&self, object: &Object, why: &str) {
        let reference = object.reference();
        let uid = object.metadata.uid.as_deref().unwrap_or(&reference);
        let namespace = object.metadata.namespace.as_deref();
        tracing::warn!(
            target = %self.target,
            object = %reference,
            error = %why,
            "object cannot be decoded: skipped (its operations are unknown until it can be)"
        );
        self.ctx.health.undecodable(
            self.target,
            self.rulesets,
            (uid, namespace),
            reference.clone(),
            why,
        );
    }
}

/// The object of a watch event, to the lanes of the rulesets it concerns (dropped where a lane
/// is full, see [`Lanes::apply`]), or skipped if it could not be decoded.
fn evaluate(lanes: &Lanes, skip: &Skipper<'_>, ar: &ApiResource, target: &str, obj: Object) {
    if let Some(value) = decoded(skip, ar, target, obj) {
        lanes.apply(value);
    }
}

/// The object of a list, to the lanes of the rulesets it concerns, waiting for room where one
/// is full ([`Lanes::apply_listed`]), or skipped if it could not be decoded.
async fn evaluate_listed(
    lanes: &Lanes,
    skip: &Skipper<'_>,
    ar: &ApiResource,
    target: &str,
    obj: Object,
) {
    if let Some(value) = decoded(skip, ar, target, obj) {
        lanes.apply_listed(value).await;
    }
}

/// The object as the rules see it, or `None` when it could not be decoded (it is skipped and
/// reported). `ar`: the target's resource. Items of a list of a built-in kind come without
/// `apiVersion` and `kind` (only watch events carry them): they are filled in, so that an
/// operation's subject says what it is whether its object was listed or watched.
fn decoded(
    skip: &Skipper<'_>,
    ar: &ApiResource,
    target: &str,
    obj: Object,
) -> Option<serde_json::Value> {
    crate::metrics::object_event(target);
    match obj.content {
        Ok(mut value) => {
            if let Some(fields) = value.as_object_mut() {
                for (key, known) in [("apiVersion", &ar.api_version), ("kind", &ar.kind)] {
                    if fields
                        .get(key)
                        .and_then(|v| v.as_str())
                        .is_none_or(str::is_empty)
                    {
                        fields.insert(key.to_owned(), known.as_str().into());
                    }
                }
            }
            if let Some(uid) = obj.metadata.uid.as_deref() {
                skip.ctx.health.decoded(skip.target, uid);
            }
            Some(value)
        }
        Err(ref why) => {
            skip.skip(&obj, why);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    /// A watcher task that panics leaves its streams failed, not current, for the time its
    /// restart takes; one that ends otherwise (stopped) leaves them as they were.
    #[test]
    fn a_panicking_watcher_marks_its_streams_failed() {
        let health = Arc::new(Health::default());
        let target = Target {
            group: "example.com".into(),
            version: "v1".into(),
            resource: "things".into(),
        };
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

    fn status(code: u16) -> Box<Status> {
        Status::failure("sendInitialEvents is forbidden", "Invalid")
            .with_code(code)
            .boxed()
    }

    /// An API server without WatchList refuses the streaming watch as it starts (422, or 400
    /// where the parameter is not understood): that turns the stream to pages. Other failures
    /// (forbidden, gone, unavailable) are what any list would meet, and keep streaming.
    #[test]
    fn only_a_refused_streaming_watch_turns_to_pages() {
        for code in [422, 400] {
            assert!(streaming_refused(&watcher::Error::WatchStartFailed(
                kube::Error::Api(status(code))
            )));
            assert!(streaming_refused(&watcher::Error::WatchError(status(code))));
        }
        for code in [403, 404, 410, 429, 500, 503] {
            assert!(!streaming_refused(&watcher::Error::WatchStartFailed(
                kube::Error::Api(status(code))
            )));
            assert!(!streaming_refused(&watcher::Error::WatchError(status(
                code
            ))));
        }
        assert!(!streaming_refused(&watcher::Error::NoResourceVersion));
    }
}
