//! The compile-time estimate and the runtime budget.

use std::sync::LazyLock;
use std::time::Duration;

use serde_json::{Value as Json, json};

use super::estimate::{
    ASSUMED_LIST_SIZE, MAX_COMPREHENSION_DEPTH, MAX_ESTIMATED_COST, MAX_LITERAL_RANGE, estimate,
};
use super::*;

static ENGINE: LazyLock<Engine> = LazyLock::new(Engine::new);

fn compile_err(src: &str) -> String {
    match ENGINE.compile(src) {
        Ok(_) => panic!("{src} should not compile"),
        Err(e) => e.message,
    }
}

fn cost_of(src: &str) -> u64 {
    let program = cel::Env::stdlib().compile(src).unwrap();
    estimate(program.expression()).cost
}

fn rule(operation: &str, src: &str) -> RuleExprs {
    RuleExprs {
        operation: operation.into(),
        matches: ENGINE.compile(src).unwrap(),
        message: None,
        outcome: None,
        start_time: None,
        progress: None,
        stalled: None,
        schedule: None,
    }
}

fn ruleset(rules: Vec<RuleExprs>) -> RuleSetExprs {
    RuleSetExprs {
        rules,
        label_expressions: vec![],
    }
}

fn budget(cost_limit: u64, timeout_ms: u64) -> Budget {
    Budget {
        cost_limit,
        timeout: Duration::from_millis(timeout_ms),
    }
}

fn object() -> Json {
    json!({"metadata": {"name": "vm", "namespace": "ns"},
           "status": {"conditions": [{"type": "Ready"}, {"type": "Paused"}], "n": 5000}})
}

/// A rule that goes through 5000 elements computed at run time, then a cheap one.
fn heavy_then_light() -> RuleSetExprs {
    ruleset(vec![
        rule("Heavy", "lists.range(object.status.n).all(i, i >= 0)"),
        rule("Light", "object.metadata.name == 'vm'"),
    ])
}

fn over_budget(result: &RuleResult) -> bool {
    matches!(result, RuleResult::Error(EvalError::CostExceeded(_)))
}

// ---- compile-time estimate ------------------------------------------------------------------

#[test]
fn estimate_multiplies_comprehension_bodies_by_the_range_size() {
    let flat = cost_of("object.status.phase == 'Running'");
    assert!(flat < 10, "{flat}");
    let known = cost_of("[1, 2, 3].exists(x, x == 2)");
    let unknown = cost_of("object.status.conditions.exists(c, c.type == 'Ready')");
    assert!(known < 50, "{known}");
    assert!(unknown >= ASSUMED_LIST_SIZE, "{unknown}");
    let nested = cost_of("object.a.exists(x, object.b.exists(y, x == y))");
    assert!(nested >= ASSUMED_LIST_SIZE * ASSUMED_LIST_SIZE, "{nested}");
    assert!(cost_of("lists.range(500).size() > 0") >= 500);
}

#[test]
fn the_reported_memory_bomb_does_not_compile() {
    let msg = compile_err("lists.range(20).map(i, lists.range(1000000)).size() > 0");
    assert!(
        msg.contains(&format!("creates more than {MAX_LITERAL_RANGE} elements")),
        "{msg}"
    );
    // The position points at the offending call.
    assert!(
        msg.contains("<input>:1:35: lists.range(1000000) creates more than"),
        "{msg}"
    );
}

#[test]
fn an_estimate_over_the_limit_does_not_compile_and_says_where() {
    let msg = compile_err("lists.range(5000).all(i, lists.range(5000).all(j, i != j + 1))");
    assert!(msg.contains("estimated worst-case cost"), "{msg}");
    assert!(msg.contains(&MAX_ESTIMATED_COST.to_string()), "{msg}");
    assert!(msg.contains("<input>:1:"), "{msg}");
}

#[test]
fn comprehensions_nested_too_deep_do_not_compile() {
    let mut src = "true".to_string();
    for v in ["a", "b", "c", "d"] {
        src = format!("[1].all({v}, {src})");
    }
    let msg = compile_err(&src);
    assert!(
        msg.contains(&format!("nested more than {MAX_COMPREHENSION_DEPTH} deep")),
        "{msg}"
    );
    // One level less is fine.
    ENGINE
        .compile("[1].all(a, [1].all(b, [1].all(c, true)))")
        .unwrap();
}

// ---- runtime budget -------------------------------------------------------------------------

