//! The target side of the health store: what each fact makes stale, for which namespaces and
//! which gates, and when it stops.

use super::*;
use crate::index::GateScope;
use crate::index::Index;
use entry::MAX_TOMBSTONES;
use std::sync::Arc;

fn target(resource: &str) -> Target {
    Target::of("example.com", "v1", resource)
}

fn ns(s: &str) -> Stream {
    Some(s.to_string())
}

/// A namespaced target of `resource`, watched everywhere and listed: current.
fn current(resource: &str) -> (TargetHealth, Target) {
    let h = TargetHealth::default();
    let t = target(resource);
    h.watching(&t, None);
    h.resolved(&t, true, &[None]);
    h.listed(&t, &None, Timestamp::UNIX_EPOCH);
    (h, t)
}

/// Marks object `object` ("namespace/name", on unknown nodes) of target `t` skipped by
/// `ruleset` (`None`: by none, undecodable); whether that was recorded.
fn skip(
    h: &TargetHealth,
    t: &Target,
    (uid, ruleset): (&str, Option<&str>),
    object: &str,
    reason: &str,
) -> bool {
    let (namespace, _) = object.split_once('/').unwrap();
    h.skipped(
        t,
        (uid, ruleset),
        Some(namespace),
        (object.into(), None),
        reason.into(),
    )
}

fn reasons(h: &TargetHealth, namespace: Option<&str>) -> Vec<String> {
    h.stale(namespace)
        .into_iter()
        .map(|s| match s.reason {
            Blind::NotWatched(reason) => format!("{}: {reason}", s.target.resource),
            other => format!("{}: {other}", s.target.resource),
        })
        .collect()
}

#[test]
fn a_target_is_stale_until_its_first_list_completes() {
    let h = TargetHealth::default();
    let t = target("things");
    h.watching(&t, None);
    assert_eq!(
        reasons(&h, None),
        ["things: its first list has not completed"]
    );
    h.resolved(&t, true, &[None]);
    assert_eq!(reasons(&h, Some("a")).len(), 1);
    h.listed(&t, &None, Timestamp::UNIX_EPOCH);
    assert!(reasons(&h, None).is_empty());
    assert!(reasons(&h, Some("a")).is_empty());
}

#[test]
fn a_failure_makes_it_stale_until_a_list_completes_again() {
    let (h, t) = current("things");
    h.failed(&t, &None, "forbidden".into());
    assert_eq!(reasons(&h, Some("a")), ["things: forbidden"]);
    h.listed(&t, &None, Timestamp::UNIX_EPOCH);
    assert!(reasons(&h, None).is_empty());
}

#[test]
fn a_failed_probe_marks_a_silent_watch_stale() {
    let (h, t) = current("things");
    h.probed(&t, &None, Some("listing did not answer within 10s".into()));
    assert_eq!(
        reasons(&h, None),
        ["things: listing did not answer within 10s"]
    );
    h.probed(&t, &None, None);
    assert!(reasons(&h, None).is_empty());
}

#[test]
fn only_targets_feeding_the_namespace_count() {
    let h = TargetHealth::default();
    let t = target("things");
    h.watching(&t, Some(["a".to_string(), "b".to_string()].into()));
    h.resolved(&t, true, &[ns("a"), ns("b")]);
    h.listed(&t, &ns("a"), Timestamp::UNIX_EPOCH);
    h.failed(&t, &ns("b"), "forbidden".into());
    assert!(reasons(&h, Some("a")).is_empty());
    assert!(reasons(&h, Some("c")).is_empty());
    assert_eq!(
        reasons(&h, Some("b")),
        ["things: in namespace b: forbidden"]
    );
    assert_eq!(reasons(&h, None), ["things: in namespace b: forbidden"]);
}

#[test]
fn a_cluster_scoped_target_does_not_feed_namespaces() {
    let h = TargetHealth::default();
    let t = target("nodes");
    h.watching(&t, None);
    h.resolved(&t, false, &[None]);
    h.failed(&t, &None, "forbidden".into());
    assert!(reasons(&h, Some("a")).is_empty());
    assert_eq!(reasons(&h, None), ["nodes: forbidden"]);
}

