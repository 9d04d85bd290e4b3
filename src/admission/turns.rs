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
//! back go to the waiting address that holds the fewest whose first waiter they fit, among
//! equals the one served longest ago (an address new to the pool first), and an address's own
//! waiters are served in order (each newcomer of the address takes back for the first again).
//! A newcomer whose turn fits in what is free takes it at once, waiters of other addresses or
//! not.

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

/// A waiter's side of its wait: when dropped (its review went), its place in the queue is
/// forgotten, and its address too if it then holds and waits for nothing.
struct Waiting {
    pool: Arc<Mutex<Pool>>,
    address: IpAddr,
    rx: Option<oneshot::Receiver<FairTurn>>,
}

impl Waiting {
    async fn turn(&mut self) -> Option<Result<FairTurn, oneshot::error::RecvError>> {
        let rx = self.rx.as_mut()?;
        let turn = rx.await;
        self.rx = None;
        Some(turn)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.rx.take().is_none() {
            return;
        }
        let mut pool = self.pool.lock();
        if let Some(entry) = pool.addresses.get_mut(&self.address) {
            entry.waiting.retain(|w| !w.tx.is_closed());
            if entry.held == 0 && entry.waiting.is_empty() {
                pool.addresses.remove(&self.address);
            }
        }
        // The waiter after it may fit in what is free.
        pool.hand_out(&self.pool);
    }
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
            let mut waiting = {
                let mut guard = self.pool.lock();
                let pool = &mut *guard;
                // Never more than the pool or an address may hold: such a turn would never come.
                let units = units.clamp(1, pool.per_address.min(pool.limit));
                let front = pool.addresses.get_mut(&address).and_then(|a| {
                    // Waiters that went are forgotten as others come.
                    a.waiting.retain(|w| !w.tx.is_closed());
                    a.waiting.front().map(|w| (a.held, w.units))
                });
                // The address's first waiter, where the pool (not its share) keeps it waiting,
                // takes its turn back from a heavier address now, as it would have on coming.
                if let Some((held, front)) = front
                    && held + front <= pool.per_address
                    && pool.held + front > pool.limit
                    && pool.take_back_for(address, front)
                {
                    pool.hand_out(&self.pool);
                }
                let (held, queued) = pool
                    .addresses
                    .get(&address)
                    .map_or((0, false), |a| (a.held, !a.waiting.is_empty()));
                // An address's own waiters go first, in order.
                let own_fits = !queued && held + units <= pool.per_address;
                let took = own_fits
                    && pool.held + units > pool.limit
                    && pool.take_back_for(address, units);
                if own_fits && pool.held + units <= pool.limit {
                    let (number, taken_back) = pool.give(address, units, revocable);
                    if took {
                        // Units taken back beyond this turn's go to whoever waits.
                        pool.hand_out(&self.pool);
                    }
                    return FairTurn {
                        pool: self.pool.clone(),
                        held: Some((address, number)),
                        taken_back,
                    };
                }
                let (tx, rx) = oneshot::channel();
                pool.addresses
                    .entry(address)
                    .or_default()
                    .waiting
                    .push_back(Waiter {
                        units,
                        revocable,
                        tx,
                    });
                if took {
                    // Units taken back above (not enough for this one) go to whoever waits.
                    pool.hand_out(&self.pool);
                }
                Waiting {
                    pool: self.pool.clone(),
                    address,
                    rx: Some(rx),
                }
            };
            // A waiter's sender is dropped unsent only once the waiter has gone: not reached,
            // but waiting again would be right.
            if let Some(Ok(turn)) = waiting.turn().await {
                return turn;
            }
        }
    }

    /// Units held now, in all and by `address`.
    #[cfg(test)]
    pub(super) fn held(&self, address: IpAddr) -> (usize, usize) {
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
    /// than `asker` will once given them (and has a turn that can be taken back). One look over
    /// the addresses for each one taken from. Whether it took any back.
    fn take_back_for(&mut self, asker: IpAddr, units: usize) -> bool {
        let will_hold = self.addresses.get(&asker).map_or(0, |a| a.held) + units;
        let mut took = false;
        while self.held + units > self.limit {
            let victim = self
                .addresses
                .iter()
                .filter(|(ip, a)| **ip != asker && a.held > will_hold && a.revocable > 0)
                .max_by_key(|(_, a)| a.held)
                .map(|(ip, _)| *ip);
            let Some(victim) = victim else { return took };
            let mut told = Vec::new();
            while self.held + units > self.limit {
                let Some(entry) = self.addresses.get_mut(&victim) else {
                    break;
                };
                if entry.held <= will_hold {
                    break;
                }
                let Some((&number, _)) = entry.turns.iter().find(|(_, t)| t.take_back.is_some())
                else {
                    break;
                };
                // Released with its sender taken out, then told (below, once its address's
                // turns are done with).
                if let Some(tx) = entry
                    .turns
                    .get_mut(&number)
                    .and_then(|t| t.take_back.take())
                {
                    entry.revocable -= 1;
                    told.push(tx);
                }
                self.release(victim, number);
            }
            let progressed = !told.is_empty();
            for tx in told {
                let _ = tx.send(());
            }
            if !progressed {
                return took;
            }
            took = true;
        }
        took
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
mod tests;
