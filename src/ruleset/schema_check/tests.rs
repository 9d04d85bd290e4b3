//! The checker over a table of expressions and schemas.

use super::{Role, Schema, check_expr, check_ruleset};
use crate::evaluate::Engine;
use crate::ruleset::{RuleSetSpec, compile};
use serde_json::{Value, json};
use std::sync::LazyLock;

static ENGINE: LazyLock<Engine> = LazyLock::new(Engine::new);

/// A VirtualMachine-like schema: closed where it lists properties, with a list of objects, a
/// map of strings, a map of objects, an open part, an int-or-string and an `allOf`.
fn vm_schema() -> Schema {
    let string = json!({"type": "string"});
    Schema::crd(json!({
        "type": "object",
        "properties": {
            "apiVersion": string,
            "kind": string,
            "metadata": {"type": "object"},
            "spec": {
                "type": "object",
                "properties": {
                    "running": {"type": "boolean"},
                    "runStrategy": string,
                    "replicas": {"type": "integer"},
                    "disks": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"name": string, "bootOrder": {"type": "integer"},
                                       "tags": {"type": "array", "items": string}},
                    }},
                    "selector": {"type": "object", "additionalProperties": string},
                    "volumes": {"type": "object", "additionalProperties": {
                        "type": "object", "properties": {"size": string},
                    }},
                    "template": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "dataVolumeTemplates": {"type": "array", "items": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": true,
                        "properties": {"spec": {"type": "object", "properties": {"source": string}}},
                    }},
                    "maxUnavailable": {"x-kubernetes-int-or-string": true},
                    "strategy": {"allOf": [
                        {"type": "object", "properties": {"type": string}},
                        {"type": "object", "properties": {"rollingUpdate": {"type": "object"}}},
                    ]},
                },
            },
            "status": {
                "type": "object",
                "properties": {
                    "printableStatus": string,
                    "ready": {"type": "boolean"},
                    "conditions": {"type": "array", "items": {
                        "type": "object",
                        "properties": {"type": string, "status": string, "reason": string,
                                       "message": string},
                    }},
                    "migrationState": {"type": "object", "properties": {
                        "targetNode": string, "failed": {"type": "boolean"},
                    }},
                },
            },
        },
    }))
}

/// The problems of `source` as a `role` against `schema`.
fn problems(source: &str, role: Role, schema: Option<&Schema>) -> Vec<String> {
    let expr = ENGINE.compile(source).expect(source);
    check_expr(&expr, role, schema).problems
}

#[test]
fn paths_the_schema_knows_pass() {
    let schema = vm_schema();
    for source in [
        "object.status.printableStatus == 'Migrating'",
        "has(object.status.printableStatus)",
        "object.?status.?printableStatus.orValue('') == 'Running'",
        "object.status.?migrationState.?targetNode.orValue('') != ''",
        "object.spec.disks.exists(d, d.name == 'root')",
        "object.spec.disks.all(d, d.tags.all(t, t.startsWith('a')))",
        "object.spec.disks[0].name == 'x'",
        "object.spec.disks[?0].?name.orValue('') == 'x'",
        "object.spec.selector['app'] == 'x'",
        "object.spec.selector.app == 'x'",
        "object.spec.selector.exists(k, k.startsWith('a'))",
        "object.spec.volumes.root.size == '1Gi'",
        "object.spec.volumes['root'].size == '1Gi'",
        "object.spec[?'running'].orValue(false)",
        "object.spec.template.anything.below == 1",
        "object.spec.strategy.rollingUpdate != null && object.spec.strategy.type == 'x'",
        "object.metadata.name == 'x' && object.metadata.labels['a'] == 'b'",
        "object.metadata.ownerReferences.exists(o, o.kind == 'Job' && o.controller)",
        "object.metadata.managedFields.exists(m, 'f:spec' in m.fieldsV1)",
        "object.status.conditions.filter(c, c.type == 'Ready').map(c, c.message)[?0].orValue('') != ''",
        "object.status.conditions.exists_one(c, c.type == 'Ready')",
        "object.spec.running",
        "object.status.ready || object.status.migrationState.failed",
        "int(object.spec.replicas) > 2",
        "object.spec.maxUnavailable == 1 || object.spec.maxUnavailable == '10%'",
        "[1, 2].exists(x, x > 1)",
        "lists.range(3).exists(i, i == object.spec.replicas)",
        "object.kind == 'VirtualMachine' && object.apiVersion != ''",
        "object.spec.dataVolumeTemplates.exists(t, t.metadata.name == 'x' && t.spec.source == '')",
    ] {
        assert_eq!(
            problems(source, Role::Rule, Some(&schema)),
            Vec::<String>::new(),
            "{source}"
        );
    }
}

