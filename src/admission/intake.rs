//! What a review may cost before it is read, by who sends it.
//!
//! Where kube-apiserver is configured to present a client certificate to the webhooks
//! (`ADMISSION_ALLOWED_NAMES`), or calls them at paths that hold the doors' key (the server makes
//! one with its serving certificate: see [`DoorKey`]), a caller without one of those certificates
//! or that key gets 401 before a byte of its body is read, and kube-apiserver's reviews take turns
//! only among themselves. A connection that carried a review at the key's path is
//! kube-apiserver's: out of the anonymous pool from then on, never displaced by others
//! (`auth::budget`).
//!
//! Where it cannot be (managed control planes), anyone who reaches the port can send reviews,
//! and kube-apiserver's own are among them; so every review takes a turn before its body is
//! read: at most [`ANONYMOUS`] at once in all and [`PER_PEER`] from one address, shared fairly by
//! address (`turns`: while none is free, the next one given back goes to the waiting address that
//! holds the fewest; waiters are never refused: a review answered with an error is an eviction
//! let through), and its body must arrive within [`BODY_DEADLINE`] of its turn. Reviews whose
//! body is large (see `review`) also take one of the few turns to be read ([`LARGE`], at most
//! [`LARGE_PER_PEER`] of them by one address), shared the same way. So
//! however many turns one address, or a hundred, keep busy with bodies that never come,
//! kube-apiserver's review (from an address that holds few) has the next turn given back, within
//! [`BODY_DEADLINE`]; what they cost is bounded: [`ANONYMOUS`] bodies of at most
//! `review::SMALL_BYTES` and [`LARGE`] of at most `review::MAX_LARGE_BYTES` (kube-apiserver's,
//! proven, have [`LARGE`] turns of their own).

use super::ReviewError;
use super::turns::{FairTurn, FairTurns};
use crate::auth::budget::ConnectionSeat;
use crate::auth::connection::PeerAddress;
use crate::auth::{AdmissionCallers, PeerCertificates, RequestHeaderConfig};
use crate::certificates::DoorKey;
use axum::extract::Request;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Reviews read at once from one peer address by callers that have not proven who they are.
pub(super) const PER_PEER: usize = 16;

/// Reviews read at once by callers that have not proven who they are, from all addresses.
pub(super) const ANONYMOUS: usize = 1024;

/// Reviews with a large body read at once, in each pool (proven, anonymous).
pub(super) const LARGE: usize = 4;

/// Of those, the most one address reads at once.
pub(super) const LARGE_PER_PEER: usize = 2;

/// Longest a review's body may take to arrive once its turn has come: kube-apiserver sends a
/// review at once (its largest, 3 MiB, at 24 Mbit/s), and while the turns are all held a review
/// waits at most this long for the next one given back (see `turns`), which must leave it time
/// within the webhook's `timeoutSeconds` (3 s as shipped).
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
}

