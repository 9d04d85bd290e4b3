//! The documents against what the server really serves: every field a record or list carries is
//! described, every described field of our types is served, and every reference resolves.

use super::schema::PREFIX;
use super::*;
use crate::api::resource::{GROUP, VERSION};
use crate::api::wire::{List, ListMeta};
use crate::operation::{
    EstimateBasis, Expectation, InFlightOperation, Outcome, Phase, Stall, Subject, test_ruleset,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::BTreeSet;

fn parse(doc: &Document) -> Value {
    serde_json::from_slice(&doc.body).unwrap()
}

/// The schemas of a document, with the prefix its references use.
struct Schemas<'a> {
    by_name: &'a Map<String, Value>,
    prefix: &'static str,
}

impl<'a> Schemas<'a> {
    fn v2(doc: &'a Value) -> Self {
        Schemas {
            by_name: doc["definitions"].as_object().unwrap(),
            prefix: "#/definitions/",
        }
    }

    fn v3(doc: &'a Value) -> Self {
        Schemas {
            by_name: doc["components"]["schemas"].as_object().unwrap(),
            prefix: "#/components/schemas/",
        }
    }

    fn lookup(&self, reference: &str) -> Option<&'a Value> {
        self.by_name.get(reference.strip_prefix(self.prefix)?)
    }

    /// Follows `$ref` and single-`allOf` wrappers to the schema that says what a value is.
    fn resolve(&self, mut schema: &'a Value) -> &'a Value {
        loop {
            if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
                schema = self.lookup(r).unwrap_or_else(|| panic!("unresolved {r}"));
            } else if let Some([inner]) = schema
                .get("allOf")
                .and_then(Value::as_array)
                .map(|a| &a[..])
            {
                schema = inner;
            } else {
                return schema;
            }
        }
    }

    /// Records, in `errors`, every part of `value` its schema does not describe.
    fn check(&self, schema: &'a Value, value: &Value, at: &str, errors: &mut Vec<String>) {
        let schema = self.resolve(schema);
        let declared = schema.get("type").and_then(Value::as_str);
        let actual = match value {
            Value::Object(_) => "object",
            Value::Array(_) => "array",
            Value::String(_) => "string",
            Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
            Value::Number(_) => "number",
            Value::Bool(_) => "boolean",
            Value::Null => "null",
        };
        if declared.is_some_and(|d| d != actual) {
            errors.push(format!("{at}: {actual} where the schema says {declared:?}"));
            return;
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
            && !allowed.contains(value)
        {
            errors.push(format!("{at}: {value} is not one of {allowed:?}"));
        }
        match value {
            Value::Object(fields) => {
                let properties = schema.get("properties").and_then(Value::as_object);
                let additional = schema.get("additionalProperties");
                for (key, field) in fields {
                    let at = format!("{at}.{key}");
                    match (properties.and_then(|p| p.get(key)), additional) {
                        (Some(s), _) | (None, Some(s)) => self.check(s, field, &at, errors),
                        (None, None) if properties.is_some() => {
                            errors.push(format!("{at}: not in the schema"))
                        }
                        // A free-form object (FieldsV1, RawExtension).
                        (None, None) => {}
                    }
                }
                for required in schema
                    .get("required")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                {
                    if !fields.contains_key(required) {
                        errors.push(format!("{at}.{required}: required but not served"));
                    }
                }
            }
            Value::Array(items) => {
                let item_schema = &schema["items"];
                for (i, item) in items.iter().enumerate() {
                    self.check(item_schema, item, &format!("{at}[{i}]"), errors);
                }
            }
            _ => {}
        }
    }
}

