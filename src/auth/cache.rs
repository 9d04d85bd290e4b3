//! The cache of TokenReview and SubjectAccessReview answers: answers live for a TTL, concurrent
//! lookups of one key share one review (a burst of identical watches makes one request), errors
//! are never cached, and the whole cache is bounded by an estimate of its bytes, so no caller,
//! however many distinct requests it makes, can pin more memory than the budget.
//!
//! Keys are SHA-256 digests of what the answer depends on: 32 bytes whatever the request's size.

use crate::metrics::{CacheLookup, Review};
use kube::api::PostParams;
use kube::{Api, Client};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Creates `review` (a TokenReview or SubjectAccessReview: kube-apiserver answers it and keeps
/// nothing), counting a failure as a review of `kind` that got no answer.
pub(super) async fn ask<K>(client: Client, review: &K, kind: Review) -> Result<K, kube::Error>
where
    K: kube::Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug,
{
    let answer = Api::all(client)
        .create(&PostParams::default(), review)
        .await;
    if answer.is_err() {
        crate::metrics::review(kind, None);
    }
    answer
}

/// A review's cache key: the digest of everything the answer depends on.
pub(super) type ReviewKey = [u8; 32];

/// The digest of `parts`, each length-prefixed so that no two different lists share a digest.
pub(super) fn review_key<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> ReviewKey {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

/// What an entry costs beside its value: the key, moka's bookkeeping.
const ENTRY_OVERHEAD: u32 = 128;

pub(super) struct ReviewCache<V: Clone + Send + Sync + 'static> {
    cache: moka::future::Cache<ReviewKey, V>,
    /// Which review's lookups `ifo_auth_cache_lookups_total` counts.
    review: Review,
}

impl<V: Clone + Send + Sync + 'static> ReviewCache<V> {
    /// A cache whose entries live `ttl`, bounded to about `max_bytes`, each entry weighed as
    /// `weigh(value)` bytes plus its bookkeeping.
    pub(super) fn new(
        review: Review,
        ttl: Duration,
        max_bytes: u64,
        weigh: fn(&V) -> usize,
    ) -> Self {
        let cache = moka::future::Cache::builder()
            .time_to_live(ttl)
            .max_capacity(max_bytes)
            .weigher(move |_: &ReviewKey, v: &V| {
                u32::try_from(weigh(v))
                    .unwrap_or(u32::MAX)
                    .saturating_add(ENTRY_OVERHEAD)
            })
            .build();
        ReviewCache { cache, review }
    }

    /// The cached answer for `key`, or the one `fetch` gives (shared with concurrent callers).
    /// Errors are not cached. A lookup whose `fetch` ran counts as a miss, any other (cached,
    /// or sharing a review already under way) as a hit.
    pub(super) async fn get_or_fetch<E, Fut>(&self, key: ReviewKey, fetch: Fut) -> Result<V, E>
    where
        E: Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<V, E>>,
    {
        let fetched = AtomicBool::new(false);
        let result = self
            .cache
            .try_get_with(key, async {
                fetched.store(true, Ordering::Relaxed);
                fetch.await
            })
            .await
            .map_err(|e: Arc<E>| (*e).clone());
        let lookup = if fetched.load(Ordering::Relaxed) {
            CacheLookup::Miss
        } else {
            CacheLookup::Hit
        };
        crate::metrics::cache_lookup(self.review, lookup);
        result
    }

    /// Entries held now (after pending maintenance).
    #[cfg(test)]
    async fn len(&self) -> u64 {
        self.cache.run_pending_tasks().await;
        self.cache.entry_count()
    }

    #[cfg(test)]
    async fn weight(&self) -> u64 {
        self.cache.run_pending_tasks().await;
        self.cache.weighted_size()
    }
}

#[cfg(test)]
#[allow(
    clippy::disallowed_methods,
    reason = "a test's tasks end with the test's runtime"
)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn key(s: &str) -> ReviewKey {
        review_key([s.as_bytes()])
    }

    #[tokio::test]
    async fn concurrent_lookups_share_one_fetch_and_errors_are_retried() {
        let cache = Arc::new(ReviewCache::<bool>::new(
            Review::Token,
            Duration::from_secs(10),
            1 << 20,
            |_| 1,
        ));
        let calls = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (cache, calls) = (cache.clone(), calls.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get_or_fetch(key("k"), async move {
                        calls.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        Ok::<_, ()>(true)
                    })
                    .await
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), Ok(true));
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);

        let failed: Result<bool, &str> = cache.get_or_fetch(key("e"), async { Err("boom") }).await;
        assert_eq!(failed, Err("boom"));
        let retried: Result<bool, &str> = cache.get_or_fetch(key("e"), async { Ok(false) }).await;
        assert_eq!(retried, Ok(false));
    }

    #[tokio::test]
    async fn entries_expire() {
        let cache =
            ReviewCache::<u32>::new(Review::Token, Duration::from_millis(50), 1 << 20, |_| 4);
        assert_eq!(
            cache.get_or_fetch(key("1"), async { Ok::<_, ()>(1) }).await,
            Ok(1)
        );
        assert_eq!(
            cache.get_or_fetch(key("1"), async { Ok::<_, ()>(2) }).await,
            Ok(1)
        );
        tokio::time::sleep(Duration::from_millis(80)).await;
        assert_eq!(
            cache.get_or_fetch(key("1"), async { Ok::<_, ()>(3) }).await,
            Ok(3)
        );
    }

    #[tokio::test]
    async fn the_byte_budget_holds_whatever_the_callers_send() {
        let budget = 64 * 1024;
        let cache =
            ReviewCache::<String>::new(Review::Token, Duration::from_secs(60), budget, String::len);
        // Many distinct large requests: each key is a digest, each value weighed.
        for i in 0..2_000 {
            let long = format!("{i}{}", "x".repeat(1_000));
            let _ = cache
                .get_or_fetch(key(&long), async move { Ok::<_, ()>(long) })
                .await;
        }
        assert!(
            cache.weight().await <= budget,
            "{} > {budget}",
            cache.weight().await
        );
        assert!(cache.len().await < 2_000);
    }

    #[test]
    fn keys_tell_lists_apart() {
        assert_ne!(
            review_key([&b"ab"[..], b"c"]),
            review_key([&b"a"[..], b"bc"])
        );
        assert_eq!(
            review_key([&b"ab"[..], b"c"]),
            review_key([&b"ab"[..], b"c"])
        );
    }
}
