//! Who a client certificate makes its holder, as k8s.io/apiserver's authenticators read one:
//! the aggregator (front-proxy CA, an allowed common name: identity comes from the request
//! headers), a cluster user (client CA: the common name is the user, the organizations its
//! groups), or nobody.
//!
//! The TLS handshake already verified the chain against the union of both CAs; here it is
//! verified against each one separately, so a certificate of the cluster's client CA can never
//! pass for the front proxy. The judgement is kept per connection and trust settings until the
//! first certificate of the chain expires: it is computed again when the CAs or allowed names
//! change, and a certificate that expires while its connection is open (an HTTP/2 connection
//! lives for hours) proves nothing from then on, as kube-apiserver, which checks the chain on
//! every request, would say.

use super::{RequestHeaderConfig, UserInfo};
use parking_lot::Mutex;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use std::sync::Arc;
use std::time::SystemTime;

/// What a connection's certificate says of its holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PeerIdentity {
    /// No certificate, or one that names nobody under the current trust settings.
    None,
    /// The aggregator: trust the identity headers.
    FrontProxy,
    /// A user of the cluster, from a certificate of its client CA.
    User(UserInfo),
}

/// The trust settings a certificate was last judged by, the judgement, and until when it holds
/// (the first expiry among the chain and the CAs).
type Judgement = Option<(Arc<RequestHeaderConfig>, PeerIdentity, SystemTime)>;

/// The verified certificate chain the client presented (empty when it presented none), with
/// the judgement under the trust settings it was last judged by.
#[derive(Clone, Debug, Default)]
pub(crate) struct PeerCertificates {
    chain: Arc<Vec<CertificateDer<'static>>>,
    /// When the first certificate of the chain expires.
    expires: Option<SystemTime>,
    judgement: Arc<Mutex<Judgement>>,
    /// Whether it is kube-apiserver calling the admission doors, under the trust settings it
    /// was last judged by, and until when that holds.
    caller: Arc<Mutex<CallerJudgement>>,
}

/// Whether a certificate is kube-apiserver's for the admission doors, under the trust settings
/// it was judged by, until when.
type CallerJudgement = Option<(Arc<RequestHeaderConfig>, bool, SystemTime)>;

/// Who may call the admission doors (`ADMISSION_ALLOWED_NAMES`, `ADMISSION_CLIENT_CA_FILE`):
/// kube-apiserver, by the client certificate its webhook kubeconfig gives it.
#[derive(Clone, Debug, Default)]
pub(crate) struct AdmissionCallers {
    /// The common names allowed; none: the doors do not authenticate their callers.
    pub names: Vec<String>,
    /// The CAs of those certificates; none: the cluster's client CA.
    pub ca: Vec<CertificateDer<'static>>,
}

impl AdmissionCallers {
    /// The callers `ADMISSION_ALLOWED_NAMES` (`names`) and `ADMISSION_CLIENT_CA_FILE` (`ca_file`,
    /// read now) allow; a CA file without names is refused, as it would check nothing.
    pub(crate) fn from_settings(
        names: &[String],
        ca_file: Option<&std::path::Path>,
    ) -> anyhow::Result<AdmissionCallers> {
        use anyhow::Context as _;
        use rustls::pki_types::pem::PemObject as _;
        let names: Vec<String> = names
            .iter()
            .map(|n| n.trim().to_owned())
            .filter(|n| !n.is_empty())
            .collect();
        let ca = match ca_file {
            None => Vec::new(),
            Some(path) => {
                anyhow::ensure!(
                    !names.is_empty(),
                    "ADMISSION_CLIENT_CA_FILE is set without ADMISSION_ALLOWED_NAMES: name the \
                     common names of kube-apiserver's webhook client certificate"
                );
                let ca = CertificateDer::pem_file_iter(path)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .with_context(|| {
                        format!("reading ADMISSION_CLIENT_CA_FILE {}", path.display())
                    })?;
                anyhow::ensure!(
                    !ca.is_empty(),
                    "ADMISSION_CLIENT_CA_FILE {} holds no certificate",
                    path.display()
                );
                ca
            }
        };
        Ok(AdmissionCallers { names, ca })
    }