#[test]
fn a_restart_keeps_what_was_known_and_forget_drops_it() {
    let (h, t) = current("things");
    h.watching(&t, None);
    h.resolved(&t, true, &[None]);
    assert!(reasons(&h, None).is_empty());
    h.failed(&t, &None, "gone".into());
    h.forget(&t);
    assert!(reasons(&h, None).is_empty());
    // Reports of a watcher being stopped change nothing once it is forgotten.
    h.failed(&t, &None, "late".into());
    assert!(reasons(&h, None).is_empty());
}

fn reach(component: &str, nodes: bool, namespaces: &[&str]) -> Reach {
    Reach {
        component: component.into(),
        nodes,
        namespaces: (!namespaces.is_empty())
            .then(|| namespaces.iter().map(|n| n.to_string()).collect()),
    }
}

fn gate_reasons(h: &TargetHealth, scope: &GateScope) -> Vec<String> {
    h.stale_for_gate(scope)
        .into_iter()
        .map(|s| format!("{}: {}", s.target.resource, s.reason))
        .collect()
}

fn node(n: &str) -> GateScope {
    GateScope::Node(n.into())
}

fn component(c: &str) -> GateScope {
    GateScope::Component(c.into())
}

fn namespace(n: &str) -> GateScope {
    GateScope::Namespace(n.into())
}

/// Two targets, current: `vms` (ruleset `vm-rules`, component kubevirt, labels nodes, in
/// namespace a) and `pods` (ruleset `pod-rules`, component pods, no node label, anywhere).
fn two_targets() -> (TargetHealth, Target, Target) {
    let h = TargetHealth::default();
    let (vms, pods) = (target("vms"), target("pods"));
    h.watching(&vms, Some(["a".to_string()].into()));
    h.watching(&pods, None);
    for t in [&vms, &pods] {
        h.resolved(t, true, &[None]);
        h.listed(t, &None, Timestamp::UNIX_EPOCH);
    }
    h.reaches(
        &vms,
        [("vm-rules".to_string(), reach("kubevirt", true, &["a"]))].into(),
    );
    h.reaches(
        &pods,
        [("pod-rules".to_string(), reach("pods", false, &[]))].into(),
    );
    (h, vms, pods)
}

#[test]
fn gates_depend_on_the_targets_that_reach_them() {
    let h = TargetHealth::default();
    let (vms, pods) = (target("vms"), target("pods"));
    for t in [&vms, &pods] {
        h.watching(t, Some(["a".to_string()].into()));
        h.resolved(t, true, &[None]);
    }
    let names = |scope: &GateScope| -> Vec<String> {
        h.stale_for_gate(scope)
            .into_iter()
            .map(|s| s.target.resource)
            .collect()
    };
    let kubevirt = component("kubevirt");
    assert_eq!(names(&node("w1")), ["pods", "vms"], "unsaid: every gate");
    h.reaches(
        &vms,
        [("vm-rules".to_string(), reach("kubevirt", true, &["a"]))].into(),
    );
    h.reaches(
        &pods,
        [("pod-rules".to_string(), reach("pods", false, &["a"]))].into(),
    );
    assert_eq!(names(&node("w1")), ["vms"]);
    assert_eq!(names(&kubevirt), ["vms"]);
    assert!(names(&component("other")).is_empty());
    assert_eq!(names(&GateScope::Cluster), ["pods", "vms"]);
    assert!(names(&namespace("b")).is_empty());
    h.listed(&vms, &None, Timestamp::UNIX_EPOCH);
    assert!(names(&node("w1")).is_empty());
}