/// A review's turn (none for kube-apiserver, proven): given back when dropped.
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
            anonymous: FairTurns::new(ANONYMOUS, PER_PEER),
            large: [
                FairTurns::new(LARGE, LARGE),
                FairTurns::new(LARGE, LARGE_PER_PEER),
            ],
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

    /// Waits for the turn of a review from `peer` to be read (none to wait for kube-apiserver,
    /// proven).
    pub(crate) async fn turn(&self, caller: Caller, peer: IpAddr) -> Turn {
        match caller {
            Caller::KubeApiserver => Turn { _held: None },
            Caller::Unverified => Turn {
                _held: Some(self.anonymous.take(peer).await),
            },
        }
    }

    /// Waits for a turn of a review from `peer` to read its large body.
    pub(crate) async fn large_turn(&self, caller: Caller, peer: IpAddr) -> Turn {
        let pool = match caller {
            Caller::KubeApiserver => &self.large[0],
            Caller::Unverified => &self.large[1],
        };
        Turn {
            _held: Some(pool.take(peer).await),
        }
    }

    /// Doors that answer anyone (for tests and benchmarks).
    pub(crate) fn open() -> Intake {
        let (_, trust) = watch::channel(Arc::new(RequestHeaderConfig::default()));
        Intake::new(AdmissionCallers::default(), trust, watch::channel(None).1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;

    fn from(peer: [u8; 4]) -> Request {
        let mut request = Request::new(Body::empty());
        request
            .extensions_mut()
            .insert(PeerAddress(IpAddr::from(peer)));
        request
    }

    #[tokio::test]
    async fn one_address_waits_for_its_own_turns_and_others_go_on() {
        let intake = Intake::open();
        let noisy = from([127, 0, 0, 2]);
        let mut held = Vec::new();
        let noisy = Intake::peer(&noisy);
        for _ in 0..PER_PEER {
            held.push(intake.turn(Caller::Unverified, noisy).await);
        }
        // The next one of the same address waits...
        let waiting = tokio::time::timeout(
            Duration::from_millis(50),
            intake.turn(Caller::Unverified, noisy),
        )
        .await;
        assert!(waiting.is_err());
        // ...while another address has its turn at once.
        let other = tokio::time::timeout(
            Duration::from_millis(50),
            intake.turn(Caller::Unverified, Intake::peer(&from([127, 0, 0, 1]))),
        )
        .await;
        assert!(other.is_ok());
        drop(other);
        drop(held);
    }

    #[test]
    fn without_callers_configured_anyone_may_call() {
        assert_eq!(
            Intake::open().caller(&from([10, 0, 0, 1])).unwrap(),
            Caller::Unverified
        );
        let (_, trust) = watch::channel(Arc::new(RequestHeaderConfig::default()));
        let required = Intake::new(
            AdmissionCallers {
                names: vec!["kube-apiserver-webhook-client".into()],
                ca: Vec::new(),
            },
            trust,
            watch::channel(None).1,
        );
        assert!(matches!(
            required.caller(&from([10, 0, 0, 1])),
            Err(ReviewError::Unauthorized)
        ));
    }

    /// With the doors' key, a review at the key's path is kube-apiserver's, and one at any other
    /// path (a door's without the key, or with another) is refused before its body is read,
    /// client certificates or not; a certificate still proves its caller on any path.
    #[test]
    fn with_the_doors_key_only_its_paths_are_answered() {
        let key = DoorKey::generate().unwrap();
        let at = |path: &str| {
            let mut request = from([10, 0, 0, 1]);
            *request.uri_mut() = path.parse().unwrap();
            request
        };
        let (_, trust) = watch::channel(Arc::new(RequestHeaderConfig::default()));
        let keyed = Intake::new(
            AdmissionCallers::default(),
            trust,
            watch::channel(Some(key.clone())).1,
        );
        let k = key.as_str();
        for path in [
            format!("/admission/{k}/evictions"),
            format!("/admission/{k}/evictions/standby"),
            format!("/admission/{k}/rulesets"),
        ] {
            assert_eq!(
                keyed.caller(&at(&path)).unwrap(),
                Caller::KubeApiserver,
                "{path}"
            );
        }
        let other = DoorKey::generate().unwrap();
        for path in [
            "/admission/evictions".to_owned(),
            "/admission/rulesets".to_owned(),
            format!("/admission/{}/evictions", other.as_str()),
        ] {
            assert!(
                matches!(keyed.caller(&at(&path)), Err(ReviewError::Unauthorized)),
                "{path}"
            );
        }
    }

    /// A review at the key's path proves its connection kube-apiserver's: it leaves the
    /// anonymous pool (where others could displace it) for the proven one; a review at another
    /// path leaves its connection where it is.
    #[test]
    fn a_review_at_the_keys_path_proves_its_connection() {
        use crate::auth::budget::{Budget, Limits, Port};
        let key = DoorKey::generate().unwrap();
        let (_, trust) = watch::channel(Arc::new(RequestHeaderConfig::default()));
        let keyed = Intake::new(
            AdmissionCallers::default(),
            trust,
            watch::channel(Some(key.clone())).1,
        );
        let budget = Budget::new(
            Limits {
                proven: 4,
                anonymous: 4,
            },
            Port::Admission,
        );
        let on_a_connection = |path: &str| {
            let seat = budget
                .admit(
                    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                    Arc::new(crate::auth::connection::Activity::default()),
                )
                .unwrap();
            let mut request = from([10, 0, 0, 1]);
            *request.uri_mut() = path.parse().unwrap();
            request.extensions_mut().insert(ConnectionSeat::new(seat));
            request
        };
        let refused = on_a_connection("/admission/evictions");
        assert!(keyed.caller(&refused).is_err());
        assert_eq!(budget.open(), (1, 0));
        let keyed_review = on_a_connection(&format!("/admission/{}/evictions", key.as_str()));
        assert_eq!(keyed.caller(&keyed_review).unwrap(), Caller::KubeApiserver);
        assert_eq!(budget.open(), (1, 1));
        // Its next review changes nothing; its connection's end gives the place back.
        assert_eq!(keyed.caller(&keyed_review).unwrap(), Caller::KubeApiserver);
        assert_eq!(budget.open(), (1, 1));
        drop(keyed_review);
        assert_eq!(budget.open(), (1, 0));
    }
}
