//! Who may use the cluster and how they prove it: its users, the PKI written under `<dir>/pki`
//! (the cluster's CAs, kube-apiserver's certificates, the server's serving certificate, the
//! service-account key, the users' tokens) and a kubeconfig per user.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use base64::Engine as _;

use super::{Cluster, KUBERNETES_SERVICE_IP, SERVICE_NAME, SERVICE_NAMESPACE};
use crate::node::{NODE_IP, NODE_KUBERNETES_SERVICE_IP};
use crate::pki::{KeyPair, Usage, create_private_dir, service_account_key, write_private};

/// The identity the server runs as (what RBAC in `deploy/` binds).
pub const SERVER_USER: &str = "system:serviceaccount:ifo-system:ifo-apiserver";

/// The users a cluster is made with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum User {
    /// `admin`, group `system:masters`.
    Admin,
    /// `alice`, group `team-a`; bearer token `alice-token`.
    Alice,
    /// `bob`, no groups and no rights; bearer token `bob-token`.
    Bob,
    /// The server's own identity.
    Server,
}

impl User {
    /// Every user, for setting up each one's credentials and kubeconfig.
    pub const ALL: [User; 4] = [User::Admin, User::Alice, User::Bob, User::Server];

    /// The username kube-apiserver authenticates this user as (the certificate's CN).
    pub fn name(self) -> &'static str {
        match self {
            User::Admin => "admin",
            User::Alice => "alice",
            User::Bob => "bob",
            User::Server => SERVER_USER,
        }
    }

    fn groups(self) -> &'static [&'static str] {
        match self {
            User::Admin => &["system:masters"],
            User::Alice => &["team-a"],
            User::Bob => &[],
            User::Server => &[
                "system:serviceaccounts",
                "system:serviceaccounts:ifo-system",
            ],
        }
    }

    fn file_stem(self) -> &'static str {
        match self {
            User::Server => "server",
            other => other.name(),
        }
    }

    /// The bearer token kube-apiserver accepts for this user, if it has one.
    pub fn token(self) -> Option<&'static str> {
        match self {
            User::Alice => Some("alice-token"),
            User::Bob => Some("bob-token"),
            _ => None,
        }
    }
}

/// The certificate our server serves with, and the CA that the APIService's `caBundle` names.
pub struct ServingCert {
    /// The server's certificate, signed by the serving CA.
    pub cert_file: PathBuf,
    /// The server's private key.
    pub key_file: PathBuf,
    /// The serving CA, PEM: what clients of the server (and the APIService) trust.
    pub ca_pem: Vec<u8>,
}

/// The cluster's PKI, as [`write_pki`] wrote it.
pub(super) struct Pki {
    /// `<dir>/pki`.
    pub(super) dir: PathBuf,
    /// The cluster's client CA (kept in memory only).
    pub(super) cluster_ca: KeyPair,
    /// What the live API server serves with.
    pub(super) serving: ServingCert,
}

/// Creates the cluster's CAs and certificates, the service-account key and the users' tokens,
/// and writes them under `dir/pki` (private keys and tokens readable by the owner only).
pub(super) fn write_pki(dir: &Path) -> Result<Pki> {
    let cluster_ca = KeyPair::new_ca("ifo-local-cluster-ca")?;
    let front_proxy_ca = KeyPair::new_ca("ifo-local-front-proxy-ca")?;
    let serving_ca = KeyPair::new_ca("ifo-local-serving-ca")?;
    let loopback = [IpAddr::V4(Ipv4Addr::LOCALHOST)];
    let apiserver_cert = cluster_ca.issue(
        "kube-apiserver",
        &[],
        Usage::Server {
            dns: &[
                "localhost",
                "kubernetes",
                "kubernetes.default",
                "kubernetes.default.svc",
            ],
            ips: &[
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V4(NODE_IP),
                IpAddr::V4(KUBERNETES_SERVICE_IP),
                IpAddr::V4(NODE_KUBERNETES_SERVICE_IP),
            ],
        },
    )?;
    let front_proxy_client = front_proxy_ca.issue("front-proxy-client", &[], Usage::Client)?;
    let svc_dns = format!("{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc");
    let svc_short = format!("{SERVICE_NAME}.{SERVICE_NAMESPACE}");
    let svc_full = format!("{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc.cluster.local");
    let server_cert = serving_ca.issue(
        SERVICE_NAME,
        &[],
        Usage::Server {
            dns: &[&svc_dns, &svc_short, &svc_full, "localhost"],
            ips: &loopback,
        },
    )?;
    let (sa_key, sa_pub) = service_account_key()?;

    let pki = dir.join("pki");
    create_private_dir(&pki)?;
    write(&pki.join("ca.crt"), &cluster_ca.cert_pem)?;
    write(&pki.join("front-proxy-ca.crt"), &front_proxy_ca.cert_pem)?;
    write(&pki.join("apiserver.crt"), &apiserver_cert.cert_pem)?;
    write_private(&pki.join("apiserver.key"), &apiserver_cert.key_pem)?;
    write(
        &pki.join("front-proxy-client.crt"),
        &front_proxy_client.cert_pem,
    )?;
    write_private(
        &pki.join("front-proxy-client.key"),
        &front_proxy_client.key_pem,
    )?;
    let kubelet_client = cluster_ca.issue(
        "kube-apiserver-kubelet-client",
        &["system:masters"],
        Usage::Client,
    )?;
    write(&pki.join("kubelet-client.crt"), &kubelet_client.cert_pem)?;
    write_private(&pki.join("kubelet-client.key"), &kubelet_client.key_pem)?;
    write_webhook_client(&pki, &cluster_ca)?;
    write_private(&pki.join("sa.key"), &sa_key)?;
    write(&pki.join("sa.pub"), &sa_pub)?;
    write(&pki.join("serving.crt"), &server_cert.cert_pem)?;
    write_private(&pki.join("serving.key"), &server_cert.key_pem)?;
    let mut tokens = String::new();
    for user in User::ALL {
        if let Some(token) = user.token() {
            let _ = writeln!(
                tokens,
                "{token},{},{},\"{}\"",
                user.name(),
                user.name(),
                user.groups().join(",")
            );
        }
    }
    write_private(&pki.join("tokens.csv"), tokens)?;
    Ok(Pki {
        serving: ServingCert {
            cert_file: pki.join("serving.crt"),
            key_file: pki.join("serving.key"),
            ca_pem: serving_ca.cert_pem.clone(),
        },
        cluster_ca,
        dir: pki,
    })
}