#[test]
fn a_ruleset_suspended_in_a_namespace_blinds_that_namespace_and_not_the_nodes() {
    let (h, vms, pods) = two_targets();
    h.suspended(&vms, "vm-rules", Some("a"));
    let suspended = "vms: is not evaluated by ruleset vm-rules: it is suspended in namespace a (it kept going over its evaluation budget there); make its rules cheaper or the objects there smaller (any change to its spec resumes it)";
    for scope in [component("kubevirt"), namespace("a"), GateScope::Cluster] {
        assert_eq!(gate_reasons(&h, &scope), [suspended], "{scope}");
    }
    for scope in [
        component("pods"),
        namespace("b"),
        // What changes there is skipped with its nodes (`unevaluated`), not every node.
        node("w1"),
    ] {
        assert!(gate_reasons(&h, &scope).is_empty(), "{scope}");
    }
    assert!(reasons(&h, Some("b")).is_empty(), "reads of b do not warn");
    h.ruleset_reset("vm-rules");
    h.suspended(&pods, "pod-rules", Some("b"));
    assert!(gate_reasons(&h, &node("w1")).is_empty());
    assert_eq!(gate_reasons(&h, &namespace("b")).len(), 1);
    assert_eq!(gate_reasons(&h, &component("pods")).len(), 1);
    h.ruleset_reset("pod-rules");
    h.dropped_events(&vms, "vm-rules", Some(["a".to_string()].into()));
    assert_eq!(gate_reasons(&h, &node("w9")).len(), 1, "dropped events");
}

#[test]
fn a_skipped_object_blinds_the_gates_of_its_node_or_of_every_node_when_unknown() {
    let (h, vms, _) = two_targets();
    let on = |nodes: &[&str]| Some(nodes.iter().map(|n| n.to_string()).collect());
    h.skipped(
        &vms,
        ("u1", Some("vm-rules")),
        Some("a"),
        ("a/vm-1".into(), on(&["w1", "w2"])),
        "over".into(),
    );
    assert_eq!(
        gate_reasons(&h, &node("w1")),
        ["vms: object a/vm-1 is skipped: over"]
    );
    assert_eq!(
        gate_reasons(&h, &node("w2")).len(),
        1,
        "a migration's target"
    );
    assert!(
        gate_reasons(&h, &node("w3")).is_empty(),
        "known to be elsewhere"
    );
    assert_eq!(gate_reasons(&h, &namespace("a")).len(), 1);
    assert!(gate_reasons(&h, &namespace("b")).is_empty());
    assert_eq!(gate_reasons(&h, &component("kubevirt")).len(), 1);
    assert!(gate_reasons(&h, &component("pods")).is_empty());

    // Its node cannot be known (its node label failed): every node's gate.
    skip(&h, &vms, ("u2", Some("vm-rules")), "a/vm-2", "fails");
    assert_eq!(
        gate_reasons(&h, &node("w3")),
        ["vms: object a/vm-2 is skipped: fails"]
    );
    // Undecodable: by every ruleset of the target covering its namespace.
    h.evaluated(&vms, "u2", Some("vm-rules"));
    skip(&h, &vms, ("u3", None), "b/x", "deep");
    assert!(
        gate_reasons(&h, &node("w3")).is_empty(),
        "no ruleset covers b"
    );
    skip(&h, &vms, ("u4", None), "a/x", "deep");
    assert_eq!(
        gate_reasons(&h, &node("w3")),
        ["vms: object a/x is skipped: deep"]
    );
    h.object_gone(&vms, "u4");
    assert!(gate_reasons(&h, &node("w3")).is_empty());
}

#[test]
fn a_ruleset_that_does_not_compile_blinds_what_it_would_reach() {
    let (h, vms, _) = two_targets();
    h.invalid(
        "broken",
        vms.clone(),
        reach("kubevirt", true, &["c"]),
        "rules[0] (Migrating).expression: undeclared reference".into(),
    );
    let broken = "vms: is not evaluated by ruleset broken: its rules do not compile (rules[0] (Migrating).expression: undeclared reference); fix the ruleset (kubectl describe ors broken)";
    assert_eq!(gate_reasons(&h, &node("w1")), [broken]);
    assert_eq!(gate_reasons(&h, &namespace("c")), [broken]);
    assert!(gate_reasons(&h, &namespace("a")).is_empty());
    assert!(gate_reasons(&h, &component("pods")).is_empty());
    assert_eq!(
        reasons(&h, Some("c")).len(),
        1,
        "reads of its namespace warn"
    );
    assert!(reasons(&h, Some("a")).is_empty());
    assert!(h.declares_component("kubevirt") && !h.declares_component("nothing"));
    h.ruleset_reset("broken");
    assert!(h.stale(None).is_empty());
    assert!(gate_reasons(&h, &node("w1")).is_empty());
}

