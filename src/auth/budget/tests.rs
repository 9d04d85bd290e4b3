//! The connection budget's choices: who gives way to whom.

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
async fn served_then_idle(budget: &Arc<Budget>, from: u8, idle_secs: u64) -> (Seat, Arc<Activity>) {
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
