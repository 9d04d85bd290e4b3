use std::sync::LazyLock;

use serde_json::{Value as Json, json};

use super::*;

static ENGINE: LazyLock<Engine> = LazyLock::new(Engine::new);

static VM: LazyLock<Json> = LazyLock::new(|| {
    serde_json::from_str(include_str!("testdata/virtualmachine.json")).expect("valid fixture")
});

fn compile(src: &str) -> Expr {
    ENGINE
        .compile(src)
        .unwrap_or_else(|e| panic!("{src} should compile: {e}"))
}

fn eval_on(object: &Json, src: &str) -> Result<bool, EvalError> {
    compile(src).eval_bool(&Bound::new(object))
}

fn eval(src: &str) -> Result<bool, EvalError> {
    eval_on(&VM, src)
}

#[track_caller]
fn assert_true(src: &str) {
    assert_eq!(eval(src), Ok(true), "{src}");
}

#[track_caller]
fn assert_false(src: &str) {
    assert_eq!(eval(src), Ok(false), "{src}");
}

#[track_caller]
fn assert_exec_err(src: &str, contains: &str) {
    match eval(src) {
        Err(EvalError::Execution(e)) => {
            let msg = e.message();
            assert!(msg.contains(contains), "{src}: {msg:?} lacks {contains:?}")
        }
        other => panic!("{src}: expected an execution error, got {other:?}"),
    }
}

fn string(src: &str) -> Result<String, EvalError> {
    compile(src).eval_string(&Bound::new(&VM))
}

#[track_caller]
fn assert_string(src: &str, want: &str) {
    assert_eq!(string(src), Ok(want.to_owned()), "{src}");
}

fn wrong_type(expected: &'static str, got: &str) -> EvalError {
    EvalError::WrongType {
        expected,
        got: got.to_owned(),
    }
}

/// The type a result was expected to have, when it is a wrong type error.
fn expected_type<T>(result: &Result<T, EvalError>) -> Option<&'static str> {
    match result {
        Err(EvalError::WrongType { expected, .. }) => Some(expected),
        _ => None,
    }
}

#[test]
fn public_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Engine>();
    assert_send_sync::<Expr>();
    assert_send_sync::<Bound<'static>>();
    assert_send_sync::<RuleSetExprs>();
    assert_send_sync::<Evaluation>();
    assert_send_sync::<CompileError>();
    assert_send_sync::<EvalError>();
}

#[test]
fn evaluates_across_threads_with_shared_expressions() {
    let expr = compile("object.status.conditions.exists(c, c.type == 'Progressing')");
    std::thread::scope(|s| {
        for _ in 0..4 {
            let expr = expr.clone();
            s.spawn(move || {
                let bound = Bound::new(&VM);
                for _ in 0..100 {
                    assert_eq!(expr.eval_bool(&bound), Ok(true));
                }
            });
        }
    });
}

// ---- has() and missing fields -------------------------------------------------------------

#[test]
fn has_tests_presence() {
    assert_true(
        "has(object.status.printableStatus) && object.status.printableStatus == 'Migrating'",
    );
    assert_false("has(object.status.nonexistent)");
    assert_true("has(object.metadata.labels.app)");
    // present but JSON null: presence, not non-null
    assert_true("has(object.spec.runStrategy)");
    assert_true("object.spec.template.spec.domain.devices.disks.exists(d, has(d.serial))");
}

#[test]
fn has_on_a_missing_intermediate_field_errors() {
    assert_exec_err("has(object.nothere.foo)", "nothere");
    // parent is null: no field can be selected on it
    assert!(matches!(
        eval("has(object.spec.runStrategy.foo)"),
        Err(EvalError::Execution(_))
    ));
}

#[test]
fn has_on_empty_object_is_false() {
    assert_eq!(eval_on(&json!({}), "has(object.status)"), Ok(false));
    assert_eq!(eval_on(&Json::Null, "has(object.status)"), Ok(false));
    assert_eq!(
        eval_on(&json!({}), "has(object.status) && has(object.status.phase)"),
        Ok(false)
    );
}

#[test]
fn selecting_a_missing_field_errors() {
    assert_exec_err(
        "object.status.nonexistent == 'x'",
        "No such key: nonexistent",
    );
}