#[test]
fn a_failed_discovery_is_stale_but_an_unserved_target_is_not() {
    let h = TargetHealth::default();
    let t = target("things");
    h.watching(&t, None);
    h.unresolved(&t, "discovery failed: timeout".into());
    assert_eq!(reasons(&h, None), ["things: discovery failed: timeout"]);
    h.not_served(&t);
    assert!(reasons(&h, None).is_empty());
}

#[test]
fn suspended_rulesets_dropped_events_and_skipped_objects_count_where_they_apply() {
    let (h, t) = current("things");
    assert!(h.stale(None).is_empty());

    h.suspended(&t, "costly", Some("a"));
    assert_eq!(
        reasons(&h, Some("a")),
        [
            "things: is not evaluated by ruleset costly: it is suspended in namespace a (it kept going over its evaluation budget there); make its rules cheaper or the objects there smaller (any change to its spec resumes it)"
        ]
    );
    assert!(reasons(&h, Some("b")).is_empty());
    h.ruleset_reset("costly");
    assert!(h.stale(None).is_empty());

    skip(
        &h,
        &t,
        ("u1", None),
        "b/deep",
        "it cannot be decoded: too deep",
    );
    assert_eq!(
        reasons(&h, Some("b")),
        ["things: object b/deep is skipped: it cannot be decoded: too deep"]
    );
    assert!(reasons(&h, Some("a")).is_empty());
    assert_eq!(h.stale(None).len(), 1);
    h.evaluated(&t, "u1", None);
    assert!(h.stale(None).is_empty());
    skip(&h, &t, ("u2", Some("r")), "b/big", "over");
    h.keep_skipped(&t, &None, &HashSet::new());
    assert!(h.stale(None).is_empty(), "gone from a new list");

    h.dropped_events(&t, "busy", None);
    assert_eq!(
        reasons(&h, Some("z")),
        ["things: lost events of ruleset busy (its evaluation fell behind); listing it again"]
    );
    h.relisted(&t);
    assert!(h.stale(None).is_empty());

    // Late, not lost: only the lag coming back under the bound clears it, not a list.
    let (lag, bound) = (Duration::from_secs(12), Duration::from_secs(5));
    let nodes = None;
    h.lagging(
        &t,
        ("slow", Some("a")),
        Some(["a".to_string()].into()),
        Some(LagSaid { lag, bound, nodes }),
    );
    assert_eq!(
        reasons(&h, Some("a")),
        [
            "things: is evaluated late by ruleset slow in namespace a: its oldest event not yet evaluated there has waited over 12s (EVALUATION_LAG_BOUND: 5s), so what changed since is not seen yet; make the ruleset's rules cheaper, or find what changes its objects so often (ifo_evaluation_lag_seconds, ifo_object_events_total)"
        ]
    );
    assert!(
        reasons(&h, Some("b")).is_empty(),
        "a namespace it does not cover"
    );
    h.relisted(&t);
    assert_eq!(reasons(&h, Some("a")).len(), 1);
    h.lagging(
        &t,
        ("slow", Some("a")),
        Some(["a".to_string()].into()),
        None,
    );
    assert!(h.stale(None).is_empty());
}

