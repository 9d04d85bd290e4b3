//! The inventory's unit tests: names listed, watched and failing; what is reported; cordons and
//! overrides kept.
use super::*;
use crate::index::Index;

#[test]
fn a_name_is_unknown_until_listed_then_present_or_absent() {
    let inventory = Inventory::default();
    let unknown = inventory.presence(Kind::Node, "w1");
    assert_eq!(
        unknown,
        Presence::Unknown("the cluster's nodes have not been listed yet".into())
    );
    assert!(!inventory.is_synced(Kind::Node));
    inventory.listed(Kind::Node, ["w1"]);
    assert!(inventory.is_synced(Kind::Node));
    assert_eq!(inventory.presence(Kind::Node, "w1"), Presence::Present);
    assert_eq!(inventory.presence(Kind::Node, "w2"), Presence::Absent);
    // Each kind on its own.
    assert!(matches!(
        inventory.presence(Kind::Namespace, "w1"),
        Presence::Unknown(_)
    ));
    inventory.applied(Kind::Node, "w2", Kept::default());
    assert_eq!(inventory.presence(Kind::Node, "w2"), Presence::Present);
    inventory.deleted(Kind::Node, "w1");
    assert_eq!(inventory.presence(Kind::Node, "w1"), Presence::Absent);
}

#[test]
fn a_failing_watch_makes_unknown_names_unknown_until_a_list_completes() {
    let inventory = Inventory::default();
    inventory.listed(Kind::Namespace, ["demo"]);
    inventory.failed(
        Kind::Namespace,
        "list failed: namespaces is forbidden".into(),
    );
    assert!(!inventory.is_synced(Kind::Namespace));
    inventory.assert_presences(
        Kind::Namespace,
        &[
            (
                "other",
                Presence::Unknown(
                    "the watch of the cluster's namespaces is failing: list failed: namespaces is forbidden"
                        .into(),
                ),
            ),
            // Known as of the last list.
            ("demo", Presence::Present),
        ],
    );
    // A relist replaces the names.
    inventory.listed(Kind::Namespace, ["other"]);
    inventory.assert_presences(
        Kind::Namespace,
        &[("demo", Presence::Absent), ("other", Presence::Present)],
    );
}

fn overridden(reason: &str, until: Option<&str>, now: Timestamp) -> Kept {
    Kept::overridden(reason, until, now)
}

/// Since when the override of `name` has been seen.
fn override_since(names: &Names, name: &str) -> Timestamp {
    names.names[name]
        .maintenance_override
        .as_ref()
        .unwrap()
        .since()
}

#[test]
fn only_changes_are_reported() {
    let mut names = Names::default();
    let a = || [("a".into(), Kept::default())].into_iter().collect();
    assert!(names.listed(a()));
    assert!(!names.listed(a()));
    assert!(names.applied("b".into(), Kept::default()));
    assert!(
        !names.applied("b".into(), Kept::default()),
        "an update of a known object that changes nothing a gate shows"
    );
    assert!(names.deleted("b"));
    assert!(!names.deleted("b"));
    assert!(names.failed("forbidden".into()));
    assert!(!names.failed("forbidden".into()), "the same failure again");
    assert!(names.failed("timeout".into()));
    assert!(names.listed(a()));
}

#[test]
fn an_override_set_changed_or_removed_is_a_change_and_keeps_when_it_was_first_seen() {
    let mut names = Names::default();
    let t0: Timestamp = "2026-11-22T10:00:00Z".parse().unwrap();
    let later: Timestamp = "2026-11-22T10:05:00Z".parse().unwrap();
    assert!(names.listed([("a".into(), Kept::default())].into_iter().collect()));
    assert!(names.applied("a".into(), overridden("INC-1", None, t0)));
    // The Node changes otherwise (read again later): the same override, seen since t0.
    assert!(!names.applied("a".into(), overridden("INC-1", None, later)));
    assert_eq!(override_since(&names, "a"), t0);
    // A relist finds it as it was: no change.
    let relisted = [("a".into(), overridden("INC-1", None, later))]
        .into_iter()
        .collect();
    assert!(!names.listed(relisted));
    assert_eq!(override_since(&names, "a"), t0);
    // An end set, a new reason, the override removed: each a change.
    assert!(names.applied(
        "a".into(),
        overridden("INC-1", Some("2026-11-22T12:00:00Z"), later)
    ));
    assert!(names.applied(
        "a".into(),
        overridden("INC-2", Some("2026-11-22T12:00:00Z"), later)
    ));
    assert!(names.applied("a".into(), Kept::default()));
}

