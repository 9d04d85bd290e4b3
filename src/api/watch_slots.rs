//! Bounds on open watches: in total and per user. A watch holds a [`WatchSlot`] for as long as it
//! runs; dropping the slot (however the watch ends: timeout, client gone, panic unwinding, a
//! cut) gives it back and keeps the `ifo_api_open_watches` gauge right.

use super::status::ApiError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The limits and what is in use.
pub struct WatchSlots {
    max_total: usize,
    max_per_user: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    total: usize,
    /// Users with at least one open watch (entries are removed at zero, so this stays bounded
    /// by the open watches).
    per_user: HashMap<String, usize>,
}

/// One open watch's share of the limits; released on drop.
pub struct WatchSlot {
    slots: Arc<WatchSlots>,
    user: String,
}

impl WatchSlots {
    pub fn new(max_total: usize, max_per_user: usize) -> Arc<WatchSlots> {
        Arc::new(WatchSlots {
            max_total,
            max_per_user,
            open: Mutex::new(Open::default()),
        })
    }

    /// A slot for a new watch of `user`, or 429 when either limit is reached.
    pub fn acquire(self: &Arc<Self>, user: &str) -> Result<WatchSlot, ApiError> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.total >= self.max_total {
            crate::metrics::watch_refused("total");
            return Err(ApiError::TooManyRequests(format!(
                "Too many requests, please try again later: the server has {} watches open, its limit",
                self.max_total
            )));
        }
        let mine = open.per_user.get(user).copied().unwrap_or(0);
        if mine >= self.max_per_user {
            crate::metrics::watch_refused("user");
            return Err(ApiError::TooManyRequests(format!(
                "Too many requests, please try again later: user {user:?} has {mine} watches open, the limit per user"
            )));
        }
        open.total += 1;
        *open.per_user.entry(user.to_string()).or_default() += 1;
        crate::metrics::open_watches(1);
        Ok(WatchSlot {
            slots: self.clone(),
            user: user.to_string(),
        })
    }

    /// Watches open now, in total.
    #[cfg(test)]
    fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|p| p.into_inner()).total
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.per_user.get_mut(&self.user) {
            *n -= 1;
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

    #[test]
    fn limits_hold_and_dropped_slots_are_given_back() {
        let slots = WatchSlots::new(3, 2);
        let a1 = slots.acquire("alice").unwrap();
        let _a2 = slots.acquire("alice").unwrap();
        let e = slots.acquire("alice").err().unwrap();
        assert_eq!(e.code(), 429);
        assert!(e.message().contains("alice"), "{}", e.message());
        let _b1 = slots.acquire("bob").unwrap();
        assert_eq!(slots.acquire("carol").err().unwrap().code(), 429);
        assert_eq!(slots.open(), 3);
        drop(a1);
        assert_eq!(slots.open(), 2);
        let _c1 = slots.acquire("carol").unwrap();
        assert_eq!(slots.acquire("alice").err().unwrap().code(), 429);
    }

    #[test]
    fn users_without_watches_are_forgotten() {
        let slots = WatchSlots::new(10, 10);
        for i in 0..100 {
            drop(slots.acquire(&format!("user-{i}")).unwrap());
        }
        assert!(slots.open.lock().unwrap().per_user.is_empty());
    }
}
