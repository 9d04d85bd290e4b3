//! Rulesets are validated when they are applied: kube-apiserver sends each OperationRuleSet
//! created or changed to the server's admission door (the webhook `ifo-ruleset-validation`,
//! registered in the test cluster as an install registers it), so `kubectl apply` of one that
//! does not compile fails with the compiler's message and its caret, and nothing is created or
//! changed; what the CRD's schema refuses is refused before. The door answers without
//! credentials (kube-apiserver sends none) and nothing but reviews.

use ifo_dev::User;
use ifo_test_support::{
    broken_rules, denied_by, door_open, env, not_created, refused, ruleset, said_all, stored,
    vm_ruleset,
};
use serde_json::{Value, json};

#[test]
fn a_ruleset_that_does_not_compile_is_refused_at_apply_with_its_caret() {
    let env = env();
    let ns = door_open(env, "adm-broken");
    let rs = format!("broken-{ns}");
    let stderr = refused(env, &ruleset(&rs, &ns, broken_rules()));
    println!("kubectl apply said:\n{stderr}");
    said_all(
        &stderr,
        &[
            denied_by().as_str(),
            "rules[1] (Broken).expression: ERROR: <input>:1:33",
            "\n| object.status.printableStatus ==\n",
            &format!("\n| {}^", ".".repeat(32)),
        ],
    );
    not_created(env, &rs);
}

#[test]
fn a_valid_ruleset_applies_and_an_update_that_breaks_it_is_refused() {
    let env = env();
    let ns = door_open(env, "adm-update");
    let rs = format!("vm-rules-{ns}");
    env.apply(&vm_ruleset(&rs, &ns));
    let before = stored(env, &rs).expect("the valid ruleset is created");

    let stderr = refused(env, &ruleset(&rs, &ns, broken_rules()));
    assert!(stderr.contains(&denied_by()), "{stderr}");
    assert!(
        stderr.contains("rules[1] (Broken).expression: ERROR: <input>:1:33"),
        "{stderr}"
    );
    let after = stored(env, &rs).expect("the ruleset is still there");
    assert_eq!(
        after["spec"], before["spec"],
        "the refused update changed the spec"
    );
    assert_eq!(
        after["metadata"]["generation"],
        before["metadata"]["generation"]
    );

    // A patch is an update like any other; a delete is never sent to the door.
    let patch = env.kubectl(
        User::Admin,
        &[
            "patch",
            "ors",
            &rs,
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/spec/rules/0/expression","value":"object.spec.("}]"#,
        ],
    );
    let error = format!("{:#}", patch.expect_err("a breaking patch is refused"));
    assert!(error.contains(&denied_by()), "{error}");
    assert!(error.contains("rules[0] (Migrating).expression"), "{error}");
    env.kubectl(User::Admin, &["delete", "ors", &rs]).unwrap();
}

#[test]
fn an_unknown_field_in_spec_is_refused_by_the_crd_schema_first() {
    let env = env();
    let ns = env.namespace("adm-unknown");
    let rs = format!("unknown-{ns}");
    let mut manifest: Value = serde_json::from_str(&ruleset(
        &rs,
        &ns,
        json!([{"operation": "Ok", "expression": "true"}]),
    ))
    .unwrap();
    manifest["spec"]["rulez"] = json!([]);
    // kubectl's default field validation is Strict: kube-apiserver refuses the field against the
    // CRD's schema, before any webhook is called.
    let stderr = refused(env, &manifest.to_string());
    println!("kubectl apply said:\n{stderr}");
    assert!(stderr.contains("unknown field \"spec.rulez\""), "{stderr}");
    assert!(!stderr.contains(&denied_by()), "{stderr}");
    assert!(stored(env, &rs).is_none());
}

#[test]
fn the_door_answers_kube_apiservers_certificate_and_counts_reviews() {
    let env = env();
    door_open(env, "adm-direct");
    // The client certificate the local cluster's kube-apiserver presents to webhooks.
    let pki = env.cluster.dir().join("pki");
    let cert = pki.join("webhook-client.crt").display().to_string();
    let key = pki.join("webhook-client.key").display().to_string();
    let post = |credentials: &[&str]| {
        let mut args = vec![
            "-X",
            "POST",
            "-H",
            "Content-Type: application/json",
            "-d",
            "{not json",
        ];
        args.extend(credentials);
        env.door("/admission/rulesets", &args)
    };
    let (code, body) = post(&["--cert", &cert, "--key", &key]);
    assert_eq!(code, "400", "{body}");
    assert!(body.starts_with("malformed AdmissionReview"), "{body}");
    // Anyone else is refused before the body is read.
    let (code, body) = post(&[]);
    assert_eq!(code, "401", "{body}");
    let (code, _) = env.door("/admission/rulesets", &[]);
    assert_eq!(code, "405");
    // The doors have a port of their own: the API's port does not serve them, and theirs serves
    // nothing else.
    let (code, _) = env.direct(
        "/admission/rulesets",
        &["-X", "POST", "--cert", &cert, "--key", &key],
    );
    assert_eq!(code, "404");
    let (code, _) = env.door("/metrics", &[]);
    assert_eq!(code, "404");
    let (code, _) = env.door("/readyz", &[]);
    assert_eq!(code, "404");
    // Everything else still asks who is calling.
    let (code, _) = env.direct("/metrics", &[]);
    assert_eq!(code, "401");

    let count = |decision: &str| {
        env.metric(&format!(
            "ifo_admission_reviews_total{{door=\"rulesets\",decision=\"{decision}\"}}"
        ))
    };
    assert!(
        count("denied") >= 1.0,
        "door_open was refused at least once"
    );
    assert!(count("error") >= 1.0, "the malformed review");
    let metrics = env.metrics();
    assert!(metrics.contains("ifo_admission_review_duration_seconds_bucket{"));
}