#[test]
fn a_rule_is_active_within_its_cost_limit_and_unknown_past_it() {
    let nested = "lists.range(100).all(i, lists.range(100).all(j, i + j >= 0))";
    // (why, the rule, the cost limit, whether it goes over)
    let cases = [
        (
            "within budget: unaffected",
            "object.status.conditions.exists(c, c.type == 'Paused')",
            1_000,
            false,
        ),
        (
            "100 × 100 inner iterations of a 5-node body: far beyond 10,000, although each range is small",
            nested,
            10_000,
            true,
        ),
        (
            "nested, with a limit that covers it",
            nested,
            1_000_000,
            false,
        ),
        (
            "an error absorbed by || is still over budget",
            "lists.range(object.status.n).exists(i, i < 0) || true",
            100,
            true,
        ),
    ];
    for (why, src, cost_limit, over) in cases {
        let exprs = ruleset(vec![rule("Rule", src)]);
        let ev = evaluate_within(&exprs, &Bound::new(&object()), &budget(cost_limit, 10_000));
        let exceeded = over_budget(&ev.rules[0]);
        let active = matches!(ev.rules[0], RuleResult::Active { .. });
        assert_eq!((exceeded, active), (over, !over), "{why}: {ev:?}");
        assert_eq!(ev.over_budget.is_some(), over, "{why}: {ev:?}");
    }
}

#[test]
fn iterating_past_the_cost_limit_is_unknown_not_false() {
    // 5000 elements computed at run time: the estimate cannot know, the meter does.
    let exprs = heavy_then_light();
    let obj = object();
    let ev = evaluate_within(&exprs, &Bound::new(&obj), &budget(1_000, 10_000));
    match &ev.rules[0] {
        RuleResult::Error(EvalError::CostExceeded(Exceeded::Cost(1_000))) => {}
        other => panic!("expected CostExceeded, got {other:?}"),
    }
    // Each expression has its own allowance: the next rule still runs.
    assert!(matches!(ev.rules[1], RuleResult::Active { .. }), "{ev:?}");
    let over = ev.over_budget.expect("over budget");
    assert_eq!(over.place, "rule Heavy");
    // The same rule passes with a budget that covers it.
    let ev = evaluate_within(&exprs, &Bound::new(&obj), &budget(100_000, 10_000));
    assert!(matches!(ev.rules[0], RuleResult::Active { .. }), "{ev:?}");
    assert_eq!(ev.over_budget, None);
}

#[test]
fn the_deadline_stops_an_evaluation_and_skips_the_rest() {
    // The cost limit allows everything; the time limit (none at all) does not.
    let exprs = heavy_then_light();
    let obj = object();
    let ev = evaluate_within(&exprs, &Bound::new(&obj), &budget(u64::MAX / 2, 0));
    assert!(
        matches!(
            ev.rules[0],
            RuleResult::Error(EvalError::CostExceeded(Exceeded::Time(_)))
        ),
        "{ev:?}"
    );
    assert!(over_budget(&ev.rules[1]), "{ev:?}");
    assert_eq!(ev.over_budget.map(|o| o.place), Some("rule Heavy".into()));
}

#[test]
fn an_expression_that_ends_past_the_deadline_is_over_budget() {
    // Nothing in it to interrupt: it is caught when it returns, and named.
    let exprs = ruleset(vec![rule("Plain", "object.metadata.name == 'vm'")]);
    let obj = object();
    let ev = evaluate_within(&exprs, &Bound::new(&obj), &budget(1_000, 0));
    assert_eq!(
        ev.rules[0],
        RuleResult::Error(EvalError::CostExceeded(Exceeded::Time(Duration::ZERO)))
    );
    assert_eq!(ev.over_budget.map(|o| o.place), Some("rule Plain".into()));
}

#[test]
fn replace_cannot_grow_a_string_without_bound() {
    let mut src = "object.metadata.name".to_string();
    for _ in 0..12 {
        src = format!("{src}.replace('v', 'vvvvvvvv')");
    }
    let exprs = RuleSetExprs {
        rules: vec![],
        label_expressions: vec![("k".into(), ENGINE.compile(&src).unwrap())],
    };
    let obj = object();
    let ev = evaluate_within(&exprs, &Bound::new(&obj), &Budget::default());
    assert_eq!(
        ev.labels[0].1,
        Err(EvalError::CostExceeded(Exceeded::Size(MAX_STRING_BYTES)))
    );
    // Replace itself still works as the strings extension defines it.
    let e = ENGINE
        .compile("'a-b-c'.replace('-', '+') + 'a-b-c'.replace('-', '', 1)")
        .unwrap();
    assert_eq!(e.eval_string(&Bound::new(&obj)), Ok("a+b+cab-c".into()));
}

#[test]
fn expressions_outside_a_ruleset_evaluation_have_the_default_budget() {
    let e = ENGINE
        .compile("lists.range(object.status.n).map(i, lists.range(object.status.n)).size() > 0")
        .unwrap();
    let obj = object();
    assert!(matches!(
        e.eval_bool(&Bound::new(&obj)),
        Err(EvalError::CostExceeded(_))
    ));
}
