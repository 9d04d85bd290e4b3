//! Who may hold a connection, and for how long. A client certificate verified in the TLS
//! handshake proves who a connection is (the aggregator's front proxy, a cluster user, or
//! kube-apiserver calling the admission doors where it is configured to), and so does a review
//! at the doors' key's path (kube-apiserver's, in an install whose server keeps its own
//! certificates: see `certificates::DoorKey`), from that review on: those have a pool of their
//! own ([`Limits::proven`], `MAX_CONNECTIONS`) that no other connection takes from, and are
//! never displaced. A bearer token proves a request, not its connection: tokens are had by every
//! pod, so a connection whose requests carry one stays *anonymous*, as do those of callers that
//! cannot be proven (kube-apiserver's webhook calls in a default install, the probes).
//!
//! Anonymous connections share one pool ([`Limits::anonymous`]) fairly by address, as the
//! scarce thing a caller cannot multiply for free is its address, not its connections or tokens.
//! When the pool is full, a newcomer takes the place of a connection that sent a review the
//! admission doors refused as not kube-apiserver's ([`ConnectionSeat::refuse`]), the oldest of
//! them, whatever it is doing: kube-apiserver's reviews are never refused so (in an install
//! that can tell them apart, one with the doors' key or a webhook client certificate), so such a
//! connection is someone else's, and its busy reviews must not keep a place that kube-apiserver's
//! next connection needs before its first review proves it. Else, of the addresses that hold
//! the most (the next ones when those have none to give), never of one that holds fewer than
//! the newcomer's, whichever of them holds:
//!
//! 1. a connection with no request in flight: those that never sent a request first, the oldest
//!    of them (a connection still in its handshake, kube-apiserver's new one say, is the
//!    youngest, and goes last), then the one idle longest;
//! 2. else, if those addresses hold at least two more than the newcomer's, their oldest,
//!    requests in flight and all: so whatever one address or a few hold open and busy
//!    (never-finished bodies, endless streams), a lighter address — kube-apiserver's, a user's —
//!    gets its place, and shares tend to equal (max-min fairness);
//! 3. else it is refused: every address holds about as many as the newcomer's.
//!
//! So silent connections, however many, cost a file descriptor and a handshake's state until they
//! are displaced, and busy ones their address's share.

use super::connection::Activity;
use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// How many connections of each kind may be open at once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Connections whose client certificate was verified.
    pub proven: usize,
    /// Connections without a verified certificate, from all peers.
    pub anonymous: usize,
}

/// Which of the server's TLS listeners a budget is for: each has its own (the metrics' `port`
/// label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub(crate) enum Port {
    /// The API's (`SECURE_PORT`).
    Api,
    /// The admission doors' (`ADMISSION_PORT`).
    Admission,
}

