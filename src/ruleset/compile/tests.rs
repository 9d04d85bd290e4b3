//! The compiler's unit tests.

use super::Match;
use crate::evaluate::Engine;
use crate::ruleset::{RuleSetSpec, compile};
use serde_json::json;

fn spec(related: serde_json::Value) -> RuleSetSpec {
    serde_json::from_value(json!({
        "component": "kubevirt",
        "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
        "namespaces": ["vms"],
        "labelExpressions": [{"key": "ifo.kubevirt.io/vm", "expression": "object.metadata.name"}],
        "rules": [{"operation": "Stopping", "expression": "true"}],
        "related": related,
    }))
    .unwrap()
}

fn vmi(labels: serde_json::Value) -> serde_json::Value {
    json!([{
        "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"},
        "labelExpressions": labels,
    }])
}

/// Every problem of the ruleset, one line each.
fn problems(spec: &RuleSetSpec) -> Vec<String> {
    match compile(&Engine::new(), "vm-rules", Some(3), spec) {
        Ok(_) => Vec::new(),
        Err(invalid) => invalid.problems.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn a_related_part_compiles_into_a_ruleset_of_its_own_for_its_target() {
    let rs = compile(
        &Engine::new(),
        "vm-rules",
        Some(3),
        &spec(vmi(json!([
            {"key": "ifo.kubevirt.io/node", "expression": "object.?status.?nodeName.orValue('')"},
        ]))),
    )
    .unwrap();
    assert!(rs.part_of.is_none());
    let [part] = rs.related.as_slice() else {
        panic!("one part: {}", rs.related.len())
    };
    assert_eq!(part.info.name, "vm-rules/related[0]");
    assert_eq!(part.target.resource, "virtualmachineinstances");
    assert_eq!(part.namespaces, ["vms"], "watched where its ruleset is");
    assert_eq!(part.generation, Some(3));
    assert!(part.operations.is_empty() && part.exprs.rules.is_empty());
    assert_eq!(part.exprs.label_expressions[0].0, "ifo.kubevirt.io/node");
    let of = part.part_of.as_ref().unwrap();
    assert_eq!(
        (of.ruleset.name.as_str(), of.index, of.matching),
        ("vm-rules", 0, Match::SameName)
    );
    assert!(part.related.is_empty());
}

#[test]
fn match_defaults_to_same_name() {
    let spec = spec(vmi(json!([{"key": "a.io/b", "expression": "'x'"}])));
    assert_eq!(spec.related[0].matching, "SameName");
}

#[test]
fn the_ruleset_s_own_target_an_unknown_match_and_a_bad_key_are_invalid_rules() {
    let own = spec(json!([{
        "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
        "labelExpressions": [{"key": "a.io/b", "expression": "'x'"}],
    }]));
    assert_eq!(
        problems(&own),
        [
            "related[0].target: kubevirt.io/v1/virtualmachines is the ruleset's own target; \
             a related object is of another resource type"
        ]
    );

    let mut unknown = spec(vmi(json!([{"key": "a.io/b", "expression": "'x'"}])));
    unknown.related[0].matching = "OwnerReference".into();
    assert_eq!(
        problems(&unknown),
        [
            "related[0].match: \"OwnerReference\" is not a match this server knows; the \
             only one is SameName"
        ]
    );

    let bad_key = spec(vmi(json!([{"key": "not a key", "expression": "'x'"}])));
    let found = problems(&bad_key);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("related[0].labelExpressions[0] (not a key): not a valid label key: "),
        "{found:?}"
    );

    let none = spec(vmi(json!([])));
    assert_eq!(
        problems(&none),
        ["related[0].labelExpressions: at least one label expression is required"]
    );

    let no_target = spec(json!([{
        "target": {"group": "kubevirt.io", "version": "", "resource": ""},
        "labelExpressions": [{"key": "a.io/b", "expression": "'x'"}],
    }]));
    assert_eq!(
        problems(&no_target),
        ["related[0].target: version and resource are required"]
    );

    let bad_cel = spec(vmi(
        json!([{"key": "a.io/b", "expression": "object.status =="}]),
    ));
    let found = problems(&bad_cel);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("related[0].labelExpressions[0] (a.io/b): "),
        "{found:?}"
    );
}

#[test]
fn durations_by_names_a_label_the_ruleset_sets() {
    let mut by_own = spec(json!([]));
    by_own.rules[0].durations_by = Some("ifo.kubevirt.io/vm".into());
    let compiled = compile(&Engine::new(), "vm-rules", Some(3), &by_own).unwrap();
    assert_eq!(
        compiled.durations_by.get("Stopping").map(String::as_str),
        Some("ifo.kubevirt.io/vm")
    );

    let mut by_related = spec(vmi(json!([{"key": "a.io/b", "expression": "'x'"}])));
    by_related.rules[0].durations_by = Some("a.io/b".into());
    assert_eq!(problems(&by_related), Vec::<String>::new());

    let mut unset = spec(json!([]));
    unset.rules[0].durations_by = Some("velero.io/schedule-name".into());
    assert_eq!(
        problems(&unset),
        [
            "rules[0] (Stopping).durationsBy: no labelExpressions (of the ruleset or of its \
             related parts) set the label \"velero.io/schedule-name\"; durationsBy names one \
             that does"
        ]
    );
}
