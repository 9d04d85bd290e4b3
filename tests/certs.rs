//! `certs/generate.sh`: a CA and a serving certificate for the Service that verify with openssl and
//! load into rustls, the Secret, APIService and webhook manifests that carry them, and reruns that
//! keep what is still good.

use base64::Engine as _;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const NAMES: [&str; 4] = [
    "ifo-apiserver.ifo-system.svc",
    "ifo-apiserver.ifo-system.svc.cluster.local",
    // The maintenance guard's Service (deploy/guard/).
    "ifo-guard.ifo-system.svc",
    "ifo-guard.ifo-system.svc.cluster.local",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh, empty directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ifo-certs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `bash` by absolute path, so a test can run the script with a PATH of its own.
fn bash() -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|dir| dir.join("bash"))
        .find(|p| p.is_file())
        .expect("bash on PATH")
}

fn generate(args: &[&str]) -> Output {
    Command::new(bash())
        .arg(root().join("certs/generate.sh"))
        .args(args)
        .output()
        .unwrap()
}

fn generate_ok(out: &Path, extra: &[&str]) {
    let mut args = extra.to_vec();
    let out = out.display().to_string();
    args.push(&out);
    let result = generate(&args);
    assert!(
        result.status.success(),
        "certs/generate.sh {args:?} failed: {}",
        String::from_utf8_lossy(&result.stderr)
    );
}

