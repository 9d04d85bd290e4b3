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
    let noisy = Intake::peer(&from([127, 0, 0, 2]));
    let large = Some(1 << 20);
    let mut held = Vec::new();
    for _ in 0..PER_PEER_BYTES >> 20 {
        held.push(
            intake
                .read_turn(
                    Caller::Unverified,
                    noisy,
                    large,
                    super::super::review::MAX_LARGE_BYTES,
                )
                .await
                .unwrap(),
        );
    }
    // The next one of the same address waits, however small...
    let waiting = tokio::time::timeout(
        Duration::from_millis(50),
        intake.read_turn(Caller::Unverified, noisy, Some(10), 1 << 10),
    )
    .await;
    assert!(waiting.is_err());
    // ...while another address has its turn at once.
    let other = tokio::time::timeout(
        Duration::from_millis(50),
        intake.read_turn(
            Caller::Unverified,
            Intake::peer(&from([127, 0, 0, 1])),
            large,
            1 << 20,
        ),
    )
    .await;
    assert!(other.is_ok());
    drop(other);
    drop(held);
}

/// Bodies that never come, from many addresses, in every byte of the pool: a review of an
/// eviction's size is read at once, and the reader whose turn it took stops with
/// `TakenBack` (answered 429).
#[tokio::test]
async fn bodies_that_never_come_give_way_to_a_review_that_does() {
    let intake = Intake::open();
    let share = 1 << 20;
    let mut never: Vec<ReadTurn> = Vec::new();
    for last in 0..(ANONYMOUS_BYTES / share) as u8 {
        let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 1, last));
        never.push(
            intake
                .read_turn(Caller::Unverified, peer, Some(share as u64), share)
                .await
                .unwrap(),
        );
    }
    let kube_apiserver = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let mut review = tokio::time::timeout(
        Duration::from_millis(50),
        intake.read_turn(Caller::Unverified, kube_apiserver, Some(2_000), 64 << 10),
    )
    .await
    .expect("read at once")
    .unwrap();
    assert_eq!(
        review
            .read(async { Ok::<_, ReviewError>(2_000) })
            .await
            .unwrap(),
        2_000
    );
    let mut stopped = 0;
    for turn in &mut never {
        let read = turn.read(async {
            std::future::pending::<()>().await;
            Ok::<_, ReviewError>(())
        });
        if let Ok(Err(ReviewError::TakenBack)) =
            tokio::time::timeout(Duration::from_millis(20), read).await
        {
            stopped += 1;
        }
    }
    assert_eq!(stopped, 1, "one body that never came gave its turn");
}

/// A body that says it is over the door's limit is refused before it takes a turn.
#[tokio::test]
async fn a_body_over_the_limit_is_refused_before_its_turn() {
    let intake = Intake::open();
    let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    assert!(matches!(
        intake
            .read_turn(Caller::Unverified, peer, Some(65), 64)
            .await,
        Err(ReviewError::TooLarge { limit: 64 })
    ));
    assert_eq!(intake.anonymous.held(peer), (0, 0));
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

/// A large body read and waiting for its turn to be parsed still counts among the bodies read,
/// and its turn can still be taken back: what waits for a parse is bounded as what is read.
#[tokio::test]
async fn a_body_waiting_for_its_parse_still_counts_and_can_be_taken_back() {
    let intake = Intake::open();
    // Every turn to parse is held by others.
    let mut parsing = Vec::new();
    for last in 0..(LARGE / LARGE_PER_PEER) as u8 {
        for _ in 0..LARGE_PER_PEER {
            let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 2, last));
            parsing.push(intake.parse_turn(Caller::Unverified, peer).await);
        }
    }
    // Bodies read, in every byte of the pool, wait for a turn to be parsed.
    let mut waiting = Vec::new();
    for last in 0..(ANONYMOUS_BYTES / PER_PEER_BYTES) as u8 {
        let peer = IpAddr::V4(Ipv4Addr::new(127, 0, 1, last));
        let mut turn = intake
            .read_turn(
                Caller::Unverified,
                peer,
                Some(PER_PEER_BYTES as u64),
                PER_PEER_BYTES,
            )
            .await
            .unwrap();
        turn.read(async { Ok::<_, ReviewError>(()) }).await.unwrap();
        waiting.push((peer, turn));
    }
    let (in_all, _) = intake.anonymous.held(IpAddr::V4(Ipv4Addr::LOCALHOST));
    assert_eq!(in_all, ANONYMOUS_BYTES / UNIT);
    // kube-apiserver's review has its turn at once, taken from one of them.
    let _review = tokio::time::timeout(
        Duration::from_millis(50),
        intake.read_turn(
            Caller::Unverified,
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            Some(2_000),
            64 << 10,
        ),
    )
    .await
    .expect("read at once")
    .unwrap();
    let mut stopped = 0;
    for (peer, turn) in &mut waiting {
        let parse = turn.until(intake.parse_turn(Caller::Unverified, *peer));
        if let Ok(Err(ReviewError::TakenBack)) =
            tokio::time::timeout(Duration::from_millis(20), parse).await
        {
            stopped += 1;
        }
    }
    assert_eq!(
        stopped, 1,
        "one wait for a parse stopped, its turn taken back"
    );
    drop(parsing);
}
