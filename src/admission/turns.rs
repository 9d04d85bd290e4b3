//! Turns shared fairly by address, each of a weight (the bytes a review's body may take, or
//! one): at most `limit` units held at once, at most `per_address` by one address. A turn
//! taken to read a body can be taken back while the body has not all come: when the pool is
//! full, an address asking for a turn takes it from the address that holds the most, as long as
//! that one holds more than the asker will (max-min fairness, as API Priority and Fairness
//! shares kube-apiserver among flows); the reader of a turn taken back stops and gives up its
//! request. So however many turns one address, or a hundred, keep busy with bodies that never
//! come, a review from an address that holds less — kube-apiserver's — has its turn at once,
//! not when a body's deadline gives one back.
//!
//! Where nothing can be taken back (every address holds no more than the asker would, or the
//! turns are all held by reads that have come whole), the asker waits: the next units given
//! back go to the waiting address that holds the fewest, among equals the one served longest
//! ago (an address new to the pool first), and an address's own waiters are served in order.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use tokio::sync::oneshot;

/// The pool (see the [module](self)).
#[derive(Clone)]
pub(crate) struct FairTurns {
    pool: Arc<Mutex<Pool>>,
}

struct Pool {
    limit: usize,
    per_address: usize,
    held: usize,
    /// Addresses that hold a turn or wait for one.
    addresses: HashMap<IpAddr, Address>,
    /// Turns given so far: each turn's number, and which address was served longest ago.
    given: u64,
}

#[derive(Default)]
struct Address {
    /// Units held.
    held: usize,
    /// Its turns that can be taken back.
    revocable: usize,
    /// When it was last given a turn (in turns given); 0: not since it came.
    served: u64,
    /// Its turns, by number (the oldest first).
    turns: BTreeMap<u64, Held>,
    waiting: VecDeque<Waiter>,
}

struct Held {
    units: usize,
    /// Where the turn can be taken back (its body is still being read): told when it is.
    take_back: Option<oneshot::Sender<()>>,
}

struct Waiter {
    units: usize,
    revocable: bool,
    tx: oneshot::Sender<FairTurn>,
}

/// A turn: given back when dropped.
pub(crate) struct FairTurn {
    pool: Arc<Mutex<Pool>>,
    /// Its address and number; `None` once given back (or never handed to a waiter that had
    /// gone).
    held: Option<(IpAddr, u64)>,
    /// Told when the turn is taken back (revocable turns only).
    taken_back: Option<oneshot::Receiver<()>>,
}

impl FairTurns {
    pub(crate) fn new(limit: usize, per_address: usize) -> FairTurns {
        FairTurns {
            pool: Arc::new(Mutex::new(Pool {
                limit: limit.max(1),
                per_address: per_address.max(1),
                held: 0,
                addresses: HashMap::new(),
                given: 0,
            })),
        }
    }

    /// Waits for a turn of one unit of `address`, which no one can take back. Cancel-safe: a
    /// waiter dropped before its turn came takes nothing, and a turn handed to it as it went is
    /// given back.
    pub(crate) async fn take(&self, address: IpAddr) -> FairTurn {
        self.take_units(address, 1, false).await
    }

    /// Waits for a turn of `units` of `address` to read a body, which an address that holds
    /// less may take back until [`FairTurn::settle`] (see the [module](self)): the reader
    /// watches [`FairTurn::taken_back`]. Cancel-safe as [`FairTurns::take`].
    pub(crate) async fn take_revocable(&self, address: IpAddr, units: usize) -> FairTurn {
        self.take_units(address, units, true).await
    }

    async fn take_units(&self, address: IpAddr, units: usize, revocable: bool) -> FairTurn {
        loop {
            let waiting = {
                let mut guard = self.pool.lock();
                let pool = &mut *guard;
                // Never more than the pool or an address may hold: such a turn would never come.
                let units = units.clamp(1, pool.per_address.min(pool.limit));
                let own_fits =
                    pool.addresses.get(&address).map_or(0, |a| a.held) + units <= pool.per_address;
                if own_fits && pool.held + units > pool.limit {
                    pool.take_back_for(address, units);
                }
                if own_fits && pool.held + units <= pool.limit {
                    let (number, taken_back) = pool.give(address, units, revocable);
                    return FairTurn {
                        pool: self.pool.clone(),
                        held: Some((address, number)),
                        taken_back,
                    };
                }
                let entry = pool.addresses.entry(address).or_default();
                // Waiters that went are forgotten as others come, so a queue holds about as
                // many as wait.
                entry.waiting.retain(|w| !w.tx.is_closed());
                let (tx, rx) = oneshot::channel();
                entry.waiting.push_back(Waiter {
                    units,
                    revocable,
                    tx,
                });
                // Units taken back above (not enough for this one) go to whoever waits.
                pool.hand_out(&self.pool);
                rx
            };
            // A waiter's sender is dropped unsent only once the waiter has gone: not reached,
            // but waiting again would be right.
            if let Ok(turn) = waiting.await {
                return turn;
            }
        }
    }