#[test]
fn missing_paths_report_the_first_missing_field() {
    assert_exec_err("object.nothere.x == 1", "No such key: nothere");
    assert_exec_err(
        "object.status.nothere.deeper.still == 1",
        "No such key: nothere",
    );
    assert_exec_err("object.spec.runStrategy.foo == 1", "null_type");
    assert_exec_err("object.status.conditions.type == 'x'", "list");
    assert_exec_err("object.metadata.name.first == 'x'", "string");
    // the same paths through a comprehension variable
    assert_exec_err(
        "object.status.conditions.exists(c, c.nothere.x == 1)",
        "No such key: nothere",
    );
}

#[test]
fn logical_operators_absorb_errors() {
    assert_false("false && object.nothere.x == 1");
    assert_false("object.nothere.x == 1 && false");
    assert_true("true || object.nothere.x == 1");
    assert_true("object.nothere.x == 1 || true");
    assert_exec_err("true && object.nothere.x == 1", "nothere");
    assert_exec_err("object.nothere.x == 1 || false", "nothere");
    assert_true("!has(object.status.readyToUse) || object.status.readyToUse == false");
}

#[test]
fn exists_absorbs_errors_when_an_element_matches() {
    // 3 of the 5 conditions have no `reason`
    assert_true("object.status.conditions.exists(c, c.reason == 'Migrating')");
    assert_exec_err(
        "object.status.conditions.exists(c, c.reason == 'nomatch')",
        "reason",
    );
    // `c.type == X && c.reason == Y` is safe on conditions without a reason
    assert_false("object.status.conditions.exists(c, c.type == 'Nope' && c.reason == 'TimingOut')");
    assert_false("object.status.conditions.all(c, c.reason == '')");
}

// ---- numbers --------------------------------------------------------------------------------

#[test]
fn json_integers_bind_as_int() {
    assert_true("type(object.metadata.generation) == int");
    assert_true("object.metadata.generation + 1 == 8");
    assert_true("object.spec.template.spec.domain.cpu.cores * 2 == 4");
    assert_true("object.spec.template.spec.terminationGracePeriodSeconds / 60 == 3");
    assert_true("type(object.status.cpuRatio) == double");
    assert_true("object.status.cpuRatio * 2.0 == 1.0");
    assert_eq!(
        eval_on(&json!({"n": u64::MAX}), "type(object.n) == uint"),
        Ok(true)
    );
    assert_eq!(eval_on(&json!({"n": -3}), "object.n + 3 == 0"), Ok(true));
}

#[test]
fn numbers_compare_across_types() {
    assert_true("object.metadata.generation == 7.0");
    assert_true("object.metadata.generation == 7u");
    assert_true("object.status.cpuRatio < 1");
    assert_true("object.status.outdatedVirtualMachineInstanceWorkloads > -1");
    assert_true("object.status.desiredGeneration >= object.status.observedGeneration");
    // no mixed arithmetic, as in cel-go
    assert!(eval("object.status.cpuRatio * 2 == 1").is_err());
    // heterogeneous equality is false, not an error
    assert_false("object.metadata.generation == '7'");
}

// ---- strings, lists, maps, null -------------------------------------------------------------

#[test]
fn shipped_rule_features() {
    assert_true("object.status.observedGeneration != object.metadata.uid");
    assert_true("size(object.status.history) > 0");
    assert_true("object.status.history[0].state == \"Partial\"");
    assert_false("object.spec.running == false");
    assert_true(
        "!object.status.conditions.exists(c, c.type == \"Degraded\" && c.status == \"True\")",
    );
    assert_true(
        "(object.status.printableStatus == \"Starting\" || object.status.printableStatus == \"Migrating\")",
    );
}