    /// Whether the doors authenticate their callers.
    pub(crate) fn required(&self) -> bool {
        !self.names.is_empty()
    }
}

impl PeerCertificates {
    pub(crate) fn new(chain: Vec<CertificateDer<'static>>) -> Self {
        PeerCertificates {
            expires: expiry(chain.iter()),
            chain: Arc::new(chain),
            judgement: Arc::default(),
            caller: Arc::default(),
        }
    }

    /// Whether the client presented no certificate.
    pub(crate) fn is_empty(&self) -> bool {
        self.chain.is_empty()
    }

    /// Whether the certificate is one `callers` allows to call the admission doors, under
    /// `trust` (whose cluster client CA is theirs when they name none).
    pub(crate) fn is_admission_caller(
        &self,
        callers: &AdmissionCallers,
        trust: &Arc<RequestHeaderConfig>,
    ) -> bool {
        let Some((leaf, intermediates)) = self.chain.split_first() else {
            return false;
        };
        let now = SystemTime::now();
        if self.expires.is_none_or(|t| now >= t) {
            return false;
        }
        let mut caller = self.caller.lock();
        if let Some((judged_by, judgement, until)) = caller.as_ref()
            && Arc::ptr_eq(judged_by, trust)
            && now < *until
        {
            return *judgement;
        }
        let roots = if callers.ca.is_empty() {
            &trust.cluster_client_ca
        } else {
            &callers.ca
        };
        let judgement = Subject::of(leaf)
            .and_then(|s| s.common_name)
            .is_some_and(|cn| callers.names.contains(&cn))
            && verifies(roots, leaf, intermediates);
        let until = expiry(roots.iter())
            .into_iter()
            .chain(self.expires)
            .min()
            .unwrap_or(now);
        *caller = Some((trust.clone(), judgement, until));
        judgement
    }

    /// The identity of the certificate under `trust`.
    pub(crate) fn identity(&self, trust: &Arc<RequestHeaderConfig>) -> PeerIdentity {
        if self.chain.is_empty() {
            return PeerIdentity::None;
        }
        let mut judgement = self.judgement.lock();
        let now = SystemTime::now();
        if self.expires.is_none_or(|t| now >= t) {
            // Expired since the handshake (or unreadable).
            return PeerIdentity::None;
        }
        if let Some((judged_by, identity, until)) = judgement.as_ref()
            && Arc::ptr_eq(judged_by, trust)
            && now < *until
        {
            return identity.clone();
        }
        let identity = classify(&self.chain, trust);
        let until = expiry(trust.client_ca.iter().chain(&trust.cluster_client_ca))
            .into_iter()
            .chain(self.expires)
            .min()
            .unwrap_or(now);
        *judgement = Some((trust.clone(), identity.clone(), until));
        identity
    }
}

/// When a certificate expires (`notAfter`), if it can be read.
fn not_after(der: &CertificateDer<'_>) -> Option<SystemTime> {
    let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
    let seconds = u64::try_from(cert.validity().not_after.timestamp()).ok()?;
    Some(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(seconds))
}

/// The first expiry among `certs` (those that cannot be read are never trusted anyway).
fn expiry<'a>(certs: impl Iterator<Item = &'a CertificateDer<'static>>) -> Option<SystemTime> {
    certs.filter_map(not_after).min()
}

