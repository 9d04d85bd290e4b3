//! What a review may cost before it is read, by who sends it.
//!
//! Where kube-apiserver is configured to present a client certificate to the webhooks
//! (`ADMISSION_ALLOWED_NAMES`), or calls them at paths that hold the doors' key (the server makes
//! one with its serving certificate: see [`DoorKey`]), a caller without one of those certificates
//! or that key gets 401 before a byte of its body is read, and kube-apiserver's reviews are read
//! at once. A connection that carried a review at the key's path is kube-apiserver's: out of the
//! anonymous pool from then on, never displaced by others (`auth::budget`).
//!
//! Where it cannot be (managed control planes), anyone who reaches the port can send reviews,
//! and kube-apiserver's own are among them; so every review takes a turn before its body is
//! read, weighed by the bytes it may take (its `Content-Length`, or the door's limit where it
//! gives none; one over the limit is refused before): at most [`ANONYMOUS_BYTES`] at once in all
//! and [`PER_PEER_BYTES`] from one address, shared fairly by address (`turns`). While its body
//! has not all come (and then, for a large eviction's, until it has a turn to be parsed; for a
//! ruleset's, until it has its turn to wait for a decision), a review's turn can be taken back
//! by an address that will hold less than its own (answered `429` with `Retry-After`, its
//! reading stopped). So however many bodies that never come one address, or
//! a hundred, keep waiting, kube-apiserver's review has its turn at once; where nothing can be
//! taken back, it waits for the next turn given back (waiters are never refused: a review
//! answered with an error is an eviction let through). A body must arrive within
//! [`BODY_DEADLINE`] of its turn. What bodies read or coming cost is bounded by
//! [`ANONYMOUS_BYTES`], whoever sends them. To keep kube-apiserver's review of `u` KiB waiting,
//! every address that holds a turn must hold no more than it: 65,536 / `u` addresses, each with
//! a connection of its own, more than the anonymous connections there are (512 by default) for
//! any review under 128 KiB (an eviction's is 2 KB).
//!
//! Reviews whose body is large (see `review`) are parsed once read (past some 128 KiB on the
//! blocking pool), in one of a few turns ([`LARGE`], at most [`LARGE_PER_PEER`] of them by one address; kube-apiserver's,
//! proven, have [`LARGE`] of their own), shared the same way: a parse takes a turn for as long
//! as it computes, never while it waits for a body. A ruleset's review, read, waits for its
//! decision (one compile at a time) in a turn of another pool ([`DECIDING`],
//! [`DECIDING_PER_PEER`] an address), and gives its turn to be read back once it has one.

use super::ReviewError;
use super::turns::{FairTurn, FairTurns};
use crate::auth::budget::ConnectionSeat;
use crate::auth::connection::PeerAddress;
use crate::auth::{AdmissionCallers, PeerCertificates, RequestHeaderConfig};
use crate::certificates::DoorKey;
use axum::extract::Request;
use std::future::Future;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Bytes of reviews read at once by callers that have not proven who they are, from all
/// addresses.
pub(super) const ANONYMOUS_BYTES: usize = 64 << 20;

/// Of those, the most one address reads at once.
pub(super) const PER_PEER_BYTES: usize = 16 << 20;

/// The turns' unit of bytes: a review takes one for each started KiB it may take.
const UNIT: usize = 1 << 10;

/// Reviews with a large body parsed at once, in each pool (proven, anonymous).
pub(super) const LARGE: usize = 4;

/// Of those, the most one address has parsed at once.
pub(super) const LARGE_PER_PEER: usize = 2;

/// Reviews of rulesets parsed and waiting for their decision (a compile, one at a time) at
/// once, by callers that have not proven who they are: each keeps what it parsed.
const DECIDING: usize = 16;

/// Of those, the most from one address.
const DECIDING_PER_PEER: usize = 2;

/// Longest a review's body may take to arrive once its turn has come: kube-apiserver sends a
/// review at once (its largest, 3 MiB, at 24 Mbit/s). A turn to be read is held about this
/// long at most (then while a large body waits for its parse, a few milliseconds), so where no
/// turn can be taken back a review waits about this long for the next one given back (see
/// `turns`), which must leave it time within the webhook's `timeoutSeconds` (3 s as shipped).
pub(super) const BODY_DEADLINE: Duration = Duration::from_secs(1);