/// A blind spot in the model of [`gates_are_never_clear_while_a_ruleset_reaching_them_is_blind`].
#[derive(Clone, Debug)]
enum Spot {
    /// The ruleset dropped events or does not compile.
    Whole(usize),
    /// The ruleset's evaluation lags in namespace `ns`, its late changes on `nodes` (`None`:
    /// unknown).
    Lagging {
        ruleset: usize,
        ns: String,
        nodes: Option<BTreeSet<String>>,
    },
    /// The ruleset is suspended in a namespace (what changes there is an `Object` spot).
    Suspended(usize, String),
    /// An object (`uid`) in namespace `ns` is skipped by the ruleset (`None`: undecodable),
    /// on `nodes` (`None`: unknown).
    Object {
        uid: String,
        ruleset: Option<usize>,
        ns: String,
        nodes: Option<BTreeSet<String>>,
    },
}

/// Some of the model's nodes, at random; `None` (unknown) half the time.
fn some_nodes(rng: &mut fastrand::Rng) -> Option<BTreeSet<String>> {
    const NODES: [&str; 3] = ["n1", "n2", "n3"];
    rng.bool().then(|| {
        NODES
            .iter()
            .filter(|_| rng.bool())
            .map(|n| n.to_string())
            .collect()
    })
}

