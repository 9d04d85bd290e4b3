//! The product installed on a cluster with a real node the way the README tells users: the image
//! `deploy/image.sh` assembles, imported into the node's containerd; the CRD; `kubectl apply -k
//! deploy/` (or `apiservice/with-guard/`, with the maintenance guard); `certs/generate.sh` with
//! its Secret, APIService and webhooks. Uninstalled the same way.

use super::{Cluster, User, source_dir};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The namespace `deploy/` installs into.
pub const NAMESPACE: &str = "ifo-system";
/// The APIService `certs/generate.sh` writes.
pub const APISERVICE: &str = "apiservice/v1alpha1.live.ifo.kubevirt.io";
/// The ValidatingWebhookConfiguration `certs/generate.sh` writes.
pub const WEBHOOK: &str = "validatingwebhookconfiguration/ifo-ruleset-validation";
/// The maintenance guard's ValidatingWebhookConfiguration `certs/generate.sh` writes.
pub const GUARD_WEBHOOK: &str = "validatingwebhookconfiguration/ifo-maintenance-guard";

/// An installation: where its certificates are, to rotate them and to uninstall.
pub struct Install {
    certs: PathBuf,
    /// With the maintenance guard (`apiservice/with-guard/` and its webhook).
    guard: std::sync::atomic::AtomicBool,
}