#[test]
fn typos_under_a_closed_schema_are_found_with_the_nearest_field() {
    let schema = vm_schema();
    for (source, expected) in [
        (
            "object.status.printableStatsu == 'Migrating'",
            "object.status.printableStatsu: the schema of object.status has no field printableStatsu; did you mean printableStatus?",
        ),
        (
            "has(object.status.printablestatus)",
            "object.status.printablestatus: the schema of object.status has no field printablestatus; did you mean printableStatus?",
        ),
        (
            "object.?status.?printableStatsu.orValue('') == ''",
            "object.?status.?printableStatsu: the schema of object.status has no field printableStatsu; did you mean printableStatus?",
        ),
        (
            "object.spec.disks.exists(d, d.nmae == 'x')",
            "d.nmae: the schema of object.spec.disks[] has no field nmae; did you mean name?",
        ),
        (
            "object.spec.disks.all(d, d.tags.exists(t, t.size() > 0)) && object.spec.disks[0].bootOrdr > 1",
            "object.spec.disks[0].bootOrdr: the schema of object.spec.disks[] has no field bootOrdr; did you mean bootOrder?",
        ),
        (
            "object.spec.volumes.root.sise == ''",
            "object.spec.volumes.root.sise: the schema of object.spec.volumes.root has no field sise; did you mean size?",
        ),
        (
            "object.spec[?'runing'].orValue(false)",
            "object.spec[?'runing']: the schema of object.spec has no field runing; did you mean running?",
        ),
        (
            "object.status.conditions.filter(c, c.type == 'Ready').map(c, c.mesage)[?0].orValue('') != ''",
            "c.mesage: the schema of object.status.conditions[] has no field mesage; did you mean message?",
        ),
        (
            "object.stauts.ready",
            "object.stauts: the schema of object has no field stauts; did you mean status?",
        ),
        (
            "object.metadata.lables.app == 'x'",
            "object.metadata.lables: the schema of object.metadata has no field lables; did you mean labels?",
        ),
        (
            "object.spec.strategy.tpye == 'x'",
            "object.spec.strategy.tpye: the schema of object.spec.strategy has no field tpye; did you mean type?",
        ),
        (
            "object.spec.runStrategy.always",
            "object.spec.runStrategy.always: object.spec.runStrategy is a string, it has no field always",
        ),
        (
            "object.spec.dataVolumeTemplates.exists(t, t.metadata.nmae == 'x')",
            "t.metadata.nmae: the schema of object.spec.dataVolumeTemplates[].metadata has no field nmae; did you mean name?",
        ),
        (
            "object.spec.dataVolumeTemplates[0].sepc.source == ''",
            "object.spec.dataVolumeTemplates[0].sepc: the schema of object.spec.dataVolumeTemplates[] has no field sepc; did you mean spec?",
        ),
        (
            "object.status.phase == 'Running'",
            "object.status.phase: the schema of object.status has no field phase",
        ),
    ] {
        let found = problems(source, Role::Rule, Some(&schema));
        assert_eq!(found, [expected], "{source}");
    }
}