/// Random rulesets of one target, random blind spots coming and going: whenever the model
/// holds a blind spot of a ruleset that can put an operation in a gate's scope (by the
/// ruleset's component, namespaces and node labels alone), that gate is not clear.
#[test]
fn gates_are_never_clear_while_a_ruleset_reaching_them_is_blind() {
    const NAMESPACES: [&str; 3] = ["a", "b", "c"];
    const NODES: [&str; 3] = ["n1", "n2", "n3"];
    const COMPONENTS: [&str; 2] = ["k", "m"];
    let mut rng = fastrand::Rng::with_seed(36);
    for round in 0..300 {
        let (h, t) = current("things");
        let rulesets: Vec<Reach> = (0..rng.usize(1..4))
            .map(|_| Reach {
                component: COMPONENTS[rng.usize(..2)].into(),
                nodes: rng.bool(),
                namespaces: rng.bool().then(|| {
                    NAMESPACES
                        .iter()
                        .filter(|_| rng.bool())
                        .map(|n| n.to_string())
                        .collect()
                }),
            })
            .collect();
        let name = |i: usize| format!("rs-{i}");
        h.reaches(
            &t,
            rulesets
                .iter()
                .enumerate()
                .map(|(i, r)| (name(i), r.clone()))
                .collect(),
        );
        let mut spots: Vec<Spot> = Vec::new();
        // Deleted objects: what is learned of them after is ignored.
        let mut gone: HashSet<String> = HashSet::new();
        for step in 0..40 {
            let i = rng.usize(..rulesets.len());
            match rng.usize(..10) {
                0 => {
                    let ns = NAMESPACES[rng.usize(..3)].to_string();
                    h.suspended(&t, &name(i), Some(&ns));
                    spots.push(Spot::Suspended(i, ns));
                }
                1 => {
                    h.dropped_events(&t, &name(i), rulesets[i].namespaces.clone());
                    spots.push(Spot::Whole(i));
                }
                2 => {
                    h.invalid(&name(i), t.clone(), rulesets[i].clone(), "bad".into());
                    spots.push(Spot::Whole(i));
                }
                3 | 4 => {
                    let uid = format!("u{}", rng.usize(..6));
                    let ruleset = rng.bool().then_some(i);
                    let ns = NAMESPACES[rng.usize(..3)].to_string();
                    let nodes = some_nodes(&mut rng);
                    let recorded = h.skipped(
                        &t,
                        (&uid, ruleset.map(name).as_deref()),
                        Some(&ns),
                        (format!("{ns}/{uid}"), nodes.clone()),
                        "why".into(),
                    );
                    assert_eq!(recorded, !gone.contains(&uid));
                    if !recorded {
                        continue;
                    }
                    spots.retain(|s| {
                        !matches!(s, Spot::Object { uid: u, ruleset: r, .. } if *u == uid && *r == ruleset)
                    });
                    spots.push(Spot::Object {
                        uid,
                        ruleset,
                        ns,
                        nodes,
                    });
                }
                5 => {
                    h.ruleset_reset(&name(i));
                    spots.retain(|s| match s {
                        Spot::Whole(r)
                        | Spot::Lagging { ruleset: r, .. }
                        | Spot::Suspended(r, _) => *r != i,
                        Spot::Object { ruleset, .. } => *ruleset != Some(i),
                    });
                }
                8 => {
                    let ns = NAMESPACES[rng.usize(..3)].to_string();
                    let nodes = some_nodes(&mut rng);
                    let said = LagSaid {
                        lag: Duration::from_secs(rng.u64(6..60)),
                        bound: Duration::from_secs(5),
                        nodes: nodes.clone(),
                    };
                    let covered = Some([ns.clone()].into());
                    h.lagging(&t, (&name(i), Some(&ns)), covered, Some(said));
                    spots.retain(
                        |s| !matches!(s, Spot::Lagging { ruleset, ns: n, .. } if *ruleset == i && *n == ns),
                    );
                    spots.push(Spot::Lagging {
                        ruleset: i,
                        ns,
                        nodes,
                    });
                }
                9 => {
                    let ns = NAMESPACES[rng.usize(..3)].to_string();
                    let covered = Some([ns.clone()].into());
                    h.lagging(&t, (&name(i), Some(&ns)), covered, None);
                    spots.retain(
                        |s| !matches!(s, Spot::Lagging { ruleset, ns: n, .. } if *ruleset == i && *n == ns),
                    );
                }
                6 => {
                    let uid = format!("u{}", rng.usize(..6));
                    h.object_gone(&t, &uid);
                    gone.insert(uid.clone());
                    spots.retain(|s| !matches!(s, Spot::Object { uid: u, .. } if *u == uid));
                }
                _ => {
                    let uid = format!("u{}", rng.usize(..6));
                    h.evaluated(&t, &uid, Some(&name(i)));
                    spots.retain(|s| {
                        !matches!(s, Spot::Object { uid: u, ruleset: Some(r), .. } if *u == uid && *r == i)
                    });
                }
            }
            let scopes = std::iter::once(GateScope::Cluster)
                .chain(NODES.into_iter().map(node))
                .chain(COMPONENTS.into_iter().map(component))
                .chain(NAMESPACES.into_iter().map(namespace));
            for scope in scopes {
                let reaching = |r: &Reach| match &scope {
                    GateScope::Cluster => true,
                    GateScope::Node(_) => r.nodes,
                    GateScope::Component(c) => r.component == *c,
                    GateScope::Namespace(ns) => {
                        r.namespaces.as_ref().is_none_or(|set| set.contains(ns))
                    }
                };
                let blind = spots.iter().find(|spot| match spot {
                    Spot::Whole(i) => reaching(&rulesets[*i]),
                    Spot::Lagging { ruleset, ns, nodes } => {
                        reaching(&rulesets[*ruleset])
                            && match &scope {
                                GateScope::Node(n) => {
                                    nodes.as_ref().is_none_or(|set| set.contains(n))
                                }
                                GateScope::Namespace(n) => n == ns,
                                _ => true,
                            }
                    }
                    // Nodes: what changes there is skipped with its nodes (an `Object`).
                    Spot::Suspended(i, ns) => {
                        reaching(&rulesets[*i])
                            && match &scope {
                                GateScope::Node(_) => false,
                                GateScope::Namespace(n) => n == ns,
                                _ => true,
                            }
                    }
                    Spot::Object {
                        ruleset, ns, nodes, ..
                    } => {
                        let by = |r: &Reach| {
                            reaching(r) && r.namespaces.as_ref().is_none_or(|set| set.contains(ns))
                        };
                        let by_ruleset = match ruleset {
                            Some(i) => by(&rulesets[*i]),
                            None => rulesets.iter().any(by),
                        };
                        let here = match &scope {
                            GateScope::Node(n) => nodes.as_ref().is_none_or(|set| set.contains(n)),
                            GateScope::Namespace(n) => ns == n,
                            _ => true,
                        };
                        by_ruleset && here
                    }
                });
                if let Some(spot) = blind {
                    assert!(
                        !h.stale_for_gate(&scope).is_empty(),
                        "round {round}, step {step}: gate {scope} would be clear while {spot:?} of {rulesets:?}"
                    );
                }
            }
        }
        for i in 0..rulesets.len() {
            h.ruleset_reset(&name(i));
        }
        h.relisted(&t);
        h.keep_skipped(&t, &None, &HashSet::new());
        assert!(h.stale(None).is_empty(), "round {round}: all fixed");
    }
}