/// Runs a script of the source tree, with its output in the error when it fails.
fn script(path: &str, args: &[&str]) -> Result<String> {
    let script = source_dir().join(path);
    let out = Command::new("bash")
        .arg(&script)
        .args(args)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    if !out.status.success() {
        bail!(
            "{path} {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Builds the release binaries and assembles the image as an OCI archive at `out`
/// (`deploy/image.sh`); returns what the script prints (the image's sizes).
pub fn build_image(out: &Path) -> Result<String> {
    script("deploy/image.sh", &[&out.display().to_string()])
}

impl Install {
    /// Imports the image archive into the node and installs the product as the README says,
    /// with certificates in `certs`, and with the maintenance guard if `guard`; waits for the
    /// rollout and for the APIService to be Available.
    pub fn run(cluster: &Cluster, image: &Path, certs: &Path, guard: bool) -> Result<Install> {
        cluster
            .node()
            .as_ref()
            .context("installing needs a cluster with a real node")?
            .import_image(image)?;
        let source = source_dir();
        let path = |p: &str| source.join(p).display().to_string();
        cluster.kubectl_run(User::Admin, &["apply", "-f", &path("deploy/crds/")], None)?;
        cluster.kubectl_run(
            User::Admin,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "crd/operationrulesets.ifo.kubevirt.io",
            ],
            None,
        )?;
        cluster.kubectl_run(
            User::Admin,
            &["apply", "-k", &path(Install::dir(guard))],
            None,
        )?;
        let install = Install {
            certs: certs.to_path_buf(),
            guard: guard.into(),
        };
        install.apply_certificates(cluster, &[])?;
        install.wait_available(cluster, Duration::from_secs(180))?;
        Ok(install)
    }

    /// Turns the maintenance guard on in this installation, as docs/operating.md says:
    /// `kubectl apply -k apiservice/with-guard/` and the guard's webhook of `certs/generate.sh`;
    /// waits for the rollout and for the APIService to be Available again.
    pub fn enable_guard(&self, cluster: &Cluster) -> Result<()> {
        self.guard.store(true, std::sync::atomic::Ordering::SeqCst);
        let source = source_dir();
        cluster.kubectl_run(
            User::Admin,
            &[
                "apply",
                "-k",
                &source.join(Install::dir(true)).display().to_string(),
            ],
            None,
        )?;
        self.apply_certificates(cluster, &[])?;
        self.wait_available(cluster, Duration::from_secs(240))
    }

    fn has_guard(&self) -> bool {
        self.guard.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// What `kubectl apply -k` installs.
    fn dir(guard: bool) -> &'static str {
        if guard {
            "apiservice/with-guard/"
        } else {
            "deploy/"
        }
    }

    fn apply_certificates(&self, cluster: &Cluster, args: &[&str]) -> Result<()> {
        let dir = self.certs.display().to_string();
        let mut all = args.to_vec();
        all.push(&dir);
        script("certs/generate.sh", &all)?;
        let file = |name: &str| self.certs.join(name).display().to_string();
        let mut apply = vec!["apply".to_owned()];
        let mut files = vec!["secret.yaml", "apiservice.yaml", "webhook.yaml"];
        if self.has_guard() {
            files.push("guard-webhook.yaml");
        }
        for name in files {
            apply.extend(["-f".to_owned(), file(name)]);
        }
        let apply: Vec<&str> = apply.iter().map(String::as_str).collect();
        cluster.kubectl_run(User::Admin, &apply, None)?;
        Ok(())
    }

    /// `kubectl rollout status` of the Deployment, then the APIService's `Available` condition.
    pub fn wait_available(&self, cluster: &Cluster, timeout: Duration) -> Result<()> {
        let timeout_arg = format!("--timeout={}s", timeout.as_secs());
        cluster
            .kubectl_run(
                User::Admin,
                &[
                    "-n",
                    NAMESPACE,
                    "rollout",
                    "status",
                    "deployment/ifo-apiserver",
                    &timeout_arg,
                ],
                None,
            )
            .with_context(|| self.describe(cluster))?;
        cluster
            .wait_live_api(timeout)
            .with_context(|| self.describe(cluster))
    }

    /// The pods and recent events of the namespace, to explain a failure.
    pub fn describe(&self, cluster: &Cluster) -> String {
        let pods = cluster
            .kubectl_run(
                User::Admin,
                &[
                    "-n",
                    NAMESPACE,
                    "get",
                    "pods",
                    "-o",
                    "wide",
                    "--show-labels",
                ],
                None,
            )
            .unwrap_or_else(|e| format!("{e:#}"));
        let events = cluster
            .kubectl_run(
                User::Admin,
                &["-n", NAMESPACE, "get", "events", "--sort-by=.lastTimestamp"],
                None,
            )
            .unwrap_or_else(|e| format!("{e:#}"));
        let webhooks = cluster
            .kubectl_run(
                User::Admin,
                &[
                    "get",
                    "validatingwebhookconfigurations",
                    "-o",
                    "custom-columns=NAME:.metadata.name,PATHS:.webhooks[*].clientConfig.service.path",
                ],
                None,
            )
            .unwrap_or_else(|e| format!("{e:#}"));
        let logs = cluster
            .kubectl_run(
                User::Admin,
                &[
                    "-n",
                    NAMESPACE,
                    "logs",
                    "-l",
                    "app.kubernetes.io/name=ifo-apiserver",
                    "--tail=30",
                    "--prefix",
                ],
                None,
            )
            .unwrap_or_else(|e| format!("{e:#}"));
        format!("pods:\n{pods}\nevents:\n{events}\nwebhooks:\n{webhooks}\nlogs:\n{logs}")
    }

    /// Rotates the serving certificate as docs/operating.md says: `certs/generate.sh --renew`, and the
    /// Secret applied again (the APIService is unchanged: same CA).
    pub fn rotate_certificate(&self, cluster: &Cluster) -> Result<()> {
        self.apply_certificates(cluster, &["--renew"])
    }

    /// The serving certificate the last [`Install::run`] or rotation wrote, PEM.
    pub fn serving_certificate(&self) -> Result<Vec<u8>> {
        let path = self.certs.join("tls.crt");
        std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
    }

    /// Uninstalls as the README says: the APIService and the webhook first, then `kubectl delete
    /// -k deploy/`, waiting for everything to be gone.
    pub fn uninstall(&self, cluster: &Cluster) -> Result<()> {
        cluster.kubectl_run(
            User::Admin,
            &[
                "delete",
                APISERVICE,
                WEBHOOK,
                GUARD_WEBHOOK,
                "--ignore-not-found",
                "--timeout=60s",
            ],
            None,
        )?;
        let deploy = source_dir()
            .join(Install::dir(self.has_guard()))
            .display()
            .to_string();
        cluster
            .kubectl_run(
                User::Admin,
                &[
                    "delete",
                    "-k",
                    &deploy,
                    "--ignore-not-found",
                    "--wait=true",
                    "--timeout=180s",
                ],
                None,
            )
            .with_context(|| self.describe(cluster))?;
        Ok(())
    }
}
