//! The controller's unit tests.

use super::*;

#[test]
fn rulesets_deleted_while_not_watched_are_gone_after_a_restart_too() {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    let seen = ["kept".to_string()];
    // A controller started again: no entries, but detection still knows every ruleset.
    let known = names(&["kept", "deleted-meanwhile", "invalid-deleted"]);
    assert_eq!(
        gone(&HashMap::new(), known, &seen),
        names(&["deleted-meanwhile", "invalid-deleted"])
    );
    // A relist of a running controller: nothing known but its entries.
    assert!(gone(&HashMap::new(), BTreeSet::new(), &seen).is_empty());
}

/// A status as [`desired`] makes it for a watched ruleset with `active` operations,
/// skipping an object or not, ready or with its watch failing.
fn status_of(active: usize, skipping: bool, failing: bool) -> RuleSetStatus {
    let mut health = crate::detect::RuleSetHealth {
        watch: if failing {
            crate::detect::WatchState::Failed("forbidden".into())
        } else {
            crate::detect::WatchState::Active
        },
        ..Default::default()
    };
    if skipping {
        health.skipped.insert("u1".into(), "a/x: over".into());
    }
    desired(
        &Observed {
            generation: Some(1),
            invalid: None,
            health,
            active_operations: active,
            operation_durations: Vec::new(),
            schema: None,
        },
        None,
    )
}

/// Writes over `seconds` of 2 s ticks for a ruleset whose status at tick `i` is
/// `at(i)`, with `interval` between the writes nobody waits on; and the tick of each.
fn writes(seconds: u64, interval: Duration, at: impl Fn(u64) -> RuleSetStatus) -> Vec<u64> {
    let start = tokio::time::Instant::now();
    let (mut written, mut written_at) = (Some(at(0)), Some(start));
    let mut ticks = Vec::new();
    for tick in 1..=seconds / STATUS_INTERVAL.as_secs() {
        let now = start + STATUS_INTERVAL * tick as u32;
        let status = at(tick);
        if due(written.as_ref(), written_at, &status, interval, now) {
            written = Some(status);
            written_at = Some(now);
            ticks.push(tick);
        }
    }
    ticks
}

/// 240 s of a busy ruleset, written at first (tick 0): a count that changes at every 2 s
/// tick, and a condition that flips at every tick, are written about once a minute (before:
/// the flips at every tick, 120 writes, and the count every 10 s, 24); a change of `Ready`
/// goes out at the next tick; the first change after a quiet minute too; a flip and its
/// return within the minute are not written at all.
#[test]
fn what_nobody_waits_on_is_written_once_a_minute() {
    let minute = Duration::from_secs(60);
    let counting = writes(240, minute, |i| status_of(i as usize, false, false));
    println!("a count changing every 2 s: writes at ticks {counting:?} of 240 s");
    assert_eq!(counting, [30, 60, 90, 120]);
    let flapping = writes(240, minute, |i| status_of(1, i % 2 == 1, false));
    println!("a condition flipping every 2 s: writes at ticks {flapping:?} of 240 s");
    assert_eq!(flapping, [31, 62, 93]);
    let both = writes(240, minute, |i| status_of(i as usize, i % 2 == 1, false));
    assert_eq!(both, [30, 60, 90, 120]);

    // Ready changes (the watch fails at tick 5, works again at tick 8): at once.
    let ready = writes(240, minute, |i| status_of(1, false, (5..8).contains(&i)));
    assert_eq!(ready, [5, 8]);
    // The first change after a quiet minute goes out at the next tick; its return a
    // minute after.
    let blip = writes(240, minute, |i| status_of(1, (31..33).contains(&i), false));
    assert_eq!(blip, [31, 61]);
    // A flip and its return within the minute: nothing to write.
    let quick = writes(240, minute, |i| {
        status_of(1, i == 1 || (3..5).contains(&i), false)
    });
    assert!(quick.is_empty(), "{quick:?}");
}