/// A deleted object's evaluation still queued on a lane finds it over budget: that is
/// ignored. Tombstones are bounded: the oldest go (the lane's own deletion clears then).
#[test]
fn what_is_learned_of_a_deleted_object_is_ignored() {
    let (h, t) = current("things");
    let skip = |uid: &str| skip(&h, &t, (uid, Some("r")), &format!("a/{uid}"), "over");
    assert!(skip("u1"));
    h.object_gone(&t, "u1");
    assert!(h.stale(None).is_empty());
    assert!(!skip("u1"), "deleted: its late result is ignored");
    assert!(h.stale(None).is_empty());
    for i in 0..MAX_TOMBSTONES {
        h.object_gone(&t, &format!("other-{i}"));
    }
    assert!(
        skip("u1"),
        "forgotten after {MAX_TOMBSTONES} more deletions"
    );
    h.evaluated(&t, "u1", Some("r"));
    assert!(h.stale(None).is_empty());
}

/// One object whose skip mark flips every 150 ms for 6 s (a tenant's costly object patched
/// in a loop), with the reporter running: each flip changes what the gates answer, and
/// every `FeedsChanged` is an event for every open gate watch. The first change goes out
/// after the 100 ms gathering; the rest at most about once a second (40 events before).
#[tokio::test(start_paused = true)]
async fn a_flapping_skip_mark_changes_the_feeds_about_once_a_second() {
    use tokio::time::{Instant, sleep};
    let (h, t) = current("things");
    let h = Arc::new(h);
    let (readiness, pending) = Readiness::new("the test");
    pending.done();
    let index = Index::new(1, 4096, 4096).into_handles();
    let mut events = index.reader.subscribe();
    let reporter = tokio::spawn({
        let (h, feeds) = (h.clone(), index.feeds.clone());
        async move { h.report_to(feeds, readiness).await }
    });
    // What starting reported; then a quiet while.
    sleep(Duration::from_secs(5)).await;
    while events.try_recv().is_ok() {}

    let flips = 40;
    let started = Instant::now();
    // When each FeedsChanged came, after `started`.
    let seen = Arc::new(Mutex::new(Vec::new()));
    let collector = tokio::spawn({
        let seen = seen.clone();
        async move {
            while let Ok(event) = events.recv().await {
                assert_eq!(event.kind, crate::index::EventKind::FeedsChanged);
                seen.lock().push(started.elapsed());
            }
        }
    });
    for i in 0..flips {
        if i % 2 == 0 {
            skip(&h, &t, ("u1", Some("r")), "a/slow", "over");
        } else {
            h.evaluated(&t, "u1", Some("r"));
        }
        sleep(Duration::from_millis(150)).await;
    }
    sleep(Duration::from_secs(2)).await;
    let took = started.elapsed();
    let (count, first) = {
        let seen = seen.lock();
        (seen.len(), seen.first().copied())
    };
    println!("{flips} flips in {took:?}: {count} FeedsChanged, the first after {first:?}");
    assert!(
        first.is_some_and(|f| f <= Duration::from_millis(150)),
        "the first change is prompt: {first:?}"
    );
    let most = took.as_secs() as usize + 1;
    assert!(
        count <= most,
        "{count} FeedsChanged in {took:?} (at most {most})"
    );
    reporter.abort();
    collector.abort();
}