#[test]
fn results_of_the_wrong_type_are_found_with_or_without_a_schema() {
    let schema = vm_schema();
    for (source, role, expected) in [
        (
            "'not a boolean'",
            Role::Rule,
            "the result is of type string; a rule must give a bool",
        ),
        (
            "1",
            Role::Rule,
            "the result is of type int; a rule must give a bool",
        ),
        (
            "[true]",
            Role::Rule,
            "the result is of type list; a rule must give a bool",
        ),
        (
            "{'a': true}",
            Role::Rule,
            "the result is of type map; a rule must give a bool",
        ),
        (
            "'a' + 'b'",
            Role::Rule,
            "the result is of type string; a rule must give a bool",
        ),
        (
            "size([1])",
            Role::Rule,
            "the result is of type int; a rule must give a bool",
        ),
        (
            "true ? 'a' : false",
            Role::Rule,
            "the result may be of type string; a rule must give a bool",
        ),
        (
            "object.?status.?ready",
            Role::Rule,
            "the result is an optional (end the chain with .orValue(...) or .hasValue()); a rule must give a bool",
        ),
        (
            "true",
            Role::Message,
            "the result is of type bool; a message must give a string",
        ),
        (
            "1 + 2",
            Role::Label,
            "the result is of type int; a label expression must give a string",
        ),
        (
            "1",
            Role::Outcome,
            "the result is of type int; an outcome must give a string",
        ),
        (
            "true",
            Role::Progress,
            "the result is of type bool; a progress must give a number or a string",
        ),
        (
            "1",
            Role::Stalled,
            "the result is of type int; stalled must give a bool or a string (the reason)",
        ),
        (
            "1",
            Role::StartTime,
            "the result is of type int; a start time must give a string or a timestamp",
        ),
    ] {
        for schema in [None, Some(&schema)] {
            assert_eq!(problems(source, role, schema), [expected], "{source}");
        }
    }
    for (source, role, expected) in [
        (
            "object.status.printableStatus",
            Role::Rule,
            "the result is object.status.printableStatus, of type string; a rule must give a bool",
        ),
        (
            "object.spec.replicas",
            Role::Rule,
            "the result is object.spec.replicas, of type int; a rule must give a bool",
        ),
        (
            "object.status.?migrationState.orValue({})",
            Role::Rule,
            "the result is object.status.migrationState, of type map; a rule must give a bool",
        ),
        (
            "object.spec.disks",
            Role::Rule,
            "the result is object.spec.disks, of type list; a rule must give a bool",
        ),
        (
            "object.status.ready",
            Role::Message,
            "the result is object.status.ready, of type bool; a message must give a string",
        ),
    ] {
        assert_eq!(
            problems(source, role, Some(&schema)),
            [expected],
            "{source}"
        );
        assert_eq!(
            problems(source, role, None),
            Vec::<String>::new(),
            "{source}"
        );
    }
    // What a role takes, and what cannot be known.
    for (source, role) in [
        ("object.status.printableStatus", Role::Message),
        ("'a' + object.status.printableStatus", Role::Label),
        ("object.spec.replicas", Role::Progress),
        ("'45%'", Role::Progress),
        ("object.status.ready ? 'stuck' : false", Role::Stalled),
        ("timestamp('2024-01-01T00:00:00Z')", Role::StartTime),
        ("object.spec.maxUnavailable", Role::Rule),
        ("object.spec.template.x", Role::Rule),
        ("object.?status.?ready.orValue(false)", Role::Rule),
        (
            "object.status.conditions.exists(c, c.type == 'Ready')",
            Role::Rule,
        ),
        ("object.status.conditions.map(c, c.type)[0]", Role::Message),
        (
            "object.spec.disks.filter(d, d.name != '').size() > 0",
            Role::Rule,
        ),
        ("object.status.conditions[?0].hasValue()", Role::Rule),
    ] {
        assert_eq!(
            problems(source, role, Some(&schema)),
            Vec::<String>::new(),
            "{source}"
        );
    }
}

