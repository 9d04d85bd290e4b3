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

#[tokio::test]
async fn a_waiter_that_went_is_forgotten_with_its_address() {
    let turns = FairTurns::new(1, 1);
    let held = turns.take(ip(2)).await;
    // A thousand addresses wait and go (their reviews timed out, or their connections were
    // displaced): none is remembered.
    for last in 0..250u8 {
        for third in 0..4u8 {
            let address = IpAddr::V4(Ipv4Addr::new(127, 1, third, last));
            let mut waiting = Box::pin(turns.take(address));
            assert!(futures::poll!(&mut waiting).is_pending());
        }
    }
    assert_eq!(turns.addresses(), 1);
    drop(held);
    assert_eq!(turns.addresses(), 0);
}

#[tokio::test]
async fn an_addresss_own_waiters_go_first_in_order() {
    let turns = FairTurns::new(4, 2);
    // An address holds its share (2 units); its next waits.
    let a = turns.take_revocable(ip(2), 2).await;
    let mut first = Box::pin(turns.take_revocable(ip(2), 1));
    assert!(futures::poll!(&mut first).is_pending());
    drop(a);
    let first = tokio::time::timeout(Duration::from_secs(1), first)
        .await
        .expect("its first waiter");
    // It holds 1 of its 2: its next, of 2 units, waits; one of 1 unit after it would fit,
    // but does not go ahead of it.
    let mut second = Box::pin(turns.take_revocable(ip(2), 2));
    assert!(futures::poll!(&mut second).is_pending());
    assert!(
        within_units(&turns, ip(2), 1).await.is_none(),
        "behind its own waiter"
    );
    drop(first);
    tokio::time::timeout(Duration::from_secs(1), second)
        .await
        .expect("its waiter in order");
}

#[tokio::test]
async fn an_addresss_waiter_takes_back_when_the_next_of_its_address_comes() {
    let turns = FairTurns::new(100, 100);
    let a = turns.take_revocable(ip(2), 50).await;
    let b = turns.take_revocable(ip(3), 50).await;
    // kube-apiserver's large review would hold more than either: it waits.
    let mut large = Box::pin(turns.take_revocable(ip(1), 60));
    assert!(futures::poll!(&mut large).is_pending());
    // One address gives its turn back and the other takes more: not enough is free for the
    // waiter, and the heavier one now holds more than the waiter would.
    drop(b);
    let more = within_units(&turns, ip(2), 40).await.expect("fits");
    assert!(futures::poll!(&mut large).is_pending());
    // The next review of kube-apiserver's address takes back for its first waiter.
    let mut next = Box::pin(turns.take_revocable(ip(1), 2));
    let _ = futures::poll!(&mut next);
    let _large = tokio::time::timeout(Duration::from_secs(1), large)
        .await
        .expect("its first waiter had its turn");
    assert_eq!(turns.held(ip(1)).1, 60);
    drop((a, more));
}

async fn within_units(turns: &FairTurns, address: IpAddr, units: usize) -> Option<FairTurn> {
    tokio::time::timeout(
        Duration::from_millis(20),
        turns.take_revocable(address, units),
    )
    .await
    .ok()
}
