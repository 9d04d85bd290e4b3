//! How one stream of a target is listed and watched: kube's watcher, started afresh with a list
//! after any failure (with a backoff), the list streamed where the API server can and in pages
//! where it cannot; and what a failed list or watch says.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Api;
use kube::runtime::watcher;
use tokio::sync::Notify;

use crate::backoff::Backoff;
use crate::watch::object::Object;

/// What kube's watcher yields for one stream.
pub(super) type Events = BoxStream<'static, Result<watcher::Event<Object>, watcher::Error>>;

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
/// relist also finds what changed while it was failing. Retries back off
/// ([`crate::backoff::RESTART`]: 1 s doubling to 30 s), and a CRD change retries at once (the target may just have come back). The list is streamed
/// where the API server can ([`InitialList`]).
pub(super) fn relisting(
    api: Api<Object>,
    crds_changed: Arc<Notify>,
    initial: InitialList,
) -> Events {
    struct State {
        api: Api<Object>,
        crds_changed: Arc<Notify>,
        /// The running watcher.
        current: Option<Events>,
        backoff: Backoff,
        /// The wait before a watcher starts, once one has failed.
        wait: Option<Duration>,
        initial: InitialList,
        /// Whether the running watcher's list is under way (kube's watcher lists again by
        /// itself after a 410).
        listing: bool,
    }
    let state = State {
        api,
        crds_changed,
        current: None,
        backoff: crate::backoff::RESTART,
        wait: None,
        initial,
        listing: false,
    };
    futures::stream::unfold(state, |mut s| async move {
        loop {
            if s.current.is_none() {
                if let Some(delay) = s.wait {
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = s.crds_changed.notified() => {}
                    }
                }
                let stream = watcher::watcher(s.api.clone(), s.initial.config()).boxed();
                s.current = Some(stream);
                s.backoff.begin();
            }
            let stream = s.current.as_mut().expect("just started");
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
                    s.wait = Some(s.backoff.failed());
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
pub(super) fn expired(e: &watcher::Error) -> bool {
    matches!(e, watcher::Error::WatchError(s) if s.code == 410)
}

pub(super) fn kube_error_message(e: &kube::Error) -> String {
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

#[cfg(test)]
mod tests;
