//! Who may hold a connection, and for how long. Until a connection has proven who it is (a client
//! certificate verified in its TLS handshake: the aggregator's front proxy, a cluster user, or
//! kube-apiserver calling the admission doors where it is configured to), it is *anonymous*
//! and costs a small fixed budget: it counts against its peer address's share
//! ([`Limits::per_peer`]) and the anonymous pool ([`Limits::anonymous`]), and, whenever it has
//! no request in flight, it can be displaced by a newcomer when its share or the pool is full
//! (those that never sent a request first, then the longest idle). So silent connections,
//! however many and from however many addresses, cost a file descriptor and a handshake's
//! state until they are displaced; they never lock out kube-apiserver's webhook calls (anonymous
//! by default, from kube-apiserver's own address), the probes or a proven client.
//!
//! Proven connections have a pool of their own ([`Limits::proven`], `MAX_CONNECTIONS`) that
//! anonymous ones never take from, and are never displaced.

use super::connection::Activity;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// How many connections of each kind may be open at once.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Connections whose client certificate was verified.
    pub proven: usize,
    /// Connections that have not proven who they are, from all peers.
    pub anonymous: usize,
    /// Anonymous connections from one peer address.
    pub per_peer: usize,
}

/// Why a connection was closed at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    /// Every anonymous connection (of its peer, or of all) has a request in flight.
    Anonymous,
    /// [`Limits::proven`] proven connections are open.
    Proven,
}

impl Refused {
    /// The metric's label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Anonymous => "anonymous",
            Refused::Proven => "proven",
        }
    }
}

/// The connections open, by kind (see the [module](self)).
pub struct Budget {
    limits: Limits,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next: u64,
    /// Anonymous connections, by id (ids grow: the smallest is the oldest).
    anonymous: HashMap<u64, Entry>,
    /// Anonymous connections by peer.
    per_peer: HashMap<IpAddr, usize>,
    proven: usize,
}

struct Entry {
    peer: IpAddr,
    activity: Arc<Activity>,
}

/// A connection's place in the [`Budget`], given back when it is dropped (with the socket).
pub struct Seat {
    budget: Arc<Budget>,
    id: u64,
    proven: bool,
}

impl Budget {
    pub fn new(limits: Limits) -> Arc<Budget> {
        Arc::new(Budget {
            limits: Limits {
                proven: limits.proven.max(1),
                anonymous: limits.anonymous.max(1),
                per_peer: limits.per_peer.max(1),
            },
            open: Mutex::default(),
        })
    }

    /// A seat for a new connection from `peer`, anonymous until [`Seat::prove`]: displaces an
    /// idle anonymous connection when the peer's share or the pool is full, or is refused when
    /// none is idle.
    pub fn admit(self: &Arc<Self>, peer: IpAddr, activity: Arc<Activity>) -> Result<Seat, Refused> {
        let mut open = self.open.lock();
        if open.per_peer.get(&peer).copied().unwrap_or(0) >= self.limits.per_peer
            && !open.displace(|e| e.peer == peer)
        {
            return Err(Refused::Anonymous);
        }
        if open.anonymous.len() >= self.limits.anonymous && !open.displace(|_| true) {
            return Err(Refused::Anonymous);
        }
        let id = open.next;
        open.next += 1;
        open.anonymous.insert(id, Entry { peer, activity });
        *open.per_peer.entry(peer).or_default() += 1;
        Ok(Seat {
            budget: self.clone(),
            id,
            proven: false,
        })
    }

    /// Connections open now: (anonymous, proven).
    #[cfg(test)]
    pub fn open(&self) -> (usize, usize) {
        let open = self.open.lock();
        (open.anonymous.len(), open.proven)
    }
}

