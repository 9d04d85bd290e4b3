//! Object events per second on one core: bind a ~5 KB KubeVirt VirtualMachine and evaluate one
//! ruleset against it, as the watcher does for every event.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use ifo::evaluate::{Bound, Engine, RuleExprs, RuleResult, RuleSetExprs, evaluate};

const VM: &str = include_str!("../src/evaluate/testdata/virtualmachine.json");

fn rule(engine: &Engine, operation: &str, matches: &str, message: Option<&str>) -> RuleExprs {
    let compile = |src: &str| engine.compile(src).expect("benchmark rule compiles");
    RuleExprs {
        operation: operation.to_owned(),
        matches: compile(matches),
        message: message.map(compile),
        outcome: None,
        start_time: None,
        progress: None,
        stalled: None,
        schedule: None,
    }
}

fn printable_status(engine: &Engine, status: &str) -> RuleExprs {
    rule(
        engine,
        status,
        &format!(
            "has(object.status.printableStatus) && object.status.printableStatus == \"{status}\""
        ),
        None,
    )
}

fn phase(engine: &Engine, phase: &str) -> RuleExprs {
    rule(
        engine,
        phase,
        &format!(
            "has(object.status) && has(object.status.phase) && object.status.phase == \"{phase}\""
        ),
        None,
    )
}

/// The Available/Progressing/Degraded matrix of the operator rulesets.
fn condition_matrix(engine: &Engine, op: &str, a: &str, p: &str, d: &str) -> RuleExprs {
    let exists = |t: &str, s: &str| {
        format!("object.status.conditions.exists(c, c.type == \"{t}\" && c.status == \"{s}\")")
    };
    rule(
        engine,
        op,
        &format!(
            "has(object.status) && has(object.status.conditions) && {} && {} && {}",
            exists("Available", a),
            exists("Progressing", p),
            exists("Degraded", d)
        ),
        None,
    )
}

/// 3 rules: a `has()`+`==` rule with a message, an `exists()` over conditions, a phase rule.
fn three_rules(engine: &Engine) -> RuleSetExprs {
    RuleSetExprs {
        rules: vec![
            rule(
                engine,
                "Migrating",
                "has(object.status.printableStatus) && object.status.printableStatus == \"Migrating\"",
                Some("'migrating to ' + object.status.migrationState.targetNode"),
            ),
            rule(
                engine,
                "Progressing",
                "object.status.conditions.exists(c, c.type == \"Progressing\" && c.status == \"True\")",
                Some("object.status.conditions.filter(c, c.type == 'Progressing')[0].message"),
            ),
            phase(engine, "Pending"),
        ],
        label_expressions: vec![],
    }
}

/// 20 rules in the shapes of the shipped rulesets.
fn twenty_rules(engine: &Engine) -> RuleSetExprs {
    let mut rules = vec![rule(
        engine,
        "Migrating",
        "has(object.status.printableStatus) && object.status.printableStatus == \"Migrating\"",
        Some("'migrating to ' + object.status.migrationState.targetNode"),
    )];
    for s in [
        "Starting",
        "Stopping",
        "Provisioning",
        "Terminating",
        "WaitingForReceiver",
    ] {
        rules.push(printable_status(engine, s));
    }
    for p in ["Pending", "Scheduling", "Scheduled", "Running"] {
        rules.push(phase(engine, p));
    }
    for (op, a, p, d) in [
        ("Deploying", "False", "True", "False"),
        ("Reconciling", "True", "True", "False"),
        ("ReconcilingDegraded", "True", "True", "True"),
        ("Healing", "False", "True", "True"),
        ("Failing", "False", "False", "True"),
    ] {
        rules.push(condition_matrix(engine, op, a, p, d));
    }
    rules.push(rule(
        engine,
        "Progressing",
        "object.status.conditions.exists(c, c.type == \"Progressing\" && c.status == \"True\")",
        Some("object.status.conditions.filter(c, c.type == 'Progressing')[0].message"),
    ));
    rules.push(rule(
        engine,
        "VolumesUpdating",
        "has(object.status.volumeUpdateState) && size(object.status.volumeUpdateState.volumeMigrationState.migratedVolumes) > 0",
        None,
    ));
    rules.push(rule(
        engine,
        "GenerationPending",
        "has(object.status.observedGeneration) && object.metadata.generation > object.status.observedGeneration",
        None,
    ));
    rules.push(rule(
        engine,
        "SnapshotBlocked",
        "object.status.volumeSnapshotStatuses.exists(v, v.enabled == false && has(v.reason))",
        Some(
            "object.status.volumeSnapshotStatuses.filter(v, !v.enabled).map(v, v.name).join(', ')",
        ),
    ));
    rules.push(rule(
        engine,
        "Renamed",
        "object.metadata.name.matches('^rhel[0-9]+-web-[0-9]{2}$') && !('kubevirt.io/domain' in object.metadata.labels)",
        None,
    ));
    assert_eq!(rules.len(), 20);
    RuleSetExprs {
        rules,
        label_expressions: vec![],
    }
}

fn bench(c: &mut Criterion) {
    let engine = Engine::new();
    let vm: serde_json::Value = serde_json::from_str(VM).expect("valid fixture");
    let mut group = c.benchmark_group("event");
    group.throughput(Throughput::Elements(1));
    group.measurement_time(Duration::from_secs(5));

    for (name, exprs) in [
        ("bind+evaluate/3-rules", three_rules(&engine)),
        ("bind+evaluate/20-rules", twenty_rules(&engine)),
    ] {
        // The rules must evaluate, not error, or the figure would flatter error paths.
        let check = evaluate(&exprs, &Bound::new(&vm));
        assert!(
            check
                .rules
                .iter()
                .all(|r| !matches!(r, RuleResult::Error(_))),
            "{name}: {check:?}"
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                let bound = Bound::new(black_box(&vm));
                black_box(evaluate(&exprs, &bound))
            })
        });
    }

    // For reference: what parsing the object from the watch stream costs on top.
    let exprs = three_rules(&engine);
    group.bench_function("parse+bind+evaluate/3-rules", |b| {
        b.iter(|| {
            let vm: serde_json::Value = serde_json::from_str(black_box(VM)).unwrap();
            let bound = Bound::new(&vm);
            black_box(evaluate(&exprs, &bound).rules.len())
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
