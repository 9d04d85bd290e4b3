//! Rulesets are validated when they are applied: kube-apiserver sends each OperationRuleSet
//! created or changed to the server's admission door (the webhook `ifo-ruleset-validation`,
//! registered in the test cluster as an install registers it), so `kubectl apply` of one that
//! does not compile fails with the compiler's message and its caret, and nothing is created or
//! changed; what the CRD's schema refuses is refused before. The door answers without
//! credentials (kube-apiserver sends none) and nothing but reviews.

use ifo_dev::{RULESET_WEBHOOK, User};
use ifo_test_support::{Env, env, eventually, vm_ruleset};
use serde_json::{Value, json};
use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

/// How kube-apiserver prefixes the door's refusals.
pub(super) fn denied_by() -> String {
    format!("admission webhook \"{RULESET_WEBHOOK}.ifo.kubevirt.io\" denied the request")
}

/// `kubectl apply -f -` of `manifest` as admin, with `extra` arguments: its output whatever it is.
pub(super) fn apply(env: &Env, manifest: &str, extra: &[&str]) -> Output {
    let mut child = env
        .cluster
        .kubectl(User::Admin)
        .args(["apply", "-f", "-"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(manifest.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Applies `manifest`, which must be refused; returns kubectl's stderr.
pub(super) fn refused(env: &Env, manifest: &str) -> String {
    let out = apply(env, manifest, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "kubectl apply succeeded: {}{stderr}",
        String::from_utf8_lossy(&out.stdout)
    );
    stderr
}

/// A VirtualMachine ruleset in `ns` with `rules`.
pub(super) fn ruleset(name: &str, ns: &str, rules: Value) -> String {
    json!({
        "apiVersion": "ifo.kubevirt.io/v1alpha1",
        "kind": "OperationRuleSet",
        "metadata": {"name": name},
        "spec": {
            "target": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachines"},
            "namespaces": [ns],
            "rules": rules,
        }
    })
    .to_string()
}

/// A rule that compiles and one that does not (the expression ends too early, at 1:33).
fn broken_rules() -> Value {
    json!([
        {"operation": "Ok", "expression": "true"},
        {"operation": "Broken", "expression": "object.status.printableStatus =="},
    ])
}

/// A fresh namespace (named after `prefix`), once kube-apiserver calls the door (it picks a new
/// webhook registration up within a second or so): a server-side dry run of a broken ruleset is
/// refused by it. Creates nothing else.
pub(super) fn door_open(env: &Env, prefix: &str) -> String {
    let ns = env.namespace(prefix);
    let probe = ruleset(&format!("probe-{ns}"), &ns, broken_rules());
    eventually(Duration::from_secs(30), "the webhook in effect", || {
        let out = apply(env, &probe, &["--dry-run=server"]);
        String::from_utf8_lossy(&out.stderr)
            .contains(&denied_by())
            .then_some(())
    });
    ns
}

/// The ruleset `name` as the cluster has it, if it has it.
/// `said` (what kubectl printed) holds every one of `wanted`.
pub(super) fn said_all(said: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(said.contains(w), "{w:?} not in:\n{said}");
    }
}

/// The ruleset `name`, refused, was not created.
pub(super) fn not_created(env: &Env, name: &str) {
    assert!(
        stored(env, name).is_none(),
        "the refused ruleset {name} was created"
    );
}

pub(super) fn stored(env: &Env, name: &str) -> Option<Value> {
    let out = env
        .kubectl(
            User::Admin,
            &["get", "ors", name, "--ignore-not-found", "-o", "json"],
        )
        .unwrap();
    (!out.trim().is_empty()).then(|| serde_json::from_str(&out).unwrap())
}

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
        env.direct("/admission/rulesets", &args)
    };
    let (code, body) = post(&["--cert", &cert, "--key", &key]);
    assert_eq!(code, "400", "{body}");
    assert!(body.starts_with("malformed AdmissionReview"), "{body}");
    // Anyone else is refused before the body is read.
    let (code, body) = post(&[]);
    assert_eq!(code, "401", "{body}");
    let (code, _) = env.direct("/admission/rulesets", &[]);
    assert_eq!(code, "405");
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