#[test]
fn an_open_schema_checks_nothing_below_it_and_says_where() {
    let schema =
        Schema::crd(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let expr = ENGINE
        .compile("object.status.printableStatsu == 'x' && object.metadata.nmae == ''")
        .unwrap();
    let found = check_expr(&expr, Role::Rule, Some(&schema));
    assert_eq!(
        found.problems,
        [
            "object.metadata.nmae: the schema of object.metadata has no field nmae; did you mean name?"
        ],
        "metadata is known whatever the CRD says"
    );
    assert_eq!(found.open, ["object"]);
    // An object that lists no properties is open too.
    let bare = Schema::crd(json!({"type": "object", "properties": {"status": {"type": "object"}}}));
    let expr = ENGINE.compile("object.status.anything == 'x'").unwrap();
    let found = check_expr(&expr, Role::Rule, Some(&bare));
    assert!(found.problems.is_empty(), "{found:?}");
    assert_eq!(found.open, ["object.status"]);
}

/// An OpenAPI v3 document as kube-apiserver serves one (`/openapi/v3/apis/apps/v1`): `$ref`s,
/// and `allOf` wrapping one.
#[test]
fn built_in_schemas_follow_their_refs() {
    let doc = json!({"components": {"schemas": {
        "io.k8s.api.apps.v1.Deployment": {"type": "object", "properties": {
            "apiVersion": {"type": "string"},
            "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
            "status": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentStatus"}]},
        }},
        "io.k8s.api.apps.v1.DeploymentStatus": {"type": "object", "properties": {
            "updatedReplicas": {"type": "integer"},
            "conditions": {"type": "array", "items": {"$ref": "#/components/schemas/io.k8s.api.apps.v1.DeploymentCondition"}},
        }},
        "io.k8s.api.apps.v1.DeploymentCondition": {"type": "object", "properties": {
            "type": {"type": "string"}, "status": {"type": "string"}, "reason": {"type": "string"},
        }},
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {}},
        "loop": {"$ref": "#/components/schemas/loop"},
    }}});
    let schema = Schema::open_api(doc.clone(), "io.k8s.api.apps.v1.Deployment").unwrap();
    assert_eq!(
        problems(
            "object.status.updatedReplicas > 0 && object.status.conditions.exists(c, c.reason == 'x')",
            Role::Rule,
            Some(&schema)
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        problems(
            "object.status.conditions.exists(c, c.reasn == 'x')",
            Role::Rule,
            Some(&schema)
        ),
        [
            "c.reasn: the schema of object.status.conditions[] has no field reasn; did you mean reason?"
        ]
    );
    assert_eq!(
        problems("object.status.updatedReplicas", Role::Rule, Some(&schema)),
        ["the result is object.status.updatedReplicas, of type int; a rule must give a bool"]
    );
    assert!(Schema::open_api(doc.clone(), "io.k8s.api.apps.v1.Nothing").is_none());
    // What keeping it weighs: the schema and the document it refers into.
    let bytes = serde_json::to_vec(&doc).unwrap().len() as u64;
    let root = serde_json::to_vec(&doc["components"]["schemas"]["io.k8s.api.apps.v1.Deployment"])
        .unwrap()
        .len() as u64;
    assert_eq!(schema.json_bytes(), bytes + root);
    // A cycle of refs is open, never a hang.
    let cycle = Schema::open_api(doc, "loop").unwrap();
    assert!(problems("object.x.y == 1", Role::Rule, Some(&cycle)).is_empty());
}

#[test]
fn a_ruleset_is_checked_expression_by_expression_with_the_place_of_each() {
    let spec: RuleSetSpec = serde_json::from_value(json!({
        "component": "kubevirt",
        "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
        "labelExpressions": [{"key": "ifo.kubevirt.io/vm", "expression": "object.metadata.nmae"}],
        "related": [{
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"},
            "labelExpressions": [{"key": "ifo.kubevirt.io/node", "expression": "object.status.nodeNmae"}],
        }],
        "rules": [
            {"operation": "Migrating", "expression": "object.status.printableStatsu == 'Migrating'",
             "message": "object.status.ready", "outcome": "'Succeeded'"},
            {"operation": "Broken", "expression": "'not a boolean'"},
            {"operation": "Fine", "expression": "object.spec.template.x == 1"},
            {"operation": "Cron", "expression": "false",
             "schedule": {"cron": "1", "timeZone": "object.status.printableStatus", "from": "2"}},
            {"operation": "At", "expression": "false", "schedule": {"at": "true"}},
        ],
    }))
    .unwrap();
    let compiled = compile(&ENGINE, "vm-rules", None, &spec).unwrap();
    let vmi = Schema::crd(json!({"type": "object", "properties": {
        "status": {"type": "object", "properties": {"nodeName": {"type": "string"}}},
    }}));
    let report = check_ruleset(&compiled, Some(&vm_schema()), &[Some(&vmi)]);
    assert_eq!(
        report.problems,
        [
            "rules[0] (Migrating).expression: object.status.printableStatsu: the schema of object.status has no field printableStatsu; did you mean printableStatus?",
            "rules[0] (Migrating).message: the result is object.status.ready, of type bool; a message must give a string",
            "rules[1] (Broken).expression: the result is of type string; a rule must give a bool",
            "rules[3] (Cron).schedule.cron: the result is of type int; a cron schedule and its time zone must give strings",
            "rules[3] (Cron).schedule.from: the result is of type int; a start time must give a string or a timestamp",
            "rules[4] (At).schedule.at: the result is of type bool; a start time must give a string or a timestamp",
            "labelExpressions[0] (ifo.kubevirt.io/vm): object.metadata.nmae: the schema of object.metadata has no field nmae; did you mean name?",
            "related[0].labelExpressions[0] (ifo.kubevirt.io/node): object.status.nodeNmae: the schema of object.status has no field nodeNmae; did you mean nodeName?",
        ]
    );
    assert_eq!(report.unchecked.len(), 1, "{report:?}");
    assert!(
        report.unchecked[0].starts_with(
            "kubevirt.io/v1/virtualmachines: the schema takes any field in object.spec.template"
        ),
        "{report:?}"
    );
    // Without schemas, only the types.
    let report = check_ruleset(&compiled, None, &[]);
    assert_eq!(
        report.problems,
        [
            "rules[1] (Broken).expression: the result is of type string; a rule must give a bool",
            "rules[3] (Cron).schedule.cron: the result is of type int; a cron schedule and its time zone must give strings",
            "rules[3] (Cron).schedule.from: the result is of type int; a start time must give a string or a timestamp",
            "rules[4] (At).schedule.at: the result is of type bool; a start time must give a string or a timestamp",
        ]
    );
    assert!(report.unchecked.is_empty());
}

/// Every shipped expression compiles to something the walk takes (no panic), and a deep
/// expression stays bounded.
#[test]
fn a_deeply_nested_read_is_walked() {
    let source = format!("object{} == 1", ".a".repeat(60));
    let _: Value = json!(problems(&source, Role::Rule, Some(&vm_schema())));
}

#[test]
fn a_pruned_schema_keeps_what_the_check_walks_and_no_more_than_its_depth() {
    let schema = json!({
        "type": "object",
        "description": "words",
        "required": ["status"],
        "x-kubernetes-validations": [{"rule": "true"}],
        "properties": {
            "description": {"type": "string", "description": "a field so named", "enum": ["a"]},
            "status": {"type": "object", "additionalProperties": {"type": "string", "format": "x"},
                       "x-kubernetes-preserve-unknown-fields": true},
            "list": {"type": "array", "items": {"$ref": "#/x", "default": {}}},
        },
    });
    assert_eq!(
        super::schema::pruned(&schema),
        json!({
            "type": "object",
            "properties": {
                "description": {"type": "string"},
                "status": {"type": "object", "additionalProperties": {"type": "string"},
                           "x-kubernetes-preserve-unknown-fields": true},
                "list": {"type": "array", "items": {"$ref": "#/x"}},
            },
        })
    );
    // A schema nested deeper than kept is open below that depth: nothing there is refused.
    let mut deep = json!({"type": "object", "properties": {"leaf": {"type": "string"}}});
    for _ in 0..200 {
        deep = json!({"type": "object", "properties": {"next": deep}});
    }
    let pruned = Schema::crd(super::schema::pruned(&deep));
    let mut path = String::from("object");
    for _ in 0..200 {
        path.push_str(".next");
    }
    let found = problems(&format!("{path}.nothing == 'x'"), Role::Rule, Some(&pruned));
    assert!(found.is_empty(), "{found:?}");
    // Within the depth kept, a typo is still found.
    let found = problems("object.next.next.nxet == 'x'", Role::Rule, Some(&pruned));
    assert_eq!(found.len(), 1, "{found:?}");
}
