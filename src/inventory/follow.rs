//! The list-then-watch loop behind every kind the inventory keeps: kube's watcher, its events
//! handed to a [`Keeper`] as entries (only what the keeper keeps of each object), a list
//! completed as one replacement, and a failure as a loss of sync followed by a fresh list after
//! a backoff ([`crate::backoff::RESTART`]: 1 s doubling to 30 s, starting over after a minute
//! of health), as the target watchers do.

use std::collections::HashMap;
use std::fmt::Debug;

use futures::StreamExt;
use kube::Api;
use kube::Resource;
use kube::runtime::watcher;
use serde::de::DeserializeOwned;

/// What a kind's store keeps of its objects, and how it learns of them.
pub(crate) trait Keeper<M>: Sync {
    /// What is kept of one object.
    type Entry: Send;

    /// The resource, for logs and messages (`nodes`).
    fn resource(&self) -> &'static str;

    /// The key and entry of `object`; `None` for an object without a name.
    fn entry(&self, object: &M) -> Option<(Box<str>, Self::Entry)>;

    /// A list completed with these entries: they replace those held, and the store is synced.
    fn listed(&self, entries: HashMap<Box<str>, Self::Entry>);

    /// An object was created or changed.
    fn applied(&self, key: Box<str>, entry: Self::Entry);

    /// An object was deleted.
    fn deleted(&self, key: &str);

    /// The list or watch failed (why): not synced until a list completes again.
    fn failed(&self, why: String);
}

/// Keeps `keeper` up to date with `api` for as long as it runs: lists, then watches, and starts
/// over with a fresh list after a backoff when that fails.
pub(crate) async fn follow<M, K>(keeper: &K, api: Api<M>, config: watcher::Config)
where
    M: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K: Keeper<M>,
{
    let mut backoff = crate::backoff::RESTART;
    loop {
        backoff.begin();
        let why = follow_stream(keeper, api.clone(), config.clone()).await;
        tracing::warn!(
            resource = keeper.resource(),
            error = %why,
            "the watch of the cluster's {} failed; listing them again after a backoff",
            keeper.resource()
        );
        keeper.failed(why);
        tokio::time::sleep(backoff.failed()).await;
    }
}

/// Follows one run of kube's watcher until it fails (a 410 excepted: it lists again by itself);
/// returns why.
async fn follow_stream<M, K>(keeper: &K, api: Api<M>, config: watcher::Config) -> String
where
    M: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K: Keeper<M>,
{
    let stream = watcher::watcher(api, config);
    let mut stream = std::pin::pin!(stream);
    // The entries of the list under way.
    let mut listing: Option<HashMap<Box<str>, K::Entry>> = None;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => listing = Some(HashMap::new()),
            Ok(watcher::Event::InitApply(object)) => {
                if let (Some(entries), Some((key, entry))) =
                    (listing.as_mut(), keeper.entry(&object))
                {
                    entries.insert(key, entry);
                }
            }
            Ok(watcher::Event::InitDone) => {
                let entries = listing.take().unwrap_or_default();
                tracing::info!(
                    resource = keeper.resource(),
                    count = entries.len(),
                    "the cluster's {} are listed",
                    keeper.resource()
                );
                keeper.listed(entries);
            }
            Ok(watcher::Event::Apply(object)) => {
                if let Some((key, entry)) = keeper.entry(&object) {
                    keeper.applied(key, entry);
                }
            }
            Ok(watcher::Event::Delete(object)) => {
                if let Some((key, _)) = keeper.entry(&object) {
                    keeper.deleted(&key);
                }
            }
            Err(watcher::Error::WatchError(status)) if status.code == 410 => {
                tracing::debug!(resource = keeper.resource(), error = %status.message, "the watch expired; listing again");
            }
            Err(e) => return crate::watch::watch_error_message(&e),
        }
    }
    // kube's watcher never ends; if it did, start over.
    "the watch ended".to_owned()
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests;