#[test]
fn containers_and_indexing() {
    assert_true("'kubevirt.io/domain' in object.metadata.labels");
    assert_false("'nope' in object.metadata.labels");
    assert_true("object.metadata.labels['kubevirt.io/domain'] == object.metadata.name");
    assert_true("'Ready' in object.status.conditions.map(c, c.type)");
    assert_true("'fd02::2d' in object.status.interfaces[0].ipAddresses");
    assert_true("object.status.conditions[1u].type == 'LiveMigratable'");
    assert_exec_err("object.status.conditions[10].type == 'x'", "out of bounds");
    assert_true("object.metadata.labels.exists(k, k.startsWith('app'))");
    assert_true("object.status.conditions.filter(c, has(c.reason)).size() == 2");
    assert_true("size(object.metadata.labels) == 4 && object.metadata.labels.size() == 4");
    assert_true("object.status.interfaces[0].ipAddresses == ['10.128.2.45', 'fd02::2d']");
    assert_true(
        "object.spec.template.spec.domain.cpu == {'cores': 2, 'sockets': 1, 'threads': 1, 'model': 'host-model'}",
    );
    assert_true("object.metadata.labels == object.metadata.labels");
    assert_false("object.metadata.labels == object.metadata.annotations");
    assert_true(
        "object.status.interfaces[0].ipAddresses + ['x'] == ['10.128.2.45', 'fd02::2d', 'x']",
    );
    assert_true("type(object) == map && type(object.status.conditions) == list");
    assert_exec_err("object.status.conditions + 1 == []", "_+_");
    assert_true("object.status.volumeUpdateState.volumeMigrationState.migratedVolumes.size() == 0");
}

#[test]
fn null_fields() {
    assert_true("object.spec.runStrategy == null");
    assert_true("object.status.conditions[0].lastProbeTime == null");
    assert_false("object.metadata.name == null");
}

#[test]
fn strings_extension() {
    assert_string(
        "object.status.conditions.map(c, c.type).join(',')",
        "Ready,LiveMigratable,StorageLiveMigratable,Progressing,AgentConnected",
    );
    assert_string("object.metadata.name.upperAscii()", "RHEL9-WEB-01");
    assert_string(
        "'%s/%s'.format([object.metadata.namespace, object.metadata.name])",
        "prod-apps/rhel9-web-01",
    );
    assert_string(
        "object.metadata.namespace + '/' + object.metadata.name",
        "prod-apps/rhel9-web-01",
    );
}

#[test]
fn ternary_and_conversions() {
    assert_string("object.status.ready ? 'yes' : 'no'", "yes");
    assert_string("string(object.metadata.generation)", "7");
    assert_true("int('42') == 42 && dyn(object.metadata.generation) == 7");
}

#[test]
fn optional_syntax() {
    assert_string("object.status.?x.orValue('')", "");
    assert_string(
        "object.?status.?migrationState.?targetNode.orValue('')",
        "worker-7",
    );
    assert_string(
        "object.?status.?nothere.?targetNode.orValue('none')",
        "none",
    );
    assert_string("object.metadata.labels[?'missing'].orValue('d')", "d");
    assert_true("object.status.?conditions.hasValue()");
    assert_true("object.status.?conditions.optMap(cs, cs.size()).orValue(0) == 5");
    assert_true("object.status.?conditions[0].type.orValue('') == 'Ready'");
}

#[test]
fn timestamps_and_durations() {
    assert_true(
        "timestamp(object.status.migrationState.startTimestamp) > timestamp(object.metadata.creationTimestamp)",
    );
    assert_true(
        "timestamp(object.status.migrationState.startTimestamp) - timestamp('2026-11-22T10:00:00Z') > duration('15m')",
    );
}

// ---- functions ------------------------------------------------------------------------------

#[test]
fn matches_is_cached_and_works_in_both_forms() {
    let pattern = "^rhel[0-9]+-web-[0-9]{2}$";
    assert_true(&format!("object.metadata.name.matches('{pattern}')"));
    assert!(functions::REGEX_CACHE.contains(pattern));
    assert_true(&format!("matches(object.metadata.name, '{pattern}')"));
    assert_false("object.metadata.name.matches('^centos')");
    assert_true("object.metadata.name.matches('(?i)RHEL\\\\d')");
    // unanchored search, as in RE2
    assert_true("'abc'.matches('b')");
}

#[test]
fn invalid_regex_is_a_runtime_error() {
    assert_exec_err("object.metadata.name.matches('[')", "not a valid regex");
    assert_exec_err("object.metadata.name.matches('rhel(?=9)')", "look-around");
}

