//! Following one target's streams: each event routed to the evaluation lanes of the rulesets it
//! concerns (or skipped when it cannot be decoded), each stream current once its list is
//! evaluated, and the whole started over with fresh lanes when a lane drops events.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::Api;
use kube::core::ApiResource;
use kube::runtime::watcher;
use tokio::sync::Notify;

use super::relist::{expired, relisting, watch_error_message};
use super::{Context, Progress};
use crate::detect::{Lanes, Stream, WatchState};
use crate::ruleset::{CompiledRuleSet, Target};
use crate::watch::object::Object;

/// How long after a lane dropped events its target is listed again (the lanes start empty).
const RELIST_DELAY: Duration = Duration::from_secs(1);

/// Evaluates every event of the target's streams, and tracks whether each stream is current.
/// When an evaluation lane drops events, it starts over with fresh lists (and fresh lanes), so
/// that what those events said is not lost.
pub(super) async fn follow_events(
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
                    lanes.delete(uid, obj.metadata.namespace.as_deref());
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
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests;