    /// Units held now, in all and by `address`.
    #[cfg(test)]
    fn held(&self, address: IpAddr) -> (usize, usize) {
        let pool = self.pool.lock();
        let by = pool.addresses.get(&address).map_or(0, |a| a.held);
        (pool.held, by)
    }

    /// Addresses remembered now.
    #[cfg(test)]
    fn addresses(&self) -> usize {
        self.pool.lock().addresses.len()
    }
}

impl Pool {
    /// Gives `address` a turn of `units`: its number, and where it is told it was taken back
    /// (when `revocable`).
    fn give(
        &mut self,
        address: IpAddr,
        units: usize,
        revocable: bool,
    ) -> (u64, Option<oneshot::Receiver<()>>) {
        self.given += 1;
        let number = self.given;
        let (take_back, taken_back) = if revocable {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let entry = self.addresses.entry(address).or_default();
        entry.held += units;
        entry.revocable += usize::from(revocable);
        entry.served = number;
        entry.turns.insert(number, Held { units, take_back });
        self.held += units;
        (number, taken_back)
    }

    /// `address` gives turn `number` back (if it still holds it); whether it did.
    fn release(&mut self, address: IpAddr, number: u64) -> bool {
        let Some(entry) = self.addresses.get_mut(&address) else {
            return false;
        };
        let Some(turn) = entry.turns.remove(&number) else {
            return false;
        };
        entry.held -= turn.units;
        entry.revocable -= usize::from(turn.take_back.is_some());
        self.held -= turn.units;
        if entry.held == 0 && entry.waiting.is_empty() {
            self.addresses.remove(&address);
        }
        true
    }

    /// Takes turns back from the addresses that hold the most, oldest first, while `asker`
    /// needs `units` more than are free and the address that holds the most still holds more
    /// than `asker` will once given them (and has a turn that can be taken back).
    fn take_back_for(&mut self, asker: IpAddr, units: usize) {
        let will_hold = self.addresses.get(&asker).map_or(0, |a| a.held) + units;
        while self.held + units > self.limit {
            let victim = self
                .addresses
                .iter()
                .filter(|(ip, a)| **ip != asker && a.held > will_hold && a.revocable > 0)
                .max_by_key(|(_, a)| a.held)
                .map(|(ip, _)| *ip);
            let Some(victim) = victim else { return };
            let Some(entry) = self.addresses.get_mut(&victim) else {
                return;
            };
            let Some((&number, _)) = entry.turns.iter().find(|(_, t)| t.take_back.is_some()) else {
                return;
            };
            // Released with its sender, then told.
            let take_back = entry.turns.get_mut(&number).map(|t| t.take_back.take());
            entry.revocable -= 1;
            self.release(victim, number);
            if let Some(Some(tx)) = take_back {
                let _ = tx.send(());
            }
        }
    }

    /// The waiter whose turn comes next, its turn given: of the addresses with a waiter whose
    /// turn fits, the one that holds the fewest units, among equals the one served longest ago
    /// (so that an address whose turn just came back does not win it again over a newcomer).
    fn next_waiter(&mut self) -> Option<(IpAddr, Waiter, u64, Option<oneshot::Receiver<()>>)> {
        let free = self.limit.checked_sub(self.held)?;
        let per_address = self.per_address;
        let (address, _) = self
            .addresses
            .iter()
            .filter(|(_, a)| {
                a.waiting
                    .front()
                    .is_some_and(|w| w.units <= free && a.held + w.units <= per_address)
            })
            .map(|(ip, a)| (*ip, (a.held, a.served)))
            .min_by_key(|(_, key)| *key)?;
        let waiter = self.addresses.get_mut(&address)?.waiting.pop_front()?;
        let (number, taken_back) = self.give(address, waiter.units, waiter.revocable);
        Some((address, waiter, number, taken_back))
    }

    /// Hands the free units to the waiters whose turn it is; one that went gives its back.
    fn hand_out(&mut self, pool: &Arc<Mutex<Pool>>) {
        while let Some((address, waiter, number, taken_back)) = self.next_waiter() {
            let turn = FairTurn {
                pool: pool.clone(),
                held: Some((address, number)),
                taken_back,
            };
            if let Err(mut turn) = waiter.tx.send(turn) {
                // Given back here, under the lock, not by its drop.
                turn.held = None;
                self.release(address, number);
            }
        }
    }
}

impl FairTurn {
    /// Done when the turn has been taken back (never, for a turn that cannot be, or once
    /// [`FairTurn::settle`]d).
    pub(crate) async fn taken_back(&mut self) {
        match self.taken_back.as_mut() {
            // Told, or its sender dropped: the turn is gone either way.
            Some(rx) => {
                let _ = rx.await;
            }
            None => std::future::pending().await,
        }
    }