#[test]
fn regex_cache_is_bounded() {
    let cache = functions::RegexCache::new(4);
    for i in 0..10 {
        cache
            .get("matches", &format!("^bounded-{i}$"))
            .expect("valid pattern");
        assert!(cache.len() <= 4);
    }
    assert!(cache.contains("^bounded-9$"));
    assert_eq!(cache.len(), 4);
    // a hit neither grows nor evicts
    cache.get("matches", "^bounded-9$").unwrap();
    assert_eq!(cache.len(), 4);
    assert!(cache.get("matches", "(").is_err());
    assert_eq!(cache.len(), 4);
}

#[test]
fn kubernetes_regex_functions() {
    assert_string("'abc 123 def 456'.find('[0-9]+')", "123");
    assert_string("'abc'.find('[0-9]+')", "");
    assert_true("'abc 123 def 456'.findAll('[0-9]+') == ['123', '456']");
    assert_true("'a1 b2 c3'.findAll('[0-9]', 2) == ['1', '2']");
    assert_true("'a1 b2 c3'.findAll('[0-9]', -1).size() == 3");
    assert_true("'a1 b2 c3'.findAll('[0-9]', 0) == []");
}

#[test]
fn kubernetes_list_functions() {
    assert_true("[1, 2, 3].indexOf(2) == 1 && [1, 2, 2].lastIndexOf(2) == 2");
    assert_true("[1, 2, 3].indexOf(7) == -1");
    assert_true("object.status.conditions.map(c, c.type).indexOf('Progressing') == 3");
    assert_true("object.status.interfaces[0].ipAddresses.indexOf('fd02::2d') == 1");
    assert_true("[1, 2, 3].isSorted() && !['b', 'a'].isSorted() && [].isSorted()");
    assert_true("[1, 2, 3].sum() == 6 && [].sum() == 0 && [0.5, 0.25].sum() == 0.75");
    assert_true("[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3");
    assert_true("object.status.volumeSnapshotStatuses.map(v, v.name).max() == 'rootdisk'");
    assert_exec_err("[].min() == 1", "empty");
    assert_exec_err("['a', 1].max() == 1", "compare");
    assert_exec_err("['a'].sum() == 1", "sum");
    // strings ext `indexOf` is still there
    assert_true("'hello'.indexOf('l') == 2");
    // lists ext
    assert_true("object.status.conditions.map(c, c.status).distinct() == ['True']");
    assert_true("lists.range(3) == [0, 1, 2]");
    assert_true("[3, 1, 2].sort() == [1, 2, 3]");
    // the extension functions accept bound JSON arrays, not only list literals
    let ips = "object.status.interfaces[0].ipAddresses";
    assert_true(&format!("{ips}.reverse() == ['fd02::2d', '10.128.2.45']"));
    assert_true(&format!("{ips}.sort() == ['10.128.2.45', 'fd02::2d']"));
    assert_true(&format!("{ips}.slice(1, 2) == ['fd02::2d']"));
    assert_true(&format!("{ips}.join(' ') == '10.128.2.45 fd02::2d'"));
    assert_true(&format!("[{ips}, ['x']].flatten().size() == 3"));
    assert_true(
        "object.spec.template.spec.domain.devices.disks.sortBy(d, d.serial)[0].name == 'cloudinitdisk'",
    );
}

// ---- compile errors ---------------------------------------------------------------------------

#[test]
fn syntax_error_has_position_and_caret() {
    let err = ENGINE
        .compile("object.status.printableStatus ==")
        .expect_err("incomplete expression");
    assert!(err.message.contains("1:33"), "{}", err.message);
    assert!(err.message.contains('^'), "{}", err.message);
}

#[test]
fn undeclared_variables_are_compile_errors() {
    let err = ENGINE
        .compile("object.status.printableStatus == Migrating")
        .expect_err("forgotten quotes");
    assert!(
        err.message.contains("undeclared reference to 'Migrating'"),
        "{}",
        err.message
    );
    assert!(err.message.contains("<input>:1:34"), "{}", err.message);
    assert!(ENGINE.compile("foo == 1").is_err());
    assert!(ENGINE.compile("oldObject.spec == object.spec").is_err());
    // a comprehension variable is only in scope inside its comprehension
    assert!(
        ENGINE
            .compile("object.status.conditions.exists(c, c.type == 'Ready') && c.status == 'True'")
            .is_err()
    );
}