/// Most of a refused request's body read (and dropped) before it is answered.
const DISCARDED: usize = 64 << 10;

/// Longest a refused request's body is read before it is answered.
const DISCARD_DEADLINE: Duration = Duration::from_millis(500);

/// Who sent a review.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub(crate) enum Caller {
    /// kube-apiserver, proven by its client certificate or the doors' key in its path.
    KubeApiserver,
    /// Anyone: the doors are configured not to authenticate their callers.
    Unverified,
}

impl Caller {
    /// The log field's value.
    pub(crate) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The doors' turns (see the [module](self)).
pub(crate) struct Intake {
    callers: AdmissionCallers,
    trust: watch::Receiver<Arc<RequestHeaderConfig>>,
    /// The doors' key, when the server has one.
    door_key: watch::Receiver<Option<DoorKey>>,
    anonymous: FairTurns,
    large: [FairTurns; 2],
    deciding: FairTurns,
}

/// A review's turn to be read (none for kube-apiserver, proven): given back when dropped.
pub(crate) struct ReadTurn {
    held: Option<FairTurn>,
}

/// A large review's turn to be parsed, or a ruleset review's to wait for its decision (none
/// for kube-apiserver's, proven): given back when dropped.
pub(crate) struct Turn {
    _held: Option<FairTurn>,
}

impl Intake {
    pub(crate) fn new(
        callers: AdmissionCallers,
        trust: watch::Receiver<Arc<RequestHeaderConfig>>,
        door_key: watch::Receiver<Option<DoorKey>>,
    ) -> Intake {
        Intake {
            callers,
            trust,
            door_key,
            anonymous: FairTurns::new(ANONYMOUS_BYTES / UNIT, PER_PEER_BYTES / UNIT),
            large: [
                FairTurns::new(LARGE, LARGE),
                FairTurns::new(LARGE, LARGE_PER_PEER),
            ],
            deciding: FairTurns::new(DECIDING, DECIDING_PER_PEER),
        }
    }

    /// Who sent `request` ([`Intake::caller`]). A request refused is answered once a few bytes
    /// of its body, at most, are read and dropped (a connection closed with a body unread is
    /// reset, and its client may never see the 401); its connection, not kube-apiserver's, gives
    /// its place to any newcomer from then on, busy or not (see `auth::budget`).
    pub(crate) async fn admit(&self, request: Request) -> Result<(Caller, Request), ReviewError> {
        match self.caller(&request) {
            Ok(caller) => Ok((caller, request)),
            Err(e) => {
                Intake::not_kube_apiserver(&request);
                let mut body = http_body_util::Limited::new(request.into_body(), DISCARDED);
                let _ = tokio::time::timeout(DISCARD_DEADLINE, async {
                    use http_body_util::BodyExt;
                    while let Some(Ok(_)) = body.frame().await {}
                })
                .await;
                Err(e)
            }
        }
    }

    /// `request`, refused, was not kube-apiserver's: its connection gives its place to any
    /// newcomer from now on, busy or not (see `auth::budget`).
    pub(crate) fn not_kube_apiserver(request: &Request) {
        if let Some(seat) = request.extensions().get::<ConnectionSeat>() {
            seat.refuse();
        }
    }

    /// Who sent `request`: 401 when the doors authenticate their callers (by client
    /// certificate, or by the doors' key) and it is not kube-apiserver. Nothing of its body has
    /// been read.
    pub(crate) fn caller(&self, request: &Request) -> Result<Caller, ReviewError> {
        let keyed = match &*self.door_key.borrow() {
            Some(key) if key.opens(request.uri().path()) => {
                // Its connection is kube-apiserver's: out of the anonymous pool from now on,
                // never displaced by others (where the proven pool has room).
                if let Some(seat) = request.extensions().get::<ConnectionSeat>() {
                    let _ = seat.prove();
                }
                return Ok(Caller::KubeApiserver);
            }
            Some(_) => true,
            None => false,
        };
        if !self.callers.required() {
            return if keyed {
                Err(ReviewError::Unauthorized)
            } else {
                Ok(Caller::Unverified)
            };
        }
        let trust = self.trust.borrow().clone();
        request
            .extensions()
            .get::<PeerCertificates>()
            .filter(|certs| certs.is_admission_caller(&self.callers, &trust))
            .map(|_| Caller::KubeApiserver)
            .ok_or(ReviewError::Unauthorized)
    }