/// The common name of the client certificate kube-apiserver presents to every admission
/// webhook of the local cluster: a server started with `ADMISSION_ALLOWED_NAMES` set to it
/// answers kube-apiserver's reviews only.
pub const WEBHOOK_CLIENT_NAME: &str = "kube-apiserver-webhook-client";

/// kube-apiserver's client certificate for admission webhooks ([`WEBHOOK_CLIENT_NAME`], of the
/// cluster's client CA), as kubeadm-style installs configure it: an `AdmissionConfiguration`
/// (`admission.yaml`, for `--admission-control-config-file`) whose webhook plugins name a
/// kubeconfig (`webhook-kubeconfig.yaml`) giving it to every webhook host (`*`).
fn write_webhook_client(pki: &Path, cluster_ca: &KeyPair) -> Result<()> {
    let cert = cluster_ca.issue(WEBHOOK_CLIENT_NAME, &[], Usage::Client)?;
    let (crt, key) = (
        pki.join("webhook-client.crt"),
        pki.join("webhook-client.key"),
    );
    write(&crt, &cert.cert_pem)?;
    write_private(&key, &cert.key_pem)?;
    let kubeconfig = pki.join("webhook-kubeconfig.yaml");
    write_private(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nusers:\n- name: '*'\n  user:\n    client-certificate: {}\n    client-key: {}\n",
            crt.display(),
            key.display()
        ),
    )?;
    let plugin = |name: &str| {
        format!(
            "- name: {name}\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: {}\n",
            kubeconfig.display()
        )
    };
    write(
        &pki.join("admission.yaml"),
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n{}{}",
            plugin("ValidatingAdmissionWebhook"),
            plugin("MutatingAdmissionWebhook")
        ),
    )
}

pub(super) fn write(path: &Path, data: impl AsRef<[u8]>) -> Result<()> {
    std::fs::write(path, data).with_context(|| format!("writing {}", path.display()))
}

pub(super) fn b64(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

impl Cluster {
    /// A client certificate of the cluster's client CA for user `name` in `groups`, expiring at
    /// `not_after`: what kube-apiserver and the servers it trusts accept until then.
    pub fn issue_client_cert(
        &self,
        name: &str,
        groups: &[&str],
        not_after: jiff::Timestamp,
    ) -> Result<KeyPair> {
        self.cluster_ca
            .issue_until(name, groups, Usage::Client, not_after)
    }

    /// The kubeconfig that authenticates as `user` with a client certificate, for `kubectl
    /// --kubeconfig` and kube clients.
    pub fn kubeconfig(&self, user: User) -> PathBuf {
        self.dir
            .join(format!("kubeconfig-{}.json", user.file_stem()))
    }

    /// A kubeconfig for every user, each with a client certificate of its own.
    pub(super) fn write_kubeconfigs(&self) -> Result<()> {
        for user in User::ALL {
            let cert = self
                .cluster_ca
                .issue(user.name(), user.groups(), Usage::Client)?;
            self.write_kubeconfig(user, &cert)?;
        }
        Ok(())
    }

    fn write_kubeconfig(&self, user: User, cert: &KeyPair) -> Result<()> {
        let config = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {
                "server": self.url,
                "certificate-authority-data": b64(&self.cluster_ca.cert_pem),
            }}],
            "users": [{"name": user.name(), "user": {
                "client-certificate-data": b64(&cert.cert_pem),
                "client-key-data": b64(&cert.key_pem),
            }}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": user.name()}}],
            "current-context": "local",
        });
        // It carries the user's client key.
        write_private(&self.kubeconfig(user), serde_json::to_vec_pretty(&config)?)
    }
}
