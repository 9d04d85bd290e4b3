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
        let budget = Budget::new(LIMITS, Port::Api);
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

    /// A connection from `from` with a request in flight (never finished).
    fn busy(budget: &Arc<Budget>, from: u8) -> Result<Busy, Refused> {
        let (seat, activity) = connect(budget, from)?;
        Ok((seat, activity.begin(), activity))
    }

    type Busy = (Seat, crate::auth::connection::InFlight, Arc<Activity>);

    fn displaced(connections: &[Busy]) -> usize {
        connections
            .iter()
            .filter(|(_, _, a)| a.is_displaced())
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_that_holds_the_pool_busy_gives_way_to_any_other() {
        let budget = Budget::new(LIMITS, Port::Api);
        // One address holds every place, each with a request that never ends.
        let attacker: Vec<Busy> = (0..4).map(|_| busy(&budget, 2).unwrap()).collect();
        // More of its own are refused: it holds the most.
        assert!(matches!(busy(&budget, 2), Err(Refused::Anonymous)));
        assert_eq!(displaced(&attacker), 0);
        // kube-apiserver's review (another address) takes the attacker's oldest place.
        let review = busy(&budget, 1).unwrap();
        assert!(attacker[0].2.is_displaced());
        assert_eq!(displaced(&attacker), 1);
        // …and a probe from a third address another.
        let probe = busy(&budget, 3).unwrap();
        assert_eq!(displaced(&attacker), 2);
        assert!(!review.2.is_displaced() && !probe.2.is_displaced());
        // Now the attacker holds 2, the others 1 each: a fourth address still gets in (2 ≥ 0 + 2),
        // and then every address holds one: the next newcomer is refused, none displaced.
        let user = busy(&budget, 4).unwrap();
        assert_eq!(displaced(&attacker), 3);
        assert!(matches!(busy(&budget, 5), Err(Refused::Anonymous)));
        assert!(matches!(busy(&budget, 1), Err(Refused::Anonymous)));
        assert!(!review.2.is_displaced() && !probe.2.is_displaced() && !user.2.is_displaced());
        assert_eq!(budget.open(), (4, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_address_that_holds_most_pays_not_the_lighter_ones() {
        let budget = Budget::new(LIMITS, Port::Api);
        // kube-apiserver's connection, idle between reviews; the attacker's three busy.
        let (_k, kube_apiserver) = served_then_idle(&budget, 1, 1).await;
        let attacker: Vec<Busy> = (0..3).map(|_| busy(&budget, 2).unwrap()).collect();
        // The attacker's newcomer may not take kube-apiserver's idle place (it holds fewer), nor
        // a busy one of its own.
        assert!(matches!(busy(&budget, 2), Err(Refused::Anonymous)));
        assert!(!kube_apiserver.is_displaced());
        assert_eq!(displaced(&attacker), 0);
        // A newcomer from a third address takes the attacker's oldest, busy as it is, and leaves
        // kube-apiserver's idle connection alone.
        let _probe = busy(&budget, 3).unwrap();
        assert!(!kube_apiserver.is_displaced());
        assert!(attacker[0].2.is_displaced());
        // Among equals (1, 2, 1), the idle goes before the busy: the attacker's newcomer (2) is
        // refused, a fourth address takes the attacker's (2 ≥ 0 + 2).
        assert!(matches!(busy(&budget, 2), Err(Refused::Anonymous)));
        let _user = busy(&budget, 4).unwrap();
        assert_eq!(displaced(&attacker), 2);
        assert!(!kube_apiserver.is_displaced());
    }

    #[tokio::test(start_paused = true)]
    async fn the_silent_go_before_the_idle() {
        let budget = Budget::new(LIMITS, Port::Api);
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
        let budget = Budget::new(LIMITS, Port::Api);
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

    #[tokio::test(start_paused = true)]
    async fn a_connection_refused_at_the_doors_gives_way_busy_or_not() {
        let budget = Budget::new(LIMITS, Port::Api);
        // Four addresses, one busy connection each: a full pool no newcomer could take from.
        let held: Vec<_> = (1..=4)
            .map(|from| {
                let (seat, activity) = connect(&budget, from).unwrap();
                let busy = activity.begin();
                (seat, activity, busy)
            })
            .collect();
        assert_eq!(connect(&budget, 5).err(), Some(Refused::Anonymous));
        // One of them sends a review the doors refuse.
        held[1].0.refuse();
        // A newcomer (kube-apiserver's new connection) takes its place.
        let (_newcomer, newcomer) = connect(&budget, 5).unwrap();
        assert!(held[1].1.is_displaced(), "the refused connection gives way");
        assert!(held.iter().filter(|(_, a, _)| a.is_displaced()).count() == 1);
        // Its review in flight, no refused connection is left: the next one is refused again.
        let _review = newcomer.begin();
        assert_eq!(connect(&budget, 6).err(), Some(Refused::Anonymous));
        assert!(!newcomer.is_displaced());
    }

    #[tokio::test(start_paused = true)]
    async fn of_addresses_that_hold_as_many_the_oldest_silent_goes_not_the_newest() {
        let budget = Budget::new(LIMITS, Port::Api);
        // An old silent connection from a low address, two busy ones, then a connection still
        // in its handshake from a high address (kube-apiserver's new one, say).
        let (_old, old) = connect(&budget, 2).unwrap();
        tokio::time::advance(std::time::Duration::from_secs(5)).await;
        let busy: Vec<_> = [3, 4]
            .into_iter()
            .map(|from| {
                let (seat, activity) = connect(&budget, from).unwrap();
                let review = activity.begin();
                (seat, activity, review)
            })
            .collect();
        let (_new, new) = connect(&budget, 200).unwrap();
        // Every address holds one: a newcomer takes the oldest silent connection's place.
        let _newcomer = connect(&budget, 5).unwrap();
        assert!(old.is_displaced(), "the oldest silent connection gives way");
        assert!(
            !new.is_displaced(),
            "the one in its handshake keeps its place"
        );
        assert!(busy.iter().all(|(_, a, _)| !a.is_displaced()));
    }
}
