//! What the schema check adds to applying a ruleset: the largest shipped one
//! (`rules/cdi/datavolume-rules.yaml`, 20 KB, its every expression) checked against its
//! target's schema, beside the compile the door runs anyway.
//!
//! * `compile`: what the door did before (parse, macro expansion, cost estimate).
//! * `check, types only`: no schema (a built-in target, or a caller not proven).
//! * `check, test CRD (open)`: the CRD the tests install (`tests/cluster/crds/cdi.yaml`), which
//!   takes any field: only `metadata` is checked.
//! * `check, closed schema`: a schema that lists every field the rules read, and 40 more on
//!   each object, so that every path is looked up and found.
//!
//! `cargo bench --bench rule_check`

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{Criterion, criterion_group, criterion_main};
use ifo::evaluate::Engine;
use ifo::ruleset::schema_check::{Schema, check_ruleset};
use ifo::ruleset::{Target, compile};
use serde_json::{Value, json};

const RULESET: &str = "rules/cdi/datavolume-rules.yaml";

/// An object schema with `fields` and 40 string fields more.
fn object(fields: Value) -> Value {
    let mut properties = fields.as_object().cloned().unwrap_or_default();
    for i in 0..40 {
        properties.insert(format!("field{i}"), json!({"type": "string"}));
    }
    json!({"type": "object", "properties": properties})
}

/// A closed schema of a DataVolume: what `datavolume-rules` reads, and more.
fn closed_schema() -> Schema {
    let string = json!({"type": "string"});
    let condition = object(json!({
        "type": string, "status": string, "reason": string, "message": string,
        "lastTransitionTime": string, "lastHeartbeatTime": string,
    }));
    let source = object(json!({
        "http": object(json!({"url": string})), "registry": object(json!({"url": string})),
        "pvc": object(json!({"name": string, "namespace": string})),
        "upload": object(json!({})), "blank": object(json!({})),
        "snapshot": object(json!({"name": string, "namespace": string})),
    }));
    Schema::crd(object(json!({
        "spec": object(json!({
            "source": source.clone(), "sourceRef": object(json!({"kind": string, "name": string})),
            "pvc": object(json!({})), "storage": object(json!({})),
        })),
        "status": object(json!({
            "phase": string, "progress": string, "restartCount": {"type": "integer"},
            "claimName": string,
            "conditions": {"type": "array", "items": condition},
        })),
    })))
}

fn bench(c: &mut Criterion) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let files = ifo::library::load(&[root.join(RULESET)]).unwrap();
    let file = &files[0];
    let engine = Engine::new();
    let compiled = compile(&engine, &file.name, None, &file.spec).unwrap();
    let expressions: usize = compiled
        .exprs
        .rules
        .iter()
        .map(|r| {
            1 + [
                &r.message,
                &r.outcome,
                &r.start_time,
                &r.progress,
                &r.stalled,
            ]
            .iter()
            .filter(|e| e.is_some())
            .count()
        })
        .sum::<usize>()
        + compiled.exprs.label_expressions.len();
    let crds = ifo::library::load_schemas(&[root.join("tests/cluster/crds/cdi.yaml")]).unwrap();
    let target = Target {
        group: "cdi.kubevirt.io".into(),
        version: "v1beta1".into(),
        resource: "datavolumes".into(),
    };
    let open = crds.get(&target).expect("the test CRD of DataVolumes");
    let closed = closed_schema();
    let report = check_ruleset(&compiled, Some(&closed), &[]);
    assert!(report.is_ok(), "{:#?}", report.problems);
    println!(
        "{RULESET}: {} bytes, {} rules, {expressions} expressions; against the closed schema: {} \
         problems, {} notes",
        file.text.len(),
        compiled.exprs.rules.len(),
        report.problems.len(),
        report.unchecked.len()
    );

    let mut group = c.benchmark_group("schema check of the largest shipped ruleset");
    group.bench_function("compile", |b| {
        b.iter(|| compile(&engine, &file.name, None, black_box(&file.spec)).unwrap());
    });
    group.bench_function("check, types only", |b| {
        b.iter(|| check_ruleset(black_box(&compiled), None, &[]));
    });
    group.bench_function("check, test CRD (open)", |b| {
        b.iter(|| check_ruleset(black_box(&compiled), Some(open), &[]));
    });
    group.bench_function("check, closed schema", |b| {
        b.iter(|| check_ruleset(black_box(&compiled), Some(&closed), &[]));
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
