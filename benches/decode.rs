//! Decoding a list of a watched target: 1,000 VirtualMachine-like objects (about 1.5 KB each,
//! managedFields included), as the watchers receive them.
//!
//! `objects_one_by_one`: what the watchers do (`ifo::watch::Object`: each item kept as raw JSON,
//! then decoded on its own, so one undecodable object never fails the list).
//! `dynamic_objects_then_values`: the former way, the list decoded as `DynamicObject`s and each
//! turned into a `serde_json::Value` for evaluation.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use kube::api::DynamicObject;
use kube::core::ObjectList;
use serde_json::json;

fn list() -> String {
    let items: Vec<serde_json::Value> = (0..1000)
        .map(|i| {
            json!({
                "apiVersion": "kubevirt.io/v1",
                "kind": "VirtualMachine",
                "metadata": {
                    "name": format!("vm-{i}"),
                    "namespace": format!("ns-{}", i % 10),
                    "uid": format!("00000000-0000-0000-0000-{i:012}"),
                    "resourceVersion": (1000 + i).to_string(),
                    "generation": 3,
                    "labels": {"app": "web", "tier": "frontend"},
                    "managedFields": [{"manager": "kubectl", "operation": "Update", "apiVersion": "kubevirt.io/v1",
                        "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:running": {}, "f:template": {"f:spec": {"f:domain": {"f:cpu": {"f:cores": {}}}}}}}}],
                },
                "spec": {"running": true, "template": {"spec": {"domain": {"cpu": {"cores": 2}, "memory": {"guest": "2Gi"},
                    "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]}}}}},
                "status": {"printableStatus": "Running", "ready": true,
                    "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
            })
        })
        .collect();
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineList", "metadata": {"resourceVersion": "5000"}, "items": items})
        .to_string()
}

fn decode(c: &mut Criterion) {
    let text = list();
    let mut group = c.benchmark_group("decode a list of 1,000 objects");
    group.bench_function("objects_one_by_one", |b| {
        b.iter(|| {
            let list: ObjectList<ifo::watch::Object> =
                serde_json::from_str(black_box(&text)).unwrap();
            let values: Vec<serde_json::Value> =
                list.items.into_iter().map(|o| o.content.unwrap()).collect();
            black_box(values)
        });
    });
    group.bench_function("dynamic_objects_then_values", |b| {
        b.iter(|| {
            let list: ObjectList<DynamicObject> = serde_json::from_str(black_box(&text)).unwrap();
            let values: Vec<serde_json::Value> = list
                .items
                .iter()
                .map(|o| serde_json::to_value(o).unwrap())
                .collect();
            black_box(values)
        });
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