    /// The body has come: the turn can no longer be taken back. Whether it was still held (a
    /// turn taken back as its body came is not held any more, but what was read stays read).
    pub(crate) fn settle(&mut self) -> bool {
        self.taken_back = None;
        let Some((address, number)) = self.held else {
            return false;
        };
        let mut pool = self.pool.lock();
        let Some(entry) = pool.addresses.get_mut(&address) else {
            return false;
        };
        let Some(turn) = entry.turns.get_mut(&number) else {
            return false;
        };
        if turn.take_back.take().is_some() {
            entry.revocable -= 1;
        }
        true
    }
}

impl Drop for FairTurn {
    fn drop(&mut self) {
        let Some((address, number)) = self.held.take() else {
            return;
        };
        let mut pool = self.pool.lock();
        if pool.release(address, number) {
            pool.hand_out(&self.pool);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    async fn within(turns: &FairTurns, address: IpAddr) -> Option<FairTurn> {
        tokio::time::timeout(Duration::from_millis(20), turns.take(address))
            .await
            .ok()
    }

    #[tokio::test]
    async fn a_turn_given_back_goes_to_the_address_that_holds_fewest() {
        let turns = FairTurns::new(4, 4);
        // One address holds every turn, and waits for more.
        let mut attacker: Vec<FairTurn> = Vec::new();
        for _ in 0..4 {
            attacker.push(turns.take(ip(2)).await);
        }
        let mut more = Box::pin(turns.take(ip(2)));
        assert!(futures::poll!(&mut more).is_pending(), "it waits");
        // kube-apiserver comes after it: it holds none, so the next turn given back is its.
        let mut review = Box::pin(turns.take(ip(1)));
        assert!(futures::poll!(&mut review).is_pending());
        drop(attacker.pop());
        let review = tokio::time::timeout(Duration::from_secs(1), review)
            .await
            .expect("kube-apiserver's review got the turn");
        assert_eq!(turns.held(ip(1)), (4, 1));
        assert!(
            futures::poll!(&mut more).is_pending(),
            "the attacker's waits its turn"
        );
        // The next one given back goes to the attacker's waiter.
        drop(review);
        let more = tokio::time::timeout(Duration::from_secs(1), more)
            .await
            .unwrap();
        assert_eq!(turns.held(ip(2)), (4, 4));
        drop(more);
        drop(attacker);
        assert_eq!(turns.held(ip(2)), (0, 0));
        assert_eq!(
            turns.addresses(),
            0,
            "addresses with nothing held are forgotten"
        );
    }

    #[tokio::test]
    async fn among_equals_the_address_served_longest_ago_goes_first() {
        let turns = FairTurns::new(2, 1);
        // Two addresses hold one turn each, and each waits for more.
        let a = turns.take(ip(2)).await;
        let b = turns.take(ip(3)).await;
        let mut more_a = Box::pin(turns.take(ip(2)));
        let mut more_b = Box::pin(turns.take(ip(3)));
        assert!(futures::poll!(&mut more_a).is_pending());
        assert!(futures::poll!(&mut more_b).is_pending());
        // kube-apiserver comes last.
        let mut review = Box::pin(turns.take(ip(1)));
        assert!(futures::poll!(&mut review).is_pending());
        // The turn 127.0.0.2 gives back: it and kube-apiserver now hold none, and kube-apiserver,
        // never served, goes before the address whose waiter came first.
        drop(a);
        let review = tokio::time::timeout(Duration::from_secs(1), review)
            .await
            .expect("kube-apiserver's review got the turn");
        assert!(futures::poll!(&mut more_a).is_pending());
        drop(b);
        // 127.0.0.2 (none held, served before 127.0.0.3) goes next.
        let _more_a = tokio::time::timeout(Duration::from_secs(1), more_a)
            .await
            .expect("127.0.0.2's next turn");
        assert!(futures::poll!(&mut more_b).is_pending());
        drop(review);
        let _more_b = tokio::time::timeout(Duration::from_secs(1), more_b)
            .await
            .expect("127.0.0.3's next turn");
    }

    #[tokio::test]
    async fn one_address_holds_at_most_its_share() {
        let turns = FairTurns::new(8, 2);
        let _a = turns.take(ip(2)).await;
        let _b = turns.take(ip(2)).await;
        assert!(within(&turns, ip(2)).await.is_none(), "a third waits");
        assert!(within(&turns, ip(3)).await.is_some(), "another goes on");
    }

    #[tokio::test]
    async fn a_waiter_that_went_takes_nothing() {
        let turns = FairTurns::new(1, 1);
        let held = turns.take(ip(2)).await;
        // Waiters that give up (their review timed out, or its connection closed).
        for _ in 0..3 {
            assert!(within(&turns, ip(3)).await.is_none());
        }
        drop(held);
        // The turn went to none of them: it is free.
        assert!(within(&turns, ip(4)).await.is_some());
        assert_eq!(turns.held(ip(3)), (0, 0));
    }

    #[tokio::test]
    async fn a_body_that_has_not_come_gives_its_turn_to_an_address_that_holds_less() {
        // 100 units; a hundred addresses would do the same as the one here.
        let turns = FairTurns::new(100, 100);
        let mut attacker: Vec<FairTurn> = Vec::new();
        for _ in 0..10 {
            attacker.push(turns.take_revocable(ip(2), 10).await);
        }
        assert_eq!(turns.held(ip(2)), (100, 100));
        // kube-apiserver's review of 2 units has its turn at once: one of the attacker's is
        // taken back, the oldest.
        let mut review = within_units(&turns, ip(1), 2)
            .await
            .expect("kube-apiserver's review has its turn at once");
        assert_eq!(turns.held(ip(1)), (92, 2));
        let mut first = attacker.remove(0);
        tokio::time::timeout(Duration::from_secs(1), first.taken_back())
            .await
            .expect("the attacker's oldest turn is taken back");
        assert!(!first.settle(), "it is not held any more");
        // The units left over from the turn taken back are free for anyone.
        assert!(within_units(&turns, ip(3), 8).await.is_some());
        // Once its body has come, the review's turn is never taken back, and dropping the turn
        // taken back gives nothing twice.
        assert!(review.settle());
        drop(first);
        assert_eq!(turns.held(ip(1)), (92, 2));
        drop(review);
        drop(attacker);
        assert_eq!(turns.held(ip(1)), (0, 0));
        assert_eq!(turns.addresses(), 0);
    }

    #[tokio::test]
    async fn nothing_is_taken_from_an_address_that_holds_no_more_than_the_asker_will() {
        let turns = FairTurns::new(4, 4);
        // Four addresses hold one turn each: a fifth asking for one waits for the next given
        // back (each would hold as much as it).
        let mut held = Vec::new();
        for last in 2..6 {
            held.push(turns.take_revocable(ip(last), 1).await);
        }
        assert!(within_units(&turns, ip(1), 1).await.is_none());
        assert_eq!(turns.held(ip(1)), (4, 0));
        let mut review = Box::pin(turns.take_revocable(ip(1), 1));
        assert!(futures::poll!(&mut review).is_pending());
        drop(held.pop());
        tokio::time::timeout(Duration::from_secs(1), review)
            .await
            .expect("the next turn given back is its");
    }

    #[tokio::test]
    async fn a_read_that_has_come_whole_is_never_taken_back() {
        let turns = FairTurns::new(10, 10);
        let mut read = turns.take_revocable(ip(2), 10).await;
        assert!(read.settle());
        // And turns taken with `take` (a parse's) never can be.
        assert!(within_units(&turns, ip(1), 1).await.is_none(), "it waits");
        let mut parse = FairTurns::new(1, 1).take(ip(2)).await;
        assert!(
            tokio::time::timeout(Duration::from_millis(20), parse.taken_back())
                .await
                .is_err()
        );
        drop(read);
        assert!(within_units(&turns, ip(1), 1).await.is_some());
    }

    #[tokio::test]
    async fn a_turn_larger_than_an_address_may_hold_is_made_to_fit() {
        let turns = FairTurns::new(10, 4);
        let turn = within_units(&turns, ip(2), 100).await.expect("it comes");
        assert_eq!(turns.held(ip(2)), (4, 4));
        drop(turn);
    }

    async fn within_units(turns: &FairTurns, address: IpAddr, units: usize) -> Option<FairTurn> {
        tokio::time::timeout(
            Duration::from_millis(20),
            turns.take_revocable(address, units),
        )
        .await
        .ok()
    }
}
