//! What the cluster is given of the project: its CRDs and RBAC from `deploy/` (and the test
//! CRDs), the APIService and the admission webhooks pointing at a server on this machine, and
//! the wait until the live API is served through kube-apiserver.

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::credentials::b64;
use super::{Cluster, User};
use crate::Ports;

/// Namespace and name of the Service the APIService points at.
pub const SERVICE_NAMESPACE: &str = "ifo-system";
/// See [`SERVICE_NAMESPACE`].
pub const SERVICE_NAME: &str = "ifo-apiserver";
/// The ValidatingWebhookConfiguration that sends rulesets to the server's admission door (its
/// one webhook is `<this>.ifo.kubevirt.io`), as `apiservice/webhook.yaml` names it.
pub const RULESET_WEBHOOK: &str = "ifo-ruleset-validation";
/// The ValidatingWebhookConfiguration of the maintenance guard (`apiservice/guard-webhook.yaml`).
pub const GUARD_WEBHOOK: &str = "ifo-maintenance-guard";

impl Cluster {
    /// The project's CRDs and RBAC from `deploy/` (the maintenance guard's too), and the test
    /// CRDs for subjects.
    pub(super) fn install_base(&self) -> Result<()> {
        let source = crate::binaries::source_dir();
        for path in [
            source.join("deploy/crds"),
            source.join("deploy/rbac"),
            source.join("deploy/guard/rbac.yaml"),
            source.join("tests/cluster/crds"),
        ] {
            self.kubectl_run(
                User::Admin,
                &["apply", "--server-side", "-f", &path.display().to_string()],
                None,
            )?;
        }
        // A CRD created a moment ago may have no conditions yet, which `kubectl wait` reports
        // as an error rather than waiting; ask again until every CRD is Established.
        let mut attempts = 0;
        loop {
            let waited = self.kubectl_run(
                User::Admin,
                &[
                    "wait",
                    "--for=condition=Established",
                    "--timeout=60s",
                    "crd",
                    "--all",
                ],
                None,
            );
            match waited {
                Ok(_) => return Ok(()),
                Err(e) if attempts >= 10 => return Err(e),
                Err(_) => {
                    attempts += 1;
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
    }

    /// Points the live API at a server listening on loopback `ports` (its API's): an
    /// ExternalName Service that resolves to `localhost`, and the APIService with our serving CA.
    pub fn register_apiservice(&self, ports: Ports) -> Result<()> {
        let port = ports.api;
        self.apply(&format!(
            r#"{{"apiVersion":"v1","kind":"List","items":[
{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"{SERVICE_NAME}","namespace":"{SERVICE_NAMESPACE}"}},
  "spec":{{"type":"ExternalName","externalName":"localhost","ports":[{{"name":"https","port":{port},"protocol":"TCP"}}]}}}},
{{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{{"name":"v1alpha1.live.ifo.kubevirt.io"}},
  "spec":{{"group":"live.ifo.kubevirt.io","version":"v1alpha1","groupPriorityMinimum":2000,"versionPriority":100,
    "service":{{"namespace":"{SERVICE_NAMESPACE}","name":"{SERVICE_NAME}","port":{port}}},
    "caBundle":"{}"}}}}]}}"#,
            b64(&self.serving.ca_pem)
        ))
    }

    /// Sends OperationRuleSets created or changed to the admission door of a server listening on
    /// loopback `ports` (its doors'): the ValidatingWebhookConfiguration [`RULESET_WEBHOOK`] as
    /// `apiservice/webhook.yaml` ships it, but for its `clientConfig`, a URL on `localhost`
    /// (which the serving certificate names) with our serving CA. kube-apiserver resolves a
    /// webhook's Service itself, and an ExternalName Service (the APIService's route) is not one
    /// it can call; a URL is. kube-apiserver picks up the registration within a second or so.
    pub fn register_ruleset_webhook(&self, ports: Ports) -> Result<()> {
        let port = ports.admission;
        self.apply(&format!(
            r#"{{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration",
"metadata":{{"name":"{RULESET_WEBHOOK}","labels":{{"app.kubernetes.io/name":"ifo-apiserver"}}}},
"webhooks":[{{"name":"{RULESET_WEBHOOK}.ifo.kubevirt.io","admissionReviewVersions":["v1"],
  "clientConfig":{{"url":"https://localhost:{port}/admission/rulesets","caBundle":"{}"}},
  "rules":[{{"apiGroups":["ifo.kubevirt.io"],"apiVersions":["v1alpha1"],"operations":["CREATE","UPDATE"],
    "resources":["operationrulesets"],"scope":"Cluster"}}],
  "matchPolicy":"Equivalent","failurePolicy":"Ignore","sideEffects":"None","timeoutSeconds":5}}]}}"#,
            b64(&self.serving.ca_pem)
        ))
    }

    /// Sends every eviction to the maintenance guard of a server listening on loopback `ports`
    /// (its doors'; started with `EVICTION_GUARD=true`): the ValidatingWebhookConfiguration [`GUARD_WEBHOOK`]
    /// as `apiservice/guard-webhook.yaml` ships it, but for its `clientConfig` (a URL on
    /// `localhost`, as for [`Cluster::register_ruleset_webhook`]).
    pub fn register_guard_webhook(&self, ports: Ports) -> Result<()> {
        let port = ports.admission;
        // Both doors, as shipped (the leader's and the standby's), on the one server.
        let door = |name: &str, path: &str| {
            format!(
                r#"{{"name":"{name}.ifo.kubevirt.io","admissionReviewVersions":["v1"],
  "clientConfig":{{"url":"https://localhost:{port}{path}","caBundle":"{}"}},
  "rules":[{{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],
    "resources":["pods/eviction"],"scope":"Namespaced"}}],
  "matchPolicy":"Equivalent","failurePolicy":"Ignore","sideEffects":"NoneOnDryRun","timeoutSeconds":3}}"#,
                b64(&self.serving.ca_pem)
            )
        };
        self.apply(&format!(
            r#"{{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration",
"metadata":{{"name":"{GUARD_WEBHOOK}","labels":{{"app.kubernetes.io/name":"ifo-apiserver"}}}},
"webhooks":[{},{}]}}"#,
            door(GUARD_WEBHOOK, "/admission/evictions"),
            door(&format!("{GUARD_WEBHOOK}-standby"), "/admission/evictions/standby"),
        ))
    }

    /// Waits until kubectl can use the live API through kube-apiserver: the APIService reports
    /// `Available=True`, kube-apiserver's discovery lists the live resources, and a list of them
    /// is answered.
    ///
    /// Available alone is not enough after the server was unreachable. A discovery fetch of the
    /// aggregator's that failed meanwhile leaves the group `Stale`, with no resources (kubectl
    /// answers "the server doesn't have a resource type"), until one of its retries succeeds.
    /// They back off up to a minute apart, and after a short outage the APIService may have
    /// stayed Available throughout, so nothing makes it fetch sooner. Discovery is asked
    /// afresh (`api-resources` reads no cache) and together with a list, which fails while the
    /// server is still starting, so that both hold at once.
    pub fn wait_live_api(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        self.wait_apiservice_available(timeout)?;
        // Read whatever kubectl's exit status: it fails when any group of the cluster cannot be
        // discovered, and lists the groups that can.
        let discovered = || {
            let out = self
                .kubectl(User::Admin)
                .args([
                    "api-resources",
                    "--api-group=live.ifo.kubevirt.io",
                    "-o",
                    "name",
                    "--request-timeout=10s",
                ])
                .stdin(Stdio::null())
                .output()
                .context("running kubectl api-resources")?;
            anyhow::ensure!(
                String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .any(|line| line == "inflightoperations.live.ifo.kubevirt.io"),
                "kube-apiserver's discovery lists no inflightoperations: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            Ok(())
        };
        let listed = || {
            self.kubectl_run(
                User::Admin,
                &[
                    "get",
                    "inflightoperations",
                    "-n",
                    "default",
                    "-o",
                    "name",
                    "--request-timeout=10s",
                ],
                None,
            )
            .map(|_| ())
        };
        loop {
            match discovered().and_then(|()| listed()) {
                Ok(()) => return Ok(()),
                Err(e) if Instant::now() >= deadline => {
                    return Err(e.context(format!(
                        "the live API was not served through kube-apiserver within {timeout:?}"
                    )));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(500)),
            }
        }
    }

    /// Waits for the APIService to report `Available=True`.
    fn wait_apiservice_available(&self, timeout: Duration) -> Result<()> {
        self.kubectl_run(
            User::Admin,
            &[
                "wait",
                "--for=condition=Available",
                &format!("--timeout={}s", timeout.as_secs()),
                "apiservice/v1alpha1.live.ifo.kubevirt.io",
            ],
            None,
        )
        .map(|_| ())
        .with_context(|| {
            format!(
                "the APIService did not become Available; kube-apiserver log tail:\n{}",
                self.apiserver.log_tail(20)
            )
        })
    }
}