impl Open {
    /// Closes the anonymous connection among those `eligible` that has no request in flight
    /// and has been idle longest, preferring those that never sent a request. Returns whether
    /// one was.
    fn displace(&mut self, eligible: impl Fn(&Entry) -> bool) -> bool {
        let victim = self
            .anonymous
            .iter()
            .filter(|(_, e)| eligible(e))
            .filter_map(|(id, e)| e.activity.idle_since().map(|idle| (idle, *id)))
            .min()
            .map(|(_, id)| id);
        let Some(id) = victim else {
            return false;
        };
        if let Some(entry) = self.remove(id) {
            entry.activity.displace();
            crate::metrics::connection_displaced();
        }
        true
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.anonymous.remove(&id)?;
        if let Some(count) = self.per_peer.get_mut(&entry.peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&entry.peer);
            }
        }
        Some(entry)
    }
}

impl Seat {
    /// The connection proved who it is (its certificate was verified): it moves to the proven
    /// pool, or is refused when that is full.
    pub fn prove(&mut self) -> Result<(), Refused> {
        let mut open = self.budget.open.lock();
        if open.proven >= self.budget.limits.proven {
            return Err(Refused::Proven);
        }
        // Displaced meanwhile (during its handshake): it is closing anyway.
        open.remove(self.id);
        open.proven += 1;
        self.proven = true;
        Ok(())
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut open = self.budget.open.lock();
        if self.proven {
            open.proven -= 1;
        } else {
            open.remove(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const LIMITS: Limits = Limits {
        proven: 2,
        anonymous: 4,
        per_peer: 2,
    };

    fn peer(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    fn connect(budget: &Arc<Budget>, from: u8) -> Result<(Seat, Arc<Activity>), Refused> {
        let activity = Arc::new(Activity::default());
        budget
            .admit(peer(from), activity.clone())
            .map(|seat| (seat, activity))
    }

    #[tokio::test(start_paused = true)]
    async fn a_peer_over_its_share_displaces_its_own_idle_connections_first() {
        let budget = Budget::new(LIMITS);
        let (_a1, first) = connect(&budget, 2).unwrap();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let (_a2, second) = connect(&budget, 2).unwrap();
        let (_k, kube_apiserver) = connect(&budget, 1).unwrap();
        // The third from 127.0.0.2 displaces its oldest, not 127.0.0.1's.
        let (_a3, _) = connect(&budget, 2).unwrap();
        assert!(first.is_displaced());
        assert!(!second.is_displaced() && !kube_apiserver.is_displaced());
        assert_eq!(budget.open(), (3, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn connections_with_a_request_in_flight_are_never_displaced() {
        let budget = Budget::new(LIMITS);
        let (_s1, busy1) = connect(&budget, 2).unwrap();
        let (_s2, busy2) = connect(&budget, 2).unwrap();
        let _r1 = busy1.begin();
        let _r2 = busy2.begin();
        assert!(matches!(connect(&budget, 2), Err(Refused::Anonymous)));
        // Another peer still gets in.
        assert!(connect(&budget, 1).is_ok());
        assert!(!busy1.is_displaced() && !busy2.is_displaced());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_pool_displaces_the_silent_before_the_idle() {
        let budget = Budget::new(LIMITS);
        let (_s1, served) = connect(&budget, 1).unwrap();
        drop(served.begin());
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        let (_s2, silent) = connect(&budget, 2).unwrap();
        let (_s3, _) = connect(&budget, 3).unwrap();
        let (_s4, _) = connect(&budget, 4).unwrap();
        let (_s5, _) = connect(&budget, 5).unwrap();
        assert!(silent.is_displaced(), "the silent one goes first");
        assert!(!served.is_displaced());
        assert_eq!(budget.open(), (4, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn proven_connections_have_their_own_pool() {
        let budget = Budget::new(LIMITS);
        let mut proven: Vec<Seat> = Vec::new();
        for _ in 0..2 {
            let (mut seat, _) = connect(&budget, 1).unwrap();
            seat.prove().unwrap();
            proven.push(seat);
        }
        assert_eq!(budget.open(), (0, 2));
        let (mut third, _) = connect(&budget, 1).unwrap();
        assert_eq!(third.prove(), Err(Refused::Proven));
        // Anonymous newcomers never displace proven connections.
        for from in 2..8 {
            let _ = connect(&budget, from);
        }
        assert_eq!(budget.open().1, 2);
        drop(proven);
        drop(third);
        assert_eq!(budget.open(), (0, 0));
    }
}
