//! Who may hold a connection, and for how long. Until a connection has proven who it is (a client
//! certificate verified in its TLS handshake: the aggregator's front proxy, a cluster user, or
//! kube-apiserver calling the admission doors where it is configured to; or a request on it
//! authenticated, e.g. by a bearer token), it is *anonymous* and costs a small fixed budget: a
//! place in the anonymous pool ([`Limits::anonymous`]). When that pool is full, a newcomer
//! displaces a connection of the address that holds the most (so one address, or a few, pay for
//! their own excess, never kube-apiserver's webhook calls from its own address, the probes or a
//! user), one with no request in flight: those that never sent a request first, then the one
//! idle longest. So silent connections, however many, cost a file descriptor and a handshake's
//! state until they are displaced; a connection with a request in flight is never displaced, and
//! a newcomer is refused only when every anonymous connection has one.
//!
//! Proven connections have a pool of their own ([`Limits::proven`], `MAX_CONNECTIONS`) that
//! anonymous ones never take from, and are never displaced.

use super::connection::Activity;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many connections of each kind may be open at once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Connections whose client certificate was verified.
    pub proven: usize,
    /// Connections that have not proven who they are, from all peers.
    pub anonymous: usize,
}

/// Why a connection was closed at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub(crate) enum Refused {
    /// Every anonymous connection has a request in flight.
    Anonymous,
    /// [`Limits::proven`] proven connections are open.
    Proven,
}

impl Refused {
    /// The metric's label value.
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The connections open, by kind (see the [module](self)).
pub(crate) struct Budget {
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
pub(crate) struct Seat {
    budget: Arc<Budget>,
    id: u64,
    proven: AtomicBool,
}

/// A connection's seat, held by its service (given back when the connection ends) and handed to
/// each of its requests, so that a request that authenticates proves its connection.
#[derive(Clone)]
pub(crate) struct ConnectionSeat(pub Arc<Seat>);

impl Budget {
    pub(crate) fn new(limits: Limits) -> Arc<Budget> {
        Arc::new(Budget {
            limits: Limits {
                proven: limits.proven.max(1),
                anonymous: limits.anonymous.max(1),
            },
            open: Mutex::default(),
        })
    }

    /// A seat for a new connection from `peer`, anonymous until [`Seat::prove`]: when the pool
    /// is full, displaces a connection of the address that holds the most (see the
    /// [module](self)), or is refused when no anonymous connection can be.
    pub(crate) fn admit(
        self: &Arc<Self>,
        peer: IpAddr,
        activity: Arc<Activity>,
    ) -> Result<Seat, Refused> {
        let mut open = self.open.lock();
        if open.anonymous.len() >= self.limits.anonymous && !open.displace_from_heaviest() {
            return Err(Refused::Anonymous);
        }
        let id = open.next;
        open.next += 1;
        open.anonymous.insert(id, Entry { peer, activity });
        *open.per_peer.entry(peer).or_default() += 1;
        Ok(Seat {
            budget: self.clone(),
            id,
            proven: AtomicBool::new(false),
        })
    }

    /// Connections open now: (anonymous, proven).
    #[cfg(test)]
    pub(crate) fn open(&self) -> (usize, usize) {
        let open = self.open.lock();
        (open.anonymous.len(), open.proven)
    }
}

impl Open {
    /// Displaces a connection of the address with the most that has one to displace.
    fn displace_from_heaviest(&mut self) -> bool {
        let mut peers: Vec<(usize, IpAddr)> =
            self.per_peer.iter().map(|(peer, n)| (*n, *peer)).collect();
        peers.sort_unstable_by(|a, b| b.cmp(a));
        peers
            .into_iter()
            .any(|(_, peer)| self.displace(|e| e.peer == peer))
    }

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
    /// The connection proved who it is (its certificate was verified, or a request on it was
    /// authenticated): it moves to the proven pool, or stays where it is when that is full.
    pub(crate) fn prove(&self) -> Result<(), Refused> {
        let mut open = self.budget.open.lock();
        if self.proven.load(Ordering::Relaxed) {
            return Ok(());
        }
        if open.proven >= self.budget.limits.proven {
            return Err(Refused::Proven);
        }
        // Displaced meanwhile (during its handshake): it is closing anyway.
        open.remove(self.id);
        open.proven += 1;
        self.proven.store(true, Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut open = self.budget.open.lock();
        if *self.proven.get_mut() {
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

    /// A connection from `from` that served a request, idle for `idle_secs` since.
    async fn served_then_idle(
        budget: &Arc<Budget>,
        from: u8,
        idle_secs: u64,
    ) -> (Seat, Arc<Activity>) {
        let (seat, activity) = connect(budget, from).unwrap();
        drop(activity.begin());
        tokio::time::advance(std::time::Duration::from_secs(idle_secs)).await;
        (seat, activity)
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_pool_takes_from_the_address_that_holds_most() {
        let budget = Budget::new(LIMITS);
        // kube-apiserver's connection, idle (it served a review), older than any other.
        let (_k, kube_apiserver) = served_then_idle(&budget, 1, 1).await;
        let mut attacker = Vec::new();
        for _ in 0..3 {
            attacker.push(connect(&budget, 2).unwrap());
            tokio::time::advance(std::time::Duration::from_secs(1)).await;
        }
        // The pool is full: each newcomer of the attacker displaces the attacker's oldest.
        for _ in 0..10 {
            attacker.push(connect(&budget, 2).unwrap());
        }
        assert!(!kube_apiserver.is_displaced());
        assert_eq!(
            attacker.iter().filter(|(_, a)| !a.is_displaced()).count(),
            3
        );
        // A newcomer of another address too takes from the attacker.
        let (_p, probe) = connect(&budget, 3).unwrap();
        assert!(!kube_apiserver.is_displaced() && !probe.is_displaced());
        assert_eq!(budget.open(), (4, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn connections_with_a_request_in_flight_are_never_displaced() {
        let budget = Budget::new(LIMITS);
        let mut busy = Vec::new();
        for from in [2, 2, 2, 3] {
            let (seat, activity) = connect(&budget, from).unwrap();
            busy.push((seat, activity.begin(), activity));
        }
        assert!(matches!(connect(&budget, 1), Err(Refused::Anonymous)));
        assert!(busy.iter().all(|(_, _, a)| !a.is_displaced()));
        // One ends its request: now idle, it makes room.
        let (_seat, request, idle) = busy.remove(3);
        drop(request);
        assert!(connect(&budget, 1).is_ok());
        assert!(idle.is_displaced());
    }

    #[tokio::test(start_paused = true)]
    async fn the_silent_go_before_the_idle() {
        let budget = Budget::new(LIMITS);
        let (_s1, served) = served_then_idle(&budget, 2, 5).await;
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
            let (seat, _) = connect(&budget, 1).unwrap();
            seat.prove().unwrap();
            // Proving again (a second request authenticated) changes nothing.
            seat.prove().unwrap();
            proven.push(seat);
        }
        assert_eq!(budget.open(), (0, 2));
        let (third, _) = connect(&budget, 1).unwrap();
        assert_eq!(third.prove(), Err(Refused::Proven));
        // Anonymous newcomers never displace proven connections.
        for from in 2..12 {
            let _ = connect(&budget, from);
        }
        assert_eq!(budget.open().1, 2);
        drop(proven);
        drop(third);
        assert_eq!(budget.open(), (0, 0));
    }
}
