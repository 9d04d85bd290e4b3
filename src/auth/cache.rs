//! A small TTL cache for TokenReview and SubjectAccessReview answers. Concurrent lookups of the
//! same key share one request (a burst of identical watches makes one review), and the number of
//! entries is bounded.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

type Slot<V> = Arc<OnceCell<(V, Instant)>>;

pub struct ReviewCache<K, V> {
    slots: Mutex<HashMap<K, Slot<V>>>,
    ttl: Duration,
    capacity: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> ReviewCache<K, V> {
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        ReviewCache {
            slots: Mutex::new(HashMap::new()),
            ttl,
            capacity,
        }
    }

    /// The cached answer for `key`, or the one `fetch` gives (shared with concurrent callers).
    /// Errors are not cached.
    pub async fn get_or_fetch<E, F, Fut>(&self, key: K, fetch: F) -> Result<V, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, E>>,
    {
        let slot = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            let fresh = |s: &Slot<V>| s.get().is_none_or(|(_, at)| at.elapsed() < self.ttl);
            match slots.get(&key) {
                Some(slot) if fresh(slot) => slot.clone(),
                _ => {
                    if slots.len() >= self.capacity {
                        slots.retain(|_, s| s.get().is_some_and(|(_, at)| at.elapsed() < self.ttl));
                        if slots.len() >= self.capacity {
                            slots.clear();
                        }
                    }
                    let slot: Slot<V> = Arc::new(OnceCell::new());
                    slots.insert(key, slot.clone());
                    slot
                }
            }
        };
        let (value, _) = slot
            .get_or_try_init(|| async { fetch().await.map(|v| (v, Instant::now())) })
            .await?;
        Ok(value.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn concurrent_lookups_share_one_fetch_and_errors_are_retried() {
        let cache = Arc::new(ReviewCache::<String, bool>::new(Duration::from_secs(10), 8));
        let calls = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (cache, calls) = (cache.clone(), calls.clone());
            tasks.push(tokio::spawn(async move {
                cache
                    .get_or_fetch("k".to_string(), || async move {
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

        let failed: Result<bool, &str> = cache
            .get_or_fetch("e".into(), || async { Err("boom") })
            .await;
        assert_eq!(failed, Err("boom"));
        let retried: Result<bool, &str> =
            cache.get_or_fetch("e".into(), || async { Ok(false) }).await;
        assert_eq!(retried, Ok(false));
    }

    #[tokio::test]
    async fn entries_expire_and_size_is_bounded() {
        let cache = ReviewCache::<u32, u32>::new(Duration::from_millis(30), 4);
        assert_eq!(
            cache.get_or_fetch(1, || async { Ok::<_, ()>(1) }).await,
            Ok(1)
        );
        assert_eq!(
            cache.get_or_fetch(1, || async { Ok::<_, ()>(2) }).await,
            Ok(1)
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
        assert_eq!(
            cache.get_or_fetch(1, || async { Ok::<_, ()>(3) }).await,
            Ok(3)
        );
        for k in 10..100 {
            let _ = cache
                .get_or_fetch(k, || async move { Ok::<_, ()>(k) })
                .await;
        }
        assert!(cache.slots.lock().unwrap().len() <= 4);
    }
}
