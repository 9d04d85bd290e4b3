use super::*;
use crate::supervise::testing::{failures, ready_tasks, restarting_killable};
use ifo_dev::pki::{KeyPair, Usage};

/// A serving certificate of `ca`, written to `dir` (its time set to `at`).
fn write_serving_certificate(ca: &KeyPair, dir: &Path, at: SystemTime) -> (PathBuf, PathBuf) {
    let serving = ca
        .issue(
            "ifo-apiserver",
            &[],
            Usage::Server {
                dns: &["localhost"],
                ips: &[],
            },
        )
        .unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    for (path, pem) in [(&cert, &serving.cert_pem), (&key, &serving.key_pem)] {
        std::fs::write(path, pem).unwrap();
        std::fs::File::options()
            .write(true)
            .open(path)
            .unwrap()
            .set_modified(at)
            .unwrap();
    }
    (cert, key)
}

/// The certificate reloader runs under the server's tasks: killed, it is counted and started
/// again, and the run started again reloads a certificate replaced meanwhile.
#[tokio::test(start_paused = true)]
async fn a_killed_reloader_is_counted_and_started_again() {
    let dir = std::env::temp_dir().join(format!("ifo-tls-reloader-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = KeyPair::new_ca("serving-ca").unwrap();
    let first = SystemTime::now() - Duration::from_secs(3600);
    let (cert, key) = write_serving_certificate(&ca, &dir, first);
    let trust = RequestHeaderConfig {
        client_ca: vec![CertificateDer::from_pem_slice(&ca.cert_pem).unwrap()],
        ..RequestHeaderConfig::default()
    };
    let callers = AdmissionCallers::default();
    let tls = RustlsConfig::from_config(server_config(&cert, &key, &trust, &callers).unwrap());
    let (_trust_tx, trust_rx) = watch::channel(Arc::new(trust));
    let reloader = Reloader::new(tls.clone(), cert, key, trust_rx, callers);

    let (readiness, mut tasks) = ready_tasks();
    let failed_before = failures("tls-reloader");
    let kill = restarting_killable(&mut tasks, "tls-reloader", move || reloader.clone().run());
    let loaded = tls.get_inner();
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert!(Arc::ptr_eq(&loaded, &tls.get_inner()), "nothing changed");

    kill.notify_one();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(failures("tls-reloader"), failed_before + 1);
    // Replaced while no reloader runs: the one started again (after 1 s) finds it.
    write_serving_certificate(&ca, &dir, first + Duration::from_secs(60));
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert!(!Arc::ptr_eq(&loaded, &tls.get_inner()), "reloaded");
    assert!(readiness.liveness().is_ok());
    tasks.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