    /// The address `request` comes from (unspecified where no connection tells: in tests).
    pub(crate) fn peer(request: &Request) -> IpAddr {
        request
            .extensions()
            .get::<PeerAddress>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0)
    }

    /// Waits for the turn of a review from `peer` to be read, its body of `length` bytes if
    /// known, at most `limit` (none to wait for kube-apiserver, proven). A body that says it is
    /// over `limit` is refused at once.
    pub(crate) async fn read_turn(
        &self,
        caller: Caller,
        peer: IpAddr,
        length: Option<u64>,
        limit: usize,
    ) -> Result<ReadTurn, ReviewError> {
        if length.is_some_and(|n| n > limit as u64) {
            return Err(ReviewError::TooLarge { limit });
        }
        Ok(match caller {
            Caller::KubeApiserver => ReadTurn { held: None },
            Caller::Unverified => ReadTurn {
                held: Some(
                    self.anonymous
                        .take_revocable(peer, units(length, limit))
                        .await,
                ),
            },
        })
    }

    /// Waits for a turn of a review from `peer`, read, to parse its large body.
    pub(crate) async fn parse_turn(&self, caller: Caller, peer: IpAddr) -> Turn {
        let pool = match caller {
            Caller::KubeApiserver => &self.large[0],
            Caller::Unverified => &self.large[1],
        };
        Turn {
            _held: Some(pool.take(peer).await),
        }
    }

    /// Waits for a turn of a ruleset's review from `peer`, read, to wait for its decision (none
    /// to wait for kube-apiserver, proven).
    pub(crate) async fn decide_turn(&self, caller: Caller, peer: IpAddr) -> Turn {
        Turn {
            _held: match caller {
                Caller::KubeApiserver => None,
                Caller::Unverified => Some(self.deciding.take(peer).await),
            },
        }
    }

    /// Doors that answer anyone (for tests and benchmarks).
    pub(crate) fn open() -> Intake {
        let (_, trust) = watch::channel(Arc::new(RequestHeaderConfig::default()));
        Intake::new(AdmissionCallers::default(), trust, watch::channel(None).1)
    }
}

/// The units a body of `length` bytes (if known) takes, read within `limit`.
fn units(length: Option<u64>, limit: usize) -> usize {
    let bytes = length.map_or(limit, |n| usize::try_from(n).unwrap_or(limit).min(limit));
    bytes.div_ceil(UNIT).max(1)
}

impl ReadTurn {
    /// `read` (a body's), within [`BODY_DEADLINE`], stopped if the turn is taken back before
    /// it is done.
    pub(crate) async fn read<T>(
        &mut self,
        read: impl Future<Output = Result<T, ReviewError>>,
    ) -> Result<T, ReviewError> {
        self.until(async {
            tokio::time::timeout(BODY_DEADLINE, read)
                .await
                .map_err(|_| ReviewError::TimedOut(BODY_DEADLINE))?
        })
        .await?
    }

    /// `work`, stopped if the turn is taken back before it is done.
    pub(crate) async fn until<T>(
        &mut self,
        work: impl Future<Output = T>,
    ) -> Result<T, ReviewError> {
        let Some(turn) = self.held.as_mut() else {
            return Ok(work.await);
        };
        tokio::select! {
            biased;
            done = work => Ok(done),
            () = turn.taken_back() => Err(ReviewError::TakenBack),
        }
    }

    /// What the turn waited for has come: it can no longer be taken back (a turn taken back
    /// as it came is not held any more, but what was read stays read).
    pub(crate) fn settle(&mut self) {
        if let Some(turn) = self.held.as_mut() {
            turn.settle();
        }
    }
}

#[cfg(test)]
mod tests;