fn owner(kind: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "kubevirt.io/v1".into(),
        kind: kind.into(),
        name: "vm1".into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Records with every optional field set: a completed namespaced operation with a message,
/// outcome, generation and owners, and an active cluster-scoped one without them, ending.
fn records() -> Vec<InFlightOperation> {
    let ruleset = test_ruleset("kubevirt", "virt").with_labels(&[("example.com/team", "virt")]);
    let subject = Subject {
        api_version: "kubevirt.io/v1".into(),
        kind: "VirtualMachineInstance".into(),
        name: "vm1".into(),
        namespace: Some("ns1".into()),
        uid: "uid-1".into(),
        generation: Some(4),
        owner_references: vec![owner("VirtualMachine", "owner-1")],
    };
    let start: jiff::Timestamp = "2026-11-22T10:30:00Z".parse().unwrap();
    let now: jiff::Timestamp = "2026-11-22T10:31:00Z".parse().unwrap();
    let (mut completed, _) = InFlightOperation::new_active(
        &ruleset,
        "Migrating",
        &subject,
        start,
        now,
        Some("to node-9".into()),
        [("example.com/node", "node-9")],
    );
    completed.phase = Phase::Completed;
    completed.outcome = Some(Outcome::Superseded);
    completed.completed = Some(now);

    let node = Subject {
        api_version: "v1".into(),
        kind: "Node".into(),
        name: "node-1".into(),
        namespace: None,
        uid: "uid-2".into(),
        generation: None,
        owner_references: Vec::new(),
    };
    let (mut active, _) =
        InFlightOperation::new_active(&ruleset, "Draining", &node, start, now, None, []);
    // What progress, history and a stall add.
    active.progress = Some(45.5);
    active.stalled = Some(Stall::reported("ImportFailed", now));
    active.expectation = Some(Expectation {
        end: now,
        basis: EstimateBasis::History,
        p90_end: Some(now),
        overdue: None,
    });
    // And what ending adds.
    active.ending = Some(crate::operation::Ending {
        since: now,
        at: "2026-11-22T10:31:30Z".parse().unwrap(),
    });
    vec![completed, active]
}

/// What the server serves for the records: each object, and a list of each kind.
fn served() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for record in records() {
        let object = record.to_json(42);
        let kind = record.kind().to_owned();
        let list_kind = format!("{kind}List");
        let list = serde_json::to_value(List {
            kind: &list_kind,
            api_version: crate::api::resource::GROUP_VERSION,
            metadata: ListMeta {
                resource_version: "42".into(),
                continue_token: Some("token".into()),
            },
            items: vec![&object],
        })
        .expect("a list serialises");
        out.push((kind.clone(), object));
        out.push((format!("{kind}List"), list));
    }
    let gate = served_gate();
    let list = serde_json::to_value(List {
        kind: "MaintenanceGateList",
        api_version: crate::api::resource::GROUP_VERSION,
        metadata: ListMeta {
            resource_version: "42".into(),
            continue_token: None,
        },
        items: vec![&gate],
    })
    .expect("a list serialises");
    out.push(("MaintenanceGate".to_owned(), gate));
    out.push(("MaintenanceGateList".to_owned(), list));
    out
}

