//! Bounds on open watches: how many and how much memory they hold, in total and per user. A
//! watch holds a [`WatchSlot`] for as long as it runs; dropping the slot (however the watch
//! ends: timeout, client gone, panic unwinding, a cut) gives it back and keeps the
//! `ifo_api_open_watches` gauge right.
//!
//! A watch's memory is an estimate made when it opens: [`WATCH_BASE_BYTES`] for its task and
//! buffers, plus what its parsed selectors hold. Counting watches alone would let one user with
//! a thousand watches of big selectors pin hundreds of megabytes.

use crate::api::Limits;
use crate::api::status::ApiError;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// What one watch holds besides its selectors: its task, its channel of encoded events, its
/// place in the index's broadcast and its HTTP/2 stream (measured: 300 watches with one-value
/// selectors over one HTTP/2 connection grew the server by 9.0 MiB, 31 KiB each).
pub(crate) const WATCH_BASE_BYTES: usize = 32 * 1024;

/// The limits and what is in use.
pub(crate) struct WatchSlots {
    limits: Limits,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    bytes: usize,
    /// Users with at least one open watch, with their count and bytes (entries are removed at
    /// zero, so this stays bounded by the open watches).
    per_user: HashMap<String, (usize, usize)>,
}

/// One open watch's share of the limits; released on drop.
pub(crate) struct WatchSlot {
    slots: Arc<WatchSlots>,
    user: String,
    bytes: usize,
}

fn mib(bytes: usize) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
}

impl WatchSlots {
    pub(crate) fn new(limits: Limits) -> Arc<WatchSlots> {
        Arc::new(WatchSlots {
            limits,
            open: Mutex::new(Open::default()),
        })
    }

    /// A slot for a new watch of `user` holding about `bytes`, or 429 when a limit would be
    /// passed.
    pub(crate) fn acquire(
        self: &Arc<Self>,
        user: &str,
        bytes: usize,
    ) -> Result<WatchSlot, ApiError> {
        let limits = self.limits;
        let mut open = self.open.lock();
        if open.total >= limits.max_watches {
            crate::metrics::watch_refused("total");
            return Err(ApiError::TooManyRequests(format!(
                "Too many requests, please try again later: the server has {} watches open, its limit",
                limits.max_watches
            )));
        }
        let (mine, my_bytes) = open.per_user.get(user).copied().unwrap_or((0, 0));
        if mine >= limits.max_watches_per_user {
            crate::metrics::watch_refused("user");
            return Err(ApiError::TooManyRequests(format!(
                "Too many requests, please try again later: user {user:?} has {mine} watches open, the limit per user"
            )));
        }
        if open.bytes + bytes > limits.max_watch_bytes {
            crate::metrics::watch_refused("memory");
            return Err(ApiError::TooManyRequests(format!(
                "Too many requests, please try again later: the open watches hold {} and this one would add {}, past the server's limit of {} (MAX_WATCH_MEMORY)",
                mib(open.bytes),
                mib(bytes),
                mib(limits.max_watch_bytes)
            )));
        }
        if my_bytes + bytes > limits.max_watch_bytes_per_user {
            crate::metrics::watch_refused("user_memory");
            return Err(ApiError::TooManyRequests(format!(
                "Too many requests, please try again later: the {mine} watches of user {user:?} hold {} and this one would add {}, past the limit per user of {} (MAX_WATCH_MEMORY_PER_USER); smaller selectors take less",
                mib(my_bytes),
                mib(bytes),
                mib(limits.max_watch_bytes_per_user)
            )));
        }
        open.total += 1;
        open.bytes += bytes;
        let entry = open.per_user.entry(user.to_string()).or_default();
        entry.0 += 1;
        entry.1 += bytes;
        crate::metrics::open_watches(1);
        Ok(WatchSlot {
            slots: self.clone(),
            user: user.to_string(),
            bytes,
        })
    }

    /// Watches open now, in total.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.open.lock().total
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock();
        open.total = open.total.saturating_sub(1);
        open.bytes = open.bytes.saturating_sub(self.bytes);
        if let Some((n, bytes)) = open.per_user.get_mut(&self.user) {
            *n -= 1;
            *bytes = bytes.saturating_sub(self.bytes);
            if *n == 0 {
                open.per_user.remove(&self.user);
            }
        }
        crate::metrics::open_watches(-1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(max_total: usize, max_per_user: usize) -> Limits {
        Limits {
            max_watches: max_total,
            max_watches_per_user: max_per_user,
            max_watch_bytes: usize::MAX / 2,
            max_watch_bytes_per_user: usize::MAX / 2,
        }
    }

    #[test]
    fn limits_hold_and_dropped_slots_are_given_back() {
        let slots = WatchSlots::new(counts(3, 2));
        let a1 = slots.acquire("alice", 1).unwrap();
        let _a2 = slots.acquire("alice", 1).unwrap();
        let e = slots.acquire("alice", 1).err().unwrap();
        assert_eq!(e.code(), 429);
        assert!(e.message().contains("alice"), "{}", e.message());
        let _b1 = slots.acquire("bob", 1).unwrap();
        assert_eq!(slots.acquire("carol", 1).err().unwrap().code(), 429);
        assert_eq!(slots.open(), 3);
        drop(a1);
        assert_eq!(slots.open(), 2);
        let _c1 = slots.acquire("carol", 1).unwrap();
        assert_eq!(slots.acquire("alice", 1).err().unwrap().code(), 429);
    }

    #[test]
    fn memory_is_charged_to_the_user_and_the_server() {
        let slots = WatchSlots::new(Limits {
            max_watches: 100,
            max_watches_per_user: 100,
            max_watch_bytes: 5 << 20,
            max_watch_bytes_per_user: 3 << 20,
        });
        let big = slots.acquire("alice", 2 << 20).unwrap();
        let e = slots.acquire("alice", 2 << 20).err().unwrap();
        assert_eq!(e.code(), 429);
        assert!(
            e.message().contains("limit per user of 3.0 MiB"),
            "{}",
            e.message()
        );
        let _small = slots.acquire("alice", 1 << 20).unwrap();
        let _bob = slots.acquire("bob", 2 << 20).unwrap();
        let e = slots.acquire("carol", 1 << 20).err().unwrap();
        assert!(
            e.message().contains("server's limit of 5.0 MiB"),
            "{}",
            e.message()
        );
        drop(big);
        let _carol = slots.acquire("carol", 1 << 20).unwrap();
        let _alice = slots.acquire("alice", 1 << 20).unwrap();
    }

    #[test]
    fn users_without_watches_are_forgotten() {
        let slots = WatchSlots::new(counts(10, 10));
        for i in 0..100 {
            drop(slots.acquire(&format!("user-{i}"), 1).unwrap());
        }
        assert!(slots.open.lock().per_user.is_empty());
        assert_eq!(slots.open.lock().bytes, 0);
    }
}
