//! Turns shared fairly by address: at most `limit` held at once, at most `per_address` by one
//! address. While none is free, the next one given back goes to the waiting address that holds
//! the fewest, among equals the one served longest ago (an address new to the pool first), and
//! an address's own waiters are served in order: max-min fairness, as API Priority and Fairness' fair queuing shares kube-apiserver
//! among flows. So however many turns one address, or a hundred, keep busy, a review from an
//! address that holds none — kube-apiserver's — has the next turn given back.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
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
    /// Turns given so far, to tell which address was served longest ago.
    given: u64,
}

#[derive(Default)]
struct Address {
    held: usize,
    /// When it was last given a turn (in turns given); 0: not since it came.
    served: u64,
    waiting: VecDeque<oneshot::Sender<FairTurn>>,
}

/// A turn: given back when dropped.
pub(crate) struct FairTurn {
    pool: Arc<Mutex<Pool>>,
    /// `None` once given back (or never handed to a waiter that had gone).
    address: Option<IpAddr>,
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

    /// Waits for a turn of `address`. Cancel-safe: a waiter dropped before its turn came takes
    /// nothing, and a turn handed to it as it went is given back.
    pub(crate) async fn take(&self, address: IpAddr) -> FairTurn {
        loop {
            let waiting = {
                let mut guard = self.pool.lock();
                let pool = &mut *guard;
                let entry = pool.addresses.entry(address).or_default();
                if pool.held < pool.limit && entry.held < pool.per_address {
                    entry.held += 1;
                    pool.held += 1;
                    pool.given += 1;
                    entry.served = pool.given;
                    return FairTurn {
                        pool: self.pool.clone(),
                        address: Some(address),
                    };
                }
                // Waiters that went are forgotten as others come, so a queue holds about as
                // many as wait.
                entry.waiting.retain(|tx| !tx.is_closed());
                let (tx, rx) = oneshot::channel();
                entry.waiting.push_back(tx);
                rx
            };
            // A waiter's sender is dropped unsent only once the waiter has gone: not reached,
            // but waiting again would be right.
            if let Ok(turn) = waiting.await {
                return turn;
            }
        }
    }

    /// Turns held now, in all and by `address`.
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
    /// `address` gives a turn back.
    fn release(&mut self, address: IpAddr) {
        self.held -= 1;
        if let Some(entry) = self.addresses.get_mut(&address) {
            entry.held -= 1;
            if entry.held == 0 && entry.waiting.is_empty() {
                self.addresses.remove(&address);
            }
        }
    }

    /// The waiter whose turn comes next, its turn taken: of the addresses below their share
    /// with a waiter, the one that holds the fewest, among equals the one served longest ago
    /// (so that an address whose turn just came back does not win it again over a newcomer).
    fn next_waiter(&mut self) -> Option<(IpAddr, oneshot::Sender<FairTurn>)> {
        if self.held >= self.limit {
            return None;
        }
        let per_address = self.per_address;
        let (address, _) = self
            .addresses
            .iter()
            .filter(|(_, a)| a.held < per_address)
            .filter(|(_, a)| !a.waiting.is_empty())
            .map(|(ip, a)| (*ip, (a.held, a.served)))
            .min_by_key(|(_, key)| *key)?;
        let entry = self.addresses.get_mut(&address)?;
        let tx = entry.waiting.pop_front()?;
        entry.held += 1;
        self.held += 1;
        self.given += 1;
        entry.served = self.given;
        Some((address, tx))
    }
}

impl Drop for FairTurn {
    fn drop(&mut self) {
        let Some(address) = self.address.take() else {
            return;
        };
        let mut pool = self.pool.lock();
        pool.release(address);
        // Hand the free turns to the waiters whose turn it is; one that went gives its back.
        while let Some((next, tx)) = pool.next_waiter() {
            let turn = FairTurn {
                pool: self.pool.clone(),
                address: Some(next),
            };
            match tx.send(turn) {
                Ok(()) => {}
                Err(mut turn) => {
                    // Given back here, under the lock, not by its drop.
                    turn.address = None;
                    pool.release(next);
                }
            }
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
}