/// A gate with every field set: operations in flight, a stale target, an expected end, windows.
fn served_gate() -> Value {
    use crate::api::gate::verdict::gate_of as gate;
    use crate::gate::Feeds;
    use crate::index::{GateMembers, GateScope};
    // Both records, a namespaced one and a cluster-scoped one, as in flight.
    let ops: Vec<_> = records()
        .into_iter()
        .map(|mut r| {
            r.phase = Phase::Active;
            r.progress = Some(45.5);
            r.stalled = Some(crate::operation::Stall::reported("ImportFailed", r.created));
            std::sync::Arc::new(r)
        })
        .collect();
    let members = GateMembers {
        scope: GateScope::Cluster,
        rv: 42,
        since: None,
        active: ops.len(),
        operations: ops
            .into_iter()
            .map(|o| std::sync::Arc::new(crate::index::GateEntry::new(o)))
            .collect(),
        expected_clear: Some(jiff::Timestamp::UNIX_EPOCH),
        ends: crate::index::ScopeEnds::NOTHING,
        stalled: 2,
        stall_since: None,
        feeds_since: None,
        released: 0,
    };
    let feeds = Feeds {
        synced: true,
        stale: vec![crate::detect::Stale {
            target: crate::ruleset::Target {
                group: "kubevirt.io".into(),
                version: "v1".into(),
                resource: "virtualmachines".into(),
            },
            reason: crate::detect::Blind::NotWatched("forbidden".into()),
        }],
        existence_unknown: None,
    };
    // Every field of a scheduled operation, and a window it closes.
    let hour = |h: i64| {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            jiff::Timestamp::from_second(h * 3600).expect("a time"),
        )
    };
    let scheduled = || crate::api::gate::verdict::Scheduled {
        listed: vec![ifo_model::GateScheduled {
            subject: ifo_model::GateSubject {
                kind: "CronJob".into(),
                name: "nightly".into(),
                namespace: Some("billing".into()),
            },
            operation: "Running".into(),
            component: "kubernetes".into(),
            rule_set: "cronjob-rules".into(),
            expected_start: Some(hour(1)),
            expected_end: Some(hour(2)),
            expected_end_p90: Some(hour(3)),
            schedule: Some("0 * * * *".into()),
            time_zone: Some("UTC".into()),
            message: "m".into(),
        }],
        through: Some(jiff::Timestamp::from_second(24 * 3600).expect("a time")),
    };
    let mut served = gate(&members, &feeds, jiff::Timestamp::UNIX_EPOCH, scheduled());
    // The windows with a start: of the same operations, with every feed current and ends known.
    let first = members.operations[0].clone();
    let end = crate::index::LatestEnd::At(jiff::Timestamp::UNIX_EPOCH, first);
    let known = GateMembers {
        ends: crate::index::ScopeEnds {
            p50: end.clone(),
            p90: end,
        },
        ..members
    };
    let current = Feeds {
        stale: Vec::new(),
        ..feeds
    };
    let with_windows = gate(&known, &current, jiff::Timestamp::UNIX_EPOCH, scheduled());
    assert!(
        with_windows
            .status
            .next_window
            .as_ref()
            .and_then(|w| w.end.as_ref())
            .is_some(),
        "a window the scheduled operation closes"
    );
    served.status.next_window = with_windows.status.next_window;
    served.status.next_window_p50 = with_windows.status.next_window_p50;
    serde_json::to_value(served).expect("a gate serialises")
}

fn check_served_against(schemas: &Schemas) {
    let mut errors = Vec::new();
    for (kind, value) in served() {
        let schema = schemas
            .by_name
            .get(&format!("{PREFIX}{kind}"))
            .unwrap_or_else(|| panic!("no schema for {kind}"));
        schemas.check(schema, &value, &kind, &mut errors);
    }
    assert!(
        errors.is_empty(),
        "served but not described:\n{}",
        errors.join("\n")
    );
}

#[test]
fn every_served_field_is_described() {
    let openapi = OpenApi::new();
    check_served_against(&Schemas::v2(&parse(&openapi.v2)));
    check_served_against(&Schemas::v3(&parse(&openapi.v3_group)));
}

/// The dotted paths of every property of our own types, following references into them.
fn described_fields(schemas: &Schemas, schema: &Value, at: &str, out: &mut BTreeSet<String>) {
    let raw_ref = schema.get("$ref").and_then(Value::as_str);
    if raw_ref.is_some_and(|r| !r.contains(PREFIX)) {
        return; // apimachinery types are Kubernetes', not ours to keep in sync
    }
    let schema = schemas.resolve(schema);
    if let Some(items) = schema.get("items") {
        described_fields(schemas, items, at, out);
    }
    for (key, field) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        let path = format!("{at}.{key}");
        out.insert(path.clone());
        described_fields(schemas, field, &path, out);
    }
}

fn served_fields(value: &Value, at: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                let path = format!("{at}.{key}");
                out.insert(path.clone());
                served_fields(field, &path, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|i| served_fields(i, at, out)),
        _ => {}
    }
}