impl Port {
    /// The metric's label value.
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Why a connection was closed at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub(crate) enum Refused {
    /// The anonymous pool is full, and no address holds more than the newcomer's (see the
    /// [module](self)).
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
    port: Port,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next: u64,
    /// Anonymous connections, by id (ids grow: the smallest is the oldest).
    anonymous: HashMap<u64, Entry>,
    /// Anonymous connections by peer: their ids, the oldest first.
    per_peer: HashMap<IpAddr, BTreeSet<u64>>,
    /// Anonymous connections that sent a review the doors refused, the oldest first.
    refused: BTreeSet<u64>,
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

/// A connection's seat, held by its service: given back when the connection ends.
#[derive(Clone)]
pub(crate) struct ConnectionSeat {
    seat: Arc<Seat>,
}

impl ConnectionSeat {
    pub(crate) fn new(seat: Seat) -> ConnectionSeat {
        ConnectionSeat {
            seat: Arc::new(seat),
        }
    }

    /// The connection proved who it is by a request (see [`Seat::prove`]).
    pub(crate) fn prove(&self) -> Result<(), Refused> {
        self.seat.prove()
    }

    /// The connection sent a review the doors refused as not kube-apiserver's: from now on it
    /// gives its place to any newcomer (see the [module](self)).
    pub(crate) fn refuse(&self) {
        self.seat.refuse();
    }
}

impl Budget {
    pub(crate) fn new(limits: Limits, port: Port) -> Arc<Budget> {
        Arc::new(Budget {
            limits: Limits {
                proven: limits.proven.max(1),
                anonymous: limits.anonymous.max(1),
            },
            port,
            open: Mutex::default(),
        })
    }

    /// A seat for a new connection from `peer`, anonymous until [`Seat::prove`]: when the pool
    /// is full, displaces a connection of an address that holds more (see the
    /// [module](self)), or is refused when none does.
    pub(crate) fn admit(
        self: &Arc<Self>,
        peer: IpAddr,
        activity: Arc<Activity>,
    ) -> Result<Seat, Refused> {
        let mut open = self.open.lock();
        if open.anonymous.len() >= self.limits.anonymous {
            if !open.make_room_for(peer) {
                return Err(Refused::Anonymous);
            }
            crate::metrics::connection_displaced(self.port.as_str());
        }
        let id = open.next;
        open.next += 1;
        open.anonymous.insert(id, Entry { peer, activity });
        open.per_peer.entry(peer).or_default().insert(id);
        Ok(Seat {
            budget: self.clone(),
            id,
            proven: AtomicBool::new(false),
        })
    }

    /// The listener this budget is for.
    pub(crate) fn port(&self) -> Port {
        self.port
    }

    /// Connections open now: (anonymous, proven).
    #[cfg(test)]
    pub(crate) fn open(&self) -> (usize, usize) {
        let open = self.open.lock();
        (open.anonymous.len(), open.proven)
    }
}

impl Open {
    /// Displaces a connection to make room for a newcomer from `newcomer` (see the
    /// [module](self)); returns whether one was.
    fn make_room_for(&mut self, newcomer: IpAddr) -> bool {
        if let Some(&refused) = self.refused.first() {
            return self.displace(refused);
        }
        let mine = self.per_peer.get(&newcomer).map_or(0, BTreeSet::len);
        // Addresses by how many they hold; of those that hold as many, whichever holds the
        // connection to take, not the first address in some order: a connection in its
        // handshake (kube-apiserver's new one) is the youngest of the silent, and goes last.
        let mut holding: BTreeMap<usize, Vec<IpAddr>> = BTreeMap::new();
        for (peer, ids) in &self.per_peer {
            holding.entry(ids.len()).or_default().push(*peer);
        }
        for (held, peers) in holding.into_iter().rev() {
            if held < mine {
                break;
            }
            let ids = || {
                peers
                    .iter()
                    .filter_map(|peer| self.per_peer.get(peer))
                    .flatten()
                    .copied()
            };
            let idle = ids()
                .filter_map(|id| Some((self.anonymous.get(&id)?.activity.idle_since()?, id)))
                .min()
                .map(|(_, id)| id);
            // Else, from addresses that hold at least two more, the oldest, busy or not.
            let victim = idle.or_else(|| ids().min().filter(|_| held >= mine + 2));
            if let Some(id) = victim {
                return self.displace(id);
            }
        }
        false
    }

    fn displace(&mut self, id: u64) -> bool {
        let Some(entry) = self.remove(id) else {
            return false;
        };
        entry.activity.displace();
        true
    }

    fn remove(&mut self, id: u64) -> Option<Entry> {
        let entry = self.anonymous.remove(&id)?;
        self.refused.remove(&id);
        if let Some(ids) = self.per_peer.get_mut(&entry.peer) {
            ids.remove(&id);
            if ids.is_empty() {
                self.per_peer.remove(&entry.peer);
            }
        }
        Some(entry)
    }
}

impl Seat {
    /// The connection proved who it is (its certificate was verified in its handshake, or it
    /// carried a review at the doors' key's path): it moves to the proven pool, or stays where
    /// it is when that is full.
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

    /// The connection sent a review the doors refused (see [`ConnectionSeat::refuse`]); a
    /// proven one stays where it is.
    fn refuse(&self) {
        let mut open = self.budget.open.lock();
        if open.anonymous.contains_key(&self.id) {
            open.refused.insert(self.id);
        }
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
mod tests;