#[test]
fn declared_names_compile() {
    for src in [
        "object.status.conditions.exists(c, c.type == 'Ready')",
        "object.a.all(x, object.b.exists(y, x == y))",
        "object.a.map(x, x + 1).filter(y, y > 2).size() > 0",
        "type(object.metadata.generation) == int",
        "type(object) == map && type(object.status.conditions) == list",
        "optional.of(1).hasValue() && optional.none().orValue(2) == 2",
        "lists.range(2) == [0, 1]",
        "strings.quote('a') == '\"a\"'",
        "[3, 1].sortBy(x, x) == [1, 3]",
        "{'a': object.metadata.name}.a != ''",
    ] {
        assert!(
            ENGINE.compile(src).is_ok(),
            "{src}: {:?}",
            ENGINE.compile(src).err()
        );
    }
}

#[test]
fn empty_and_oversized_sources_are_rejected() {
    assert!(ENGINE.compile("").is_err());
    assert!(ENGINE.compile("   \n ").is_err());
    let long = format!("object.metadata.name == '{}'", "x".repeat(MAX_SOURCE_LEN));
    let err = ENGINE.compile(&long).expect_err("too long");
    assert!(err.message.contains("limit"), "{}", err.message);
}

// ---- result types ---------------------------------------------------------------------------

#[test]
fn non_bool_rules_and_non_string_strings_are_wrong_types() {
    // (source, the type wanted, the type it has when the message is checked)
    let cases = [
        ("object.metadata.name", "bool", Some("string")),
        ("object.status.conditions", "bool", None),
        ("object.metadata.generation", "string", Some("int")),
        ("object.metadata.labels", "string", None),
    ];
    for (src, wanted, has) in cases {
        let result = match wanted {
            "bool" => eval(src).map(drop),
            _ => string(src).map(drop),
        };
        match has {
            Some(has) => assert_eq!(result, Err(wrong_type(wanted, has)), "{src}"),
            None => assert_eq!(expected_type(&result), Some(wanted), "{src}"),
        }
    }
}

/// A runtime error keeps what raised it: the interpreter's error for a missing key, the
/// parser's for a string that is not a timestamp; its message is the one it always was.
#[test]
fn a_runtime_error_keeps_its_cause() {
    let Err(e) = eval("object.nothere.x == 1") else {
        panic!("a missing key fails")
    };
    assert_eq!(e.to_string(), "No such key: nothere");
    let cause = std::error::Error::source(&e).expect("a cause");
    assert!(
        matches!(
            cause.downcast_ref::<cel::ExecutionError>(),
            Some(cel::ExecutionError::NoSuchKey(key)) if key.as_str() == "nothere"
        ),
        "{cause:?}"
    );
    let Err(e) = compile("object.metadata.name").eval_timestamp(&Bound::new(&VM)) else {
        panic!("a name is not a timestamp")
    };
    assert!(
        e.to_string().contains("is not an RFC 3339 timestamp"),
        "{e}"
    );
    let cause = std::error::Error::source(&e).expect("a cause");
    assert!(cause.downcast_ref::<jiff::Error>().is_some(), "{cause:?}");
    // What the evaluator finds itself has no cause.
    let (progress, _) = live_values("'abc%'", "false");
    let Some(Err(e)) = progress else {
        panic!("not a progress")
    };
    assert!(std::error::Error::source(&e).is_none());
}

#[test]
fn eval_timestamp_from_rfc3339_string_or_timestamp() {
    let bound = Bound::new(&VM);
    let expected: jiff::Timestamp = "2026-11-22T10:15:02Z".parse().unwrap();
    assert_eq!(
        compile("object.status.migrationState.startTimestamp").eval_timestamp(&bound),
        Ok(expected)
    );
    assert_eq!(
        compile("timestamp(object.status.migrationState.startTimestamp)").eval_timestamp(&bound),
        Ok(expected)
    );
    assert_eq!(
        compile("timestamp('2026-11-22T11:15:02.5+01:00')").eval_timestamp(&bound),
        Ok(expected + jiff::SignedDuration::from_millis(500))
    );
    assert!(matches!(
        compile("object.metadata.name").eval_timestamp(&bound),
        Err(EvalError::Execution(_))
    ));
    assert!(matches!(
        compile("object.metadata.generation").eval_timestamp(&bound),
        Err(EvalError::WrongType { .. })
    ));
}