/// Objects and lists are compared by shape, whatever their kind: both kinds share the spec and
/// status types, and no single record sets every optional field.
fn shape(kind: &str) -> &'static str {
    if kind.ends_with("List") {
        "list"
    } else {
        "object"
    }
}

#[test]
fn every_described_field_is_served() {
    let doc = parse(&OpenApi::new().v2);
    let schemas = Schemas::v2(&doc);
    let mut seen = BTreeSet::new();
    for (kind, value) in served() {
        served_fields(&value, shape(&kind), &mut seen);
    }
    for (kind, _) in served() {
        let mut described = BTreeSet::new();
        let schema = &schemas.by_name[&format!("{PREFIX}{kind}")];
        described_fields(&schemas, schema, shape(&kind), &mut described);
        let missing: Vec<_> = described.difference(&seen).collect();
        assert!(
            missing.is_empty(),
            "{kind}: described but never served: {missing:?}"
        );
    }
}

fn references(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, v) in map {
                match (key.as_str(), v) {
                    ("$ref", Value::String(r)) => out.push(r.clone()),
                    _ => references(v, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| references(v, out)),
        _ => {}
    }
}

#[test]
fn every_reference_resolves_inside_its_document() {
    let openapi = OpenApi::new();
    let (v2, v3) = (parse(&openapi.v2), parse(&openapi.v3_group));
    for (doc, schemas) in [(&v2, Schemas::v2(&v2)), (&v3, Schemas::v3(&v3))] {
        let mut refs = Vec::new();
        references(doc, &mut refs);
        assert!(refs.len() > 20);
        for r in refs {
            assert!(schemas.lookup(&r).is_some(), "{r} does not resolve");
        }
    }
}

#[test]
fn kinds_carry_their_group_version_kind() {
    let openapi = OpenApi::new();
    let v2 = parse(&openapi.v2);
    let v3 = parse(&openapi.v3_group);
    for kind in [
        "InFlightOperation",
        "InFlightOperationList",
        "InFlightClusterOperation",
        "InFlightClusterOperationList",
        "MaintenanceGate",
        "MaintenanceGateList",
    ] {
        let gvk = json!([{"group": GROUP, "kind": kind, "version": VERSION}]);
        let name = format!("{PREFIX}{kind}");
        assert_eq!(
            v2["definitions"][&name]["x-kubernetes-group-version-kind"],
            gvk
        );
        assert_eq!(
            v3["components"]["schemas"][&name]["x-kubernetes-group-version-kind"],
            gvk
        );
    }
}

#[test]
fn only_our_group_version_has_paths() {
    let openapi = OpenApi::new();
    for doc in [parse(&openapi.v2), parse(&openapi.v3_group)] {
        let paths = doc["paths"].as_object().unwrap();
        assert_eq!(paths.len(), 15);
        for (path, item) in paths {
            assert!(
                path.starts_with("/apis/live.ifo.kubevirt.io/v1alpha1/"),
                "{path}"
            );
            assert_eq!(
                item.as_object()
                    .unwrap()
                    .keys()
                    .filter(|k| *k != "parameters")
                    .count(),
                1
            );
        }
    }
}

#[test]
fn v3_root_points_at_the_current_document() {
    let openapi = OpenApi::new();
    let root = parse(&openapi.v3_root);
    assert_eq!(
        root["paths"]["apis/live.ifo.kubevirt.io/v1alpha1"]["serverRelativeURL"],
        format!(
            "/openapi/v3/apis/live.ifo.kubevirt.io/v1alpha1?hash={}",
            openapi.v3_hash
        )
    );
    assert_eq!(openapi.v3_group.etag, format!("\"{}\"", openapi.v3_hash));
    assert_eq!(parse(&openapi.v3_group)["openapi"], "3.0.0");
    assert_eq!(parse(&openapi.v2)["swagger"], "2.0");
}