#[test]
fn a_cordon_keeps_its_earliest_time_while_it_stays_and_each_change_is_reported() {
    let mut names = Names::default();
    let at = |s: &str| s.parse::<Timestamp>().unwrap();
    assert!(names.listed([("w1".into(), Kept::default())].into_iter().collect()));
    assert!(names.applied("w1".into(), Kept::cordoned(at("2026-11-27T10:00:00Z"))));
    // Read again with a later time (the same manager wrote the Node again): the earliest
    // stays, and nothing a gate shows changed.
    assert!(!names.applied("w1".into(), Kept::cordoned(at("2026-11-27T10:30:00Z"))));
    assert_eq!(
        names.names["w1"].cordoned_since,
        Some(at("2026-11-27T10:00:00Z"))
    );
    // Uncordoned, then cordoned again: a new time.
    assert!(names.applied("w1".into(), Kept::default()));
    assert!(names.applied("w1".into(), Kept::cordoned(at("2026-11-27T11:00:00Z"))));
    assert_eq!(
        names.names["w1"].cordoned_since,
        Some(at("2026-11-27T11:00:00Z"))
    );
}

#[test]
fn the_guard_is_told_of_an_override_only_while_it_is_in_force() {
    let inventory = Inventory::default();
    inventory.listed(Kind::Node, ["w1", "w2", "w3", "w4"]);
    let now = Timestamp::now();
    let hour = jiff::SignedDuration::from_hours(1);
    let ahead = (now + hour).to_string();
    let past = (now - hour).to_string();
    inventory.applied(Kind::Node, "w1", overridden("INC-1", None, now));
    inventory.applied(Kind::Node, "w2", overridden("INC-2", Some(&ahead), now));
    inventory.applied(Kind::Node, "w3", overridden("INC-3", Some(&past), now));
    inventory.applied(Kind::Node, "w4", overridden("INC-4", Some("soon"), now));
    let reason = |node: &str| inventory.node(node).unwrap().maintenance_override;
    assert_eq!(reason("w1").as_deref(), Some("INC-1"));
    assert_eq!(reason("w2").as_deref(), Some("INC-2"));
    assert_eq!(reason("w3"), None, "its end has passed");
    assert_eq!(
        reason("w4"),
        None,
        "an end that cannot be read: not in force"
    );
    // Still known to the gate, in force or not.
    assert!(inventory.node_override("w3").is_some());
    assert_eq!(inventory.overrides().len(), 4);
    // What wakes the reporter: the end of w2's, the only one ahead.
    assert_eq!(
        inventory.next_override_end(now),
        Some(ahead.parse().unwrap())
    );
    // The series: the overrides in force.
    let series = override_series(&inventory.overrides(), now);
    let nodes: Vec<&str> = series.iter().map(|s| s.node.as_str()).collect();
    assert_eq!(nodes, ["w1", "w2"]);
    assert_eq!(
        series[1].end,
        Some(ahead.parse::<Timestamp>().unwrap().as_second())
    );
    assert_eq!(series[0].end, None);
    assert_eq!(series[0].since, now.as_second());
}

/// An inventory reporting to a new index, the task that reports (to abort at the end), and
/// the index's events.
fn reporting() -> (Arc<Inventory>, tokio::task::JoinHandle<()>, IndexEvents) {
    let inventory = Arc::new(Inventory::default());
    let index = Index::new(100, 64, 64).into_handles();
    let reporter = tokio::spawn(inventory.clone().report_to(index.scopes.clone()));
    (inventory, reporter, index.reader.subscribe())
}

type IndexEvents = tokio::sync::broadcast::Receiver<crate::index::Event>;

#[tokio::test(start_paused = true)]
async fn the_index_takes_a_resource_version_for_a_burst_of_changes() {
    let (inventory, reporter, mut events) = reporting();
    inventory.listed(Kind::Node, ["w1", "w2"]);
    inventory.applied(Kind::Node, "w3", Kept::default());
    let event = events.recv().await.unwrap();
    assert_eq!(event.kind, crate::index::EventKind::FeedsChanged);
    // Nothing changed: nothing more.
    inventory.applied(Kind::Node, "w3", Kept::default());
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(events.try_recv().is_err());
    reporter.abort();
}

#[tokio::test(start_paused = true)]
async fn the_end_of_an_override_is_reported_with_no_event_of_its_node() {
    let (inventory, reporter, mut events) = reporting();
    let now = Timestamp::now();
    let end = (now + jiff::SignedDuration::from_secs(30)).to_string();
    inventory.listed(Kind::Node, ["w1"]);
    inventory.applied(Kind::Node, "w1", overridden("INC-1", Some(&end), now));
    let set = events.recv().await.unwrap();
    assert_eq!(set.kind, crate::index::EventKind::FeedsChanged);
    let before = tokio::time::Instant::now();
    let ended = events.recv().await.unwrap();
    assert_eq!(ended.kind, crate::index::EventKind::FeedsChanged);
    assert!(
        before.elapsed() >= Duration::from_secs(29),
        "woken at the end: {:?}",
        before.elapsed()
    );
    reporter.abort();
}