// ---- evaluate() -----------------------------------------------------------------------------

fn rule(
    operation: &str,
    matches: &str,
    message: Option<&str>,
    outcome: Option<&str>,
    start_time: Option<&str>,
) -> RuleExprs {
    RuleExprs {
        operation: operation.to_owned(),
        matches: compile(matches),
        message: message.map(compile),
        outcome: outcome.map(compile),
        start_time: start_time.map(compile),
        progress: None,
        stalled: None,
        schedule: None,
    }
}

#[test]
fn evaluate_maps_rules_in_order() {
    let exprs = RuleSetExprs {
        rules: vec![
            rule(
                "Migrating",
                "has(object.status.printableStatus) && object.status.printableStatus == 'Migrating'",
                Some("'to ' + object.status.migrationState.targetNode"),
                Some("'Succeeded'"),
                Some("object.status.migrationState.startTimestamp"),
            ),
            rule(
                "Stopping",
                "object.status.printableStatus == 'Stopping'",
                Some("'stopping'"),
                Some("object.status.?outcome.orValue('Failed')"),
                Some("object.metadata.creationTimestamp"),
            ),
            rule(
                "Broken",
                "object.status.nothere == 'x'",
                Some("'never'"),
                Some("'never'"),
                None,
            ),
            rule("NotBool", "object.metadata.generation", None, None, None),
            rule(
                "BadMessage",
                "true",
                Some("object.metadata.generation"),
                None,
                Some("object.nothere"),
            ),
            rule("NoExtras", "false", None, None, None),
        ],
        label_expressions: vec![
            ("ns".to_owned(), compile("object.metadata.namespace")),
            ("gen".to_owned(), compile("object.metadata.generation")),
            ("missing".to_owned(), compile("object.metadata.labels.nope")),
        ],
    };
    let result = evaluate(&exprs, &Bound::new(&VM));
    assert_eq!(result.rules.len(), 6);
    let started = "2026-11-22T10:15:02Z".parse().unwrap();
    assert_eq!(
        result.rules[0],
        RuleResult::active(Some(Ok("to worker-7".to_owned())), Some(Ok(started)))
    );
    assert_eq!(
        result.rules[1],
        RuleResult::Inactive {
            outcome: Some(Ok("Failed".to_owned()))
        }
    );
    assert!(
        matches!(&result.rules[2], RuleResult::Error(EvalError::Execution(e)) if e.message().contains("nothere"))
    );
    assert_eq!(
        result.rules[3],
        RuleResult::Error(wrong_type("bool", "int"))
    );
    match &result.rules[4] {
        RuleResult::Active {
            message:
                Some(Err(EvalError::WrongType {
                    expected: "string", ..
                })),
            start_time: Some(Err(EvalError::Execution(_))),
            progress: None,
            stalled: None,
        } => {}
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(result.rules[5], RuleResult::Inactive { outcome: None });

    assert_eq!(result.labels.len(), 3);
    assert_eq!(
        result.labels[0],
        ("ns".to_owned(), Ok("prod-apps".to_owned()))
    );
    assert_eq!(result.labels[1].0, "gen");
    assert_eq!(expected_type(&result.labels[1].1), Some("string"));
    assert!(matches!(result.labels[2].1, Err(EvalError::Execution(_))));
}

#[test]
fn evaluate_mixes_engines() {
    let other = Engine::new();
    let exprs = RuleSetExprs {
        rules: vec![
            rule(
                "A",
                "object.metadata.name == 'rhel9-web-01'",
                None,
                None,
                None,
            ),
            RuleExprs {
                operation: "B".to_owned(),
                matches: other.compile("object.metadata.generation == 7").unwrap(),
                message: Some(compile("object.metadata.name")),
                outcome: None,
                start_time: None,
                progress: None,
                stalled: None,
                schedule: None,
            },
        ],
        label_expressions: vec![],
    };
    let result = evaluate(&exprs, &Bound::new(&VM));
    assert_eq!(
        result.rules,
        vec![
            RuleResult::active(None, None),
            RuleResult::active(Some(Ok("rhel9-web-01".to_owned())), None)
        ]
    );
}

#[test]
fn one_bound_object_serves_many_expressions() {
    let bound = Bound::new(&VM);
    let a = compile("object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')");
    let b = compile("object.status.conditions[3].reason");
    for _ in 0..3 {
        assert_eq!(a.eval_bool(&bound), Ok(true));
        assert_eq!(b.eval_string(&bound), Ok("Migrating".to_owned()));
    }
    assert_eq!(
        a.source(),
        "object.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"
    );
}

/// What a rule's progress and stalled expressions gave.
type LiveValues = (
    Option<Result<Option<f64>, EvalError>>,
    Option<Result<Option<String>, EvalError>>,
);

/// The progress and stalled of the one rule of a ruleset that always matches.
fn live_values(progress: &str, stalled: &str) -> LiveValues {
    let mut rule = rule("Op", "true", None, None, None);
    rule.progress = Some(compile(progress));
    rule.stalled = Some(compile(stalled));
    let exprs = RuleSetExprs {
        rules: vec![rule],
        label_expressions: vec![],
    };
    match evaluate(&exprs, &Bound::new(&VM)).rules.remove(0) {
        RuleResult::Active {
            progress, stalled, ..
        } => (progress, stalled),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn progress_is_a_percentage_or_an_error() {
    for (src, want) in [
        ("45", Some(45.0)),
        ("45.5", Some(45.5)),
        ("100u", Some(100.0)),
        ("'45.5%'", Some(45.5)),
        ("' 7 % '", Some(7.0)),
        ("'0'", Some(0.0)),
        ("''", None),
    ] {
        assert_eq!(live_values(src, "false").0, Some(Ok(want)), "{src}");
    }
    for src in [
        "101", "-1", "100.5", "'N/A'", "'140%'", "'NaN'", "true", "[1]",
    ] {
        let (progress, _) = live_values(src, "false");
        assert!(matches!(progress, Some(Err(_))), "{src}: {progress:?}");
    }
    let (progress, _) = live_values("'abc%'", "false");
    assert_eq!(
        progress,
        Some(Err(EvalError::Execution(
            "progress 'abc%' is not a number or a percentage".into()
        )))
    );
}

#[test]
fn stalled_is_a_bool_or_a_reason() {
    for (src, want) in [
        ("false", None),
        ("''", None),
        ("true", Some(String::new())),
        ("'ImportFailed'", Some("ImportFailed".to_owned())),
    ] {
        assert_eq!(live_values("''", src).1, Some(Ok(want)), "{src}");
    }
    for src in ["1", "null", "{'a': 1}"] {
        let (_, stalled) = live_values("''", src);
        let stalled = stalled.expect("a stalled expression");
        assert!(expected_type(&stalled).is_some(), "{src}: {stalled:?}");
    }
}

/// Every failing expression of a rule is named once, as a ruleset names it; the rest are not.
#[test]
fn a_rules_errors_name_each_failing_expression() {
    let e = || EvalError::Execution("no such key".into());
    let named = |r: &RuleResult| {
        r.errors()
            .map(|(part, error)| (part, error.to_string()))
            .collect::<Vec<_>>()
    };
    let active = RuleResult::Active {
        message: Some(Err(e())),
        start_time: Some(Ok(jiff::Timestamp::UNIX_EPOCH)),
        progress: Some(Err(e())),
        stalled: None,
    };
    assert_eq!(
        named(&active),
        [
            (Some("message"), "no such key".to_owned()),
            (Some("progress"), "no such key".to_owned())
        ]
    );
    assert_eq!(
        named(&RuleResult::Inactive {
            outcome: Some(Err(e()))
        }),
        [(Some("outcome"), "no such key".to_owned())]
    );
    assert_eq!(
        named(&RuleResult::Error(e())),
        [(None, "no such key".to_owned())]
    );
    assert!(named(&RuleResult::Inactive { outcome: None }).is_empty());
}