fn classify(chain: &[CertificateDer<'static>], trust: &RequestHeaderConfig) -> PeerIdentity {
    let Some((leaf, intermediates)) = chain.split_first() else {
        return PeerIdentity::None;
    };
    let Some(subject) = Subject::of(leaf) else {
        return PeerIdentity::None;
    };
    if verifies(&trust.client_ca, leaf, intermediates)
        && (trust.allowed_names.is_empty()
            || subject
                .common_name
                .as_ref()
                .is_some_and(|cn| trust.allowed_names.contains(cn)))
    {
        return PeerIdentity::FrontProxy;
    }
    match subject.common_name {
        Some(name)
            if !name.is_empty() && verifies(&trust.cluster_client_ca, leaf, intermediates) =>
        {
            PeerIdentity::User(UserInfo {
                name,
                uid: None,
                groups: super::with_authenticated(subject.organizations),
                extra: Default::default(),
            })
        }
        _ => PeerIdentity::None,
    }
}

/// Whether `leaf` chains to one of `roots` that has not expired and may authenticate a client
/// (key usage included).
fn verifies(
    roots: &[CertificateDer<'static>],
    leaf: &CertificateDer<'static>,
    intermediates: &[CertificateDer<'static>],
) -> bool {
    let now = SystemTime::now();
    let current = roots
        .iter()
        .filter(|ca| not_after(ca).is_some_and(|t| now < t))
        .cloned();
    let mut store = rustls::RootCertStore::empty();
    let (added, _) = store.add_parsable_certificates(current);
    if added == 0 {
        return false;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    WebPkiClientVerifier::builder_with_provider(Arc::new(store), provider)
        .build()
        .is_ok_and(|v| {
            v.verify_client_cert(leaf, intermediates, UnixTime::now())
                .is_ok()
        })
}

/// The parts of a certificate's subject Kubernetes reads.
struct Subject {
    /// The last common name, as Go's `pkix.Name` keeps it.
    common_name: Option<String>,
    organizations: Vec<String>,
}

impl Subject {
    fn of(der: &CertificateDer<'_>) -> Option<Subject> {
        let (_, cert) = x509_parser::parse_x509_certificate(der.as_ref()).ok()?;
        let name = cert.subject();
        let text =
            |a: &x509_parser::x509::AttributeTypeAndValue<'_>| a.as_str().ok().map(str::to_string);
        Some(Subject {
            common_name: name.iter_common_name().filter_map(text).last(),
            organizations: name.iter_organization().filter_map(text).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_certificate_is_nobody() {
        let trust = Arc::new(RequestHeaderConfig::default());
        assert_eq!(
            PeerCertificates::default().identity(&trust),
            PeerIdentity::None
        );
    }

    fn der(pem: &[u8]) -> CertificateDer<'static> {
        use rustls::pki_types::pem::PemObject;
        CertificateDer::from_pem_slice(pem).unwrap()
    }

    /// A front-proxy CA, a cluster client CA, and the trust settings naming them.
    fn pki() -> (
        ifo_dev::pki::KeyPair,
        ifo_dev::pki::KeyPair,
        Arc<RequestHeaderConfig>,
    ) {
        let front = ifo_dev::pki::KeyPair::new_ca("front-proxy-ca").unwrap();
        let clients = ifo_dev::pki::KeyPair::new_ca("cluster-ca").unwrap();
        let trust = Arc::new(RequestHeaderConfig {
            client_ca: vec![der(&front.cert_pem)],
            cluster_client_ca: vec![der(&clients.cert_pem)],
            allowed_names: vec!["front-proxy-client".into()],
            ..Default::default()
        });
        (front, clients, trust)
    }

    fn identity(
        ca: &ifo_dev::pki::KeyPair,
        cn: &str,
        orgs: &[&str],
        trust: &Arc<RequestHeaderConfig>,
    ) -> PeerIdentity {
        let cert = ca.issue(cn, orgs, ifo_dev::pki::Usage::Client).unwrap();
        PeerCertificates::new(vec![der(&cert.cert_pem)]).identity(trust)
    }

    #[test]
    fn each_ca_proves_what_it_signs_for_and_nothing_else() {
        let (front, clients, trust) = pki();
        assert_eq!(
            identity(&front, "front-proxy-client", &[], &trust),
            PeerIdentity::FrontProxy
        );
        // Not an allowed name: the front-proxy CA does not make a user either.
        assert_eq!(
            identity(&front, "someone", &["system:masters"], &trust),
            PeerIdentity::None
        );
        // The cluster CA never makes a front proxy, whatever the name.
        let PeerIdentity::User(user) = identity(&clients, "front-proxy-client", &[], &trust) else {
            panic!("a cluster certificate is a user");
        };
        assert_eq!(user.name, "front-proxy-client");
        let PeerIdentity::User(user) = identity(&clients, "alice", &["team-a", "team-b"], &trust)
        else {
            panic!("a cluster certificate is a user");
        };
        assert_eq!(user.name, "alice");
        assert_eq!(
            user.groups,
            vec!["team-a", "team-b", "system:authenticated"]
        );
        // A CA nobody trusts proves nothing.
        let stranger = ifo_dev::pki::KeyPair::new_ca("stranger").unwrap();
        assert_eq!(
            identity(&stranger, "admin", &["system:masters"], &trust),
            PeerIdentity::None
        );
    }

    #[test]
    fn a_rotated_ca_is_judged_again_on_the_same_connection() {
        let (front, _, trust) = pki();
        let cert = front
            .issue("front-proxy-client", &[], ifo_dev::pki::Usage::Client)
            .unwrap();
        let peer = PeerCertificates::new(vec![der(&cert.cert_pem)]);
        assert_eq!(peer.identity(&trust), PeerIdentity::FrontProxy);
        let rotated = Arc::new(RequestHeaderConfig {
            client_ca: vec![der(&ifo_dev::pki::KeyPair::new_ca("new-front")
                .unwrap()
                .cert_pem)],
            ..(*trust).clone()
        });
        assert_eq!(peer.identity(&rotated), PeerIdentity::None);
    }

    #[test]
    fn a_certificate_that_expires_on_an_open_connection_proves_nothing_after() {
        let (_, clients, trust) = pki();
        let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(2);
        let cert = clients
            .issue_until("bob", &[], ifo_dev::pki::Usage::Client, expires)
            .unwrap();
        let peer = PeerCertificates::new(vec![der(&cert.cert_pem)]);
        assert!(matches!(peer.identity(&trust), PeerIdentity::User(_)));
        std::thread::sleep(std::time::Duration::from_millis(2100));
        assert_eq!(peer.identity(&trust), PeerIdentity::None);
    }

    #[test]
    fn only_the_allowed_names_of_the_callers_ca_may_call_the_doors() {
        let (front, clients, trust) = pki();
        let callers = AdmissionCallers {
            names: vec!["kube-apiserver-webhook-client".into()],
            ca: Vec::new(),
        };
        let peer = |ca: &ifo_dev::pki::KeyPair, cn: &str| {
            let cert = ca.issue(cn, &[], ifo_dev::pki::Usage::Client).unwrap();
            PeerCertificates::new(vec![der(&cert.cert_pem)])
        };
        // Of the cluster's client CA (no CA named) and an allowed name.
        assert!(
            peer(&clients, "kube-apiserver-webhook-client").is_admission_caller(&callers, &trust)
        );
        // Another name of the same CA, the allowed name from another CA, nothing at all.
        assert!(!peer(&clients, "alice").is_admission_caller(&callers, &trust));
        assert!(
            !peer(&front, "kube-apiserver-webhook-client").is_admission_caller(&callers, &trust)
        );
        assert!(!PeerCertificates::default().is_admission_caller(&callers, &trust));
        // A CA of their own replaces the cluster's.
        let own = ifo_dev::pki::KeyPair::new_ca("webhook-client-ca").unwrap();
        let callers = AdmissionCallers {
            ca: vec![der(&own.cert_pem)],
            ..callers
        };
        assert!(peer(&own, "kube-apiserver-webhook-client").is_admission_caller(&callers, &trust));
        assert!(
            !peer(&clients, "kube-apiserver-webhook-client").is_admission_caller(&callers, &trust)
        );
    }

    #[test]
    fn garbage_is_nobody() {
        let trust = Arc::new(RequestHeaderConfig::default());
        let peer = PeerCertificates::new(vec![CertificateDer::from(vec![0x30, 0x03, 1, 2, 3])]);
        assert_eq!(peer.identity(&trust), PeerIdentity::None);
    }
}