/// Runs openssl; (success, stdout + stderr).
fn openssl(args: &[&str]) -> (bool, String) {
    let out = Command::new("openssl").args(args).output().unwrap();
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

fn verify(ca: &Path, cert: &Path, hostname: &str) -> (bool, String) {
    openssl(&[
        "verify",
        "-CAfile",
        &ca.display().to_string(),
        "-purpose",
        "sslserver",
        "-verify_hostname",
        hostname,
        &cert.display().to_string(),
    ])
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn yaml(path: &Path) -> Value {
    let text = String::from_utf8(read(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn decode(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(v.as_str().expect("a base64 string"))
        .unwrap()
}

#[test]
fn the_serving_certificate_verifies_against_its_ca_for_every_service_name() {
    let out = scratch("verify");
    generate_ok(&out, &[]);
    let (ca, cert) = (out.join("ca.crt"), out.join("tls.crt"));
    for name in NAMES {
        let (ok, text) = verify(&ca, &cert, name);
        assert!(ok && text.contains("OK"), "{name}: {text}");
    }
    let (ok, _) = verify(&ca, &cert, "kubernetes.default.svc");
    assert!(!ok, "the certificate must not be valid for other names");

    let (ok, text) = openssl(&[
        "x509",
        "-in",
        &cert.display().to_string(),
        "-noout",
        "-text",
    ]);
    assert!(ok, "{text}");
    let sans: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Subject Alternative Name"))
        .nth(1)
        .expect("a subjectAltName extension")
        .split(',')
        .map(str::trim)
        .collect();
    assert_eq!(sans, NAMES.map(|n| format!("DNS:{n}")), "{text}");
    assert!(text.contains("TLS Web Server Authentication"), "{text}");
    assert!(text.contains("CA:FALSE"), "{text}");
    let (_, ca_text) = openssl(&["x509", "-in", &ca.display().to_string(), "-noout", "-text"]);
    assert!(ca_text.contains("CA:TRUE"), "{ca_text}");

    // Another run into another directory makes another CA, which does not vouch for this one.
    let other = scratch("verify-other");
    generate_ok(&other, &[]);
    let (ok, text) = verify(&other.join("ca.crt"), &cert, NAMES[0]);
    assert!(!ok, "a foreign CA verified the certificate: {text}");

    // Keys are for their owner only.
    use std::os::unix::fs::PermissionsExt;
    for file in ["ca.key", "tls.key", "secret.yaml"] {
        let mode = std::fs::metadata(out.join(file))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{file} has mode {mode:o}");
    }
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn the_server_can_load_the_certificate_and_key() {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let out = scratch("rustls");
    generate_ok(&out, &[]);
    let certs = CertificateDer::pem_file_iter(out.join("tls.crt"))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(out.join("tls.key")).unwrap();
    rustls::ServerConfig::builder_with_provider(rustls::crypto::ring::default_provider().into())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("rustls accepts the serving certificate and key");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn the_manifests_carry_the_files_and_match_the_deployment_the_apiservice_and_the_webhook() {
    let out = scratch("manifests");
    generate_ok(&out, &[]);

    let secret = yaml(&out.join("secret.yaml"));
    assert_eq!(secret["apiVersion"], "v1");
    assert_eq!(secret["kind"], "Secret");
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(secret["metadata"]["namespace"], "ifo-system");
    for (key, file) in [
        ("tls.crt", "tls.crt"),
        ("tls.key", "tls.key"),
        ("ca.crt", "ca.crt"),
    ] {
        assert_eq!(decode(&secret["data"][key]), read(&out.join(file)), "{key}");
    }
    // The Secret is the one the Deployment mounts.
    let deployment = yaml(&root().join("deploy/server/deployment.yaml"));
    let volumes = deployment["spec"]["template"]["spec"]["volumes"]
        .as_array()
        .unwrap();
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == secret["metadata"]["name"]),
        "the Deployment mounts no Secret named {}",
        secret["metadata"]["name"]
    );

    // The APIService is apiservice/apiservice.yaml with the CA as caBundle.
    let mut apiservice = yaml(&out.join("apiservice.yaml"));
    assert_eq!(
        decode(&apiservice["spec"]["caBundle"]),
        read(&out.join("ca.crt"))
    );
    let mut template = yaml(&root().join("apiservice/apiservice.yaml"));
    apiservice["spec"]
        .as_object_mut()
        .unwrap()
        .remove("caBundle");
    template["spec"].as_object_mut().unwrap().remove("caBundle");
    assert_eq!(apiservice, template);

    // The webhook is apiservice/webhook.yaml with the CA as caBundle, and calls the Service.
    let mut webhook = yaml(&out.join("webhook.yaml"));
    assert_eq!(webhook["kind"], "ValidatingWebhookConfiguration");
    let client = &mut webhook["webhooks"][0]["clientConfig"];
    assert_eq!(decode(&client["caBundle"]), read(&out.join("ca.crt")));
    assert_eq!(client["service"]["name"], "ifo-apiserver");
    assert_eq!(client["service"]["namespace"], "ifo-system");
    client.as_object_mut().unwrap().remove("caBundle");
    let mut template = yaml(&root().join("apiservice/webhook.yaml"));
    template["webhooks"][0]["clientConfig"]
        .as_object_mut()
        .unwrap()
        .remove("caBundle");
    assert_eq!(webhook, template);

    // The guard's webhook is apiservice/guard-webhook.yaml with the CA as caBundle in each of
    // its doors: the leader's Service and the standbys'.
    let mut guard = yaml(&out.join("guard-webhook.yaml"));
    let mut template = yaml(&root().join("apiservice/guard-webhook.yaml"));
    for (i, service) in ["ifo-apiserver", "ifo-guard"].into_iter().enumerate() {
        let client = &mut guard["webhooks"][i]["clientConfig"];
        assert_eq!(decode(&client["caBundle"]), read(&out.join("ca.crt")));
        assert_eq!(client["service"]["name"], service);
        client.as_object_mut().unwrap().remove("caBundle");
        template["webhooks"][i]["clientConfig"]
            .as_object_mut()
            .unwrap()
            .remove("caBundle");
    }
    assert_eq!(guard, template);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn reruns_keep_what_is_good_renew_rotates_and_force_starts_over() {
    let out = scratch("rerun");
    generate_ok(&out, &[]);
    let files = ["ca.crt", "ca.key", "tls.crt", "tls.key"];
    let first: Vec<Vec<u8>> = files.iter().map(|f| read(&out.join(f))).collect();

    generate_ok(&out, &[]);
    let second: Vec<Vec<u8>> = files.iter().map(|f| read(&out.join(f))).collect();
    assert_eq!(first, second, "a rerun changed the CA or the certificate");

    // A missing serving certificate is issued again by the same CA.
    std::fs::remove_file(out.join("tls.crt")).unwrap();
    generate_ok(&out, &[]);
    assert_eq!(read(&out.join("ca.crt")), first[0]);
    assert_ne!(read(&out.join("tls.key")), first[3]);
    let (ok, text) = verify(&out.join("ca.crt"), &out.join("tls.crt"), NAMES[1]);
    assert!(ok, "{text}");

    // --renew rotates the serving certificate and keeps the CA (and so the APIService).
    let before = read(&out.join("tls.crt"));
    generate_ok(&out, &["--renew"]);
    assert_eq!(
        read(&out.join("ca.crt")),
        first[0],
        "--renew changed the CA"
    );
    assert_ne!(
        read(&out.join("tls.crt")),
        before,
        "--renew kept the certificate"
    );
    let (ok, text) = verify(&out.join("ca.crt"), &out.join("tls.crt"), NAMES[0]);
    assert!(ok, "{text}");

    generate_ok(&out, &["--force"]);
    assert_ne!(read(&out.join("ca.crt")), first[0], "--force kept the CA");
    let (ok, text) = verify(&out.join("ca.crt"), &out.join("tls.crt"), NAMES[0]);
    assert!(ok, "{text}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn without_openssl_it_stops_with_a_message_naming_it() {
    let out = scratch("no-openssl");
    let empty = scratch("empty-path");
    let result = Command::new(bash())
        .arg(root().join("certs/generate.sh"))
        .arg(out.join("certs"))
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert!(!result.status.success());
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("needs the openssl command"), "{stderr}");
    assert!(!out.join("certs").exists(), "it wrote before checking");
    let _ = std::fs::remove_dir_all(&out);
    let _ = std::fs::remove_dir_all(&empty);
}
