//! The serving certificate made and renewed by the server itself (`SERVING_CERTIFICATE_SECRET`),
//! as Gatekeeper's and Kyverno's webhooks do theirs: no manifest of the install holds a key or a
//! CA, so `helm template` and every GitOps render of it are the same each time.
//!
//! The Secret holds the CA (`ca.crt`: the current CA, then the previous one while it is valid;
//! `ca.key`), the serving certificate the current CA signed (`tls.crt`, `tls.key`) for
//! `SERVING_CERTIFICATE_NAMES` (see [`issue`]), and the admission doors' key (`door.key`, made
//! once: see [`DoorKey`]). While the Secret holds no CA, the CA of `SERVING_CERTIFICATE_CA_FROM`
//! (the chart's own certificates' `ifo-apiserver-ca`) is taken over: kube-apiserver trusts it
//! already, and the replicas of the previous install that still serve what it signed stay
//! trusted while they are replaced. Any replica makes what is missing or near its
//! end, and writes it with the resourceVersion it read: of replicas that race, one writes and
//! the others read what it wrote. Each replica writes the Secret's certificate to its
//! `TLS_CERT_FILE` and `TLS_PRIVATE_KEY_FILE`, which the TLS reloader serves, hands the key to
//! the doors, and writes the CA bundle into the `caBundle` of each of `CA_BUNDLE_TARGETS`, and the
//! key into the path of each of their webhooks, where they differ ([`trust`]). Checked
//! every [`Keeper::interval`]: a `caBundle` a GitOps sync wrote back is put right within it.

mod door_key;
mod issue;

mod trust;

pub(crate) use door_key::{DoorKey, random_hex};
pub(crate) use issue::Material;
pub use trust::Target as TrustTarget;

use anyhow::{Context, Result, bail};
use issue::Needs;
use tokio::sync::watch;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Most times a write of the Secret is tried again after another replica's write came first.
const MAX_RACES: usize = 4;

/// Longest time between two checks.
const MAX_INTERVAL: Duration = Duration::from_secs(60);

/// Time to the next check after one that failed (a registration not made yet, kube-apiserver
/// not answering).
const RETRY: Duration = Duration::from_secs(5);

/// What the keeper keeps, and where.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub namespace: String,
    pub secret: String,
    /// A Secret (`tls.crt`, `tls.key`) whose CA is taken over while `secret` holds none.
    pub ca_from: Option<String>,
    /// The DNS names (and addresses) the certificate is for.
    pub names: Vec<String>,
    /// How long a serving certificate is valid (a CA, [`issue::CA_LIFETIMES`] times that).
    pub lifetime: Duration,
    /// What kube-apiserver is told to trust the CA of.
    pub trust: Vec<TrustTarget>,
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// Keeps the serving certificate: made, renewed, served and trusted; and the doors' key. Every
/// call it makes to kube-apiserver is bounded by the client's own deadline
/// (`client::api_timeout`).
#[derive(Clone)]
pub(crate) struct Keeper {
    client: kube::Client,
    settings: Arc<Settings>,
    door_key: Arc<watch::Sender<Option<DoorKey>>>,
}

impl Keeper {
    /// A keeper, with the certificate kept and its files written, so that the server can load
    /// them; an error when that could not be done (the server does not start). The CA is
    /// written where kube-apiserver trusts it as well, if it can be yet (a registration is made
    /// after the server's pods, by Helm as by `kubectl apply`): [`Keeper::run`] goes on trying.
    pub(crate) async fn start(client: kube::Client, settings: Settings) -> Result<Keeper> {
        if settings.names.is_empty() {
            bail!("SERVING_CERTIFICATE_NAMES is empty: the certificate would be for no name");
        }
        let keeper = Keeper {
            client,
            settings: Arc::new(settings),
            door_key: Arc::new(watch::channel(None).0),
        };
        let (material, key) = keeper.kept().await?;
        keeper.write_files(&material)?;
        keeper.door_key.send_replace(Some(key));
        Ok(keeper)
    }

    /// The doors' key, as the Secret holds it now.
    pub(crate) fn door_key(&self) -> watch::Receiver<Option<DoorKey>> {
        self.door_key.subscribe()
    }

    /// How often the Secret is checked: every minute, or every twelfth of a short lifetime.
    pub(crate) fn interval(&self) -> Duration {
        (self.settings.lifetime / 12).min(MAX_INTERVAL)
    }

    /// Checks at once, then every [`Keeper::interval`] for the life of the server (every
    /// [`RETRY`] after a check that failed).
    pub(crate) async fn run(self) {
        loop {
            let wait = match self.once().await {
                Ok(()) => self.interval(),
                Err(e) => {
                    crate::metrics::serving_certificate_failed();
                    tracing::warn!(
                        secret = %self.settings.secret,
                        error = format!("{e:#}"),
                        "keeping the serving certificate failed; serving the one loaded, trying again"
                    );
                    RETRY.min(self.interval())
                }
            };
            tokio::time::sleep(wait).await;
        }
    }

    async fn once(&self) -> Result<()> {
        let (material, key) = self.kept().await?;
        self.write_files(&material)?;
        if let Some(end) = issue::not_after(&material) {
            crate::metrics::serving_certificate_kept(end);
        }
        self.door_key.send_if_modified(|held| {
            let changed = held.as_ref() != Some(&key);
            if changed {
                tracing::warn!(
                    secret = %self.settings.secret,
                    "the admission doors' key changed (the Secret was made anew): reviews at the old key's paths are refused"
                );
                *held = Some(key.clone());
            }
            changed
        });
        trust::write(
            &self.client,
            &self.settings.trust,
            &material.ca_bundle,
            &key,
        )
        .await
    }

    /// The Secret's material and the doors' key, made or renewed first where they need it.
    async fn kept(&self) -> Result<(Material, DoorKey)> {
        let s = &self.settings;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), &s.namespace);
        for _ in 0..MAX_RACES {
            let secret = secrets.get_opt(&s.secret).await?;
            let kept = match secret.as_ref().and_then(material_of) {
                Some(kept) => Some(kept),
                None => self.taken_over(&secrets).await?,
            };
            let kept_key = secret.as_ref().and_then(door_key_of);
            let now = time::OffsetDateTime::now_utc();
            let needs = issue::needs(kept.as_ref(), &s.names, s.lifetime, now);
            if needs == Needs::Nothing
                && let (Some(kept), Some(key)) = (&kept, &kept_key)
            {
                return Ok((kept.clone(), key.clone()));
            }
            let made = issue::renewed(kept.as_ref(), needs, &s.names, s.lifetime, now)?;
            let key = match kept_key {
                Some(key) => key,
                None => DoorKey::generate().context("making the doors' key")?,
            };
            let written = match secret {
                Some(old) => {
                    let mut new = old.clone();
                    new.data = Some(data_of(&made, &key));
                    // Made by another (a previous install's, taken over): the server's now.
                    new.metadata.labels.get_or_insert_default().extend(labels());
                    new.metadata
                        .annotations
                        .get_or_insert_default()
                        .extend(annotations());
                    secrets
                        .replace(&s.secret, &PostParams::default(), &new)
                        .await
                }
                None => {
                    let new = Secret {
                        metadata: ObjectMeta {
                            name: Some(s.secret.clone()),
                            namespace: Some(s.namespace.clone()),
                            labels: Some(labels()),
                            annotations: Some(annotations()),
                            ..ObjectMeta::default()
                        },
                        type_: Some("kubernetes.io/tls".into()),
                        data: Some(data_of(&made, &key)),
                        ..Secret::default()
                    };
                    secrets.create(&PostParams::default(), &new).await
                }
            };
            match written {
                Ok(_) => {
                    tracing::info!(secret = %s.secret, ?needs, names = ?s.names, "serving certificate and doors' key kept");
                    return Ok((made, key));
                }
                // Another replica wrote first: read what it wrote.
                Err(e) if is_race(&e) => continue,
                Err(e) => return Err(e).context(format!("writing the Secret {}", s.secret)),
            }
        }
        bail!(
            "the Secret {} changed under every one of {MAX_RACES} writes",
            s.secret
        )
    }

    /// The CA of [`Settings::ca_from`], as material without a serving certificate, for the
    /// Secret to take over: `None` when there is no such Secret, or it holds no CA, or the
    /// server may not read it (said in the log); an error when it could not be read for another
    /// reason (a CA of its own made then would leave kube-apiserver distrusting the replicas
    /// that still serve the one the old CA signed).
    async fn taken_over(&self, secrets: &Api<Secret>) -> Result<Option<Material>> {
        let Some(name) = &self.settings.ca_from else {
            return Ok(None);
        };
        let secret = match secrets.get_opt(name).await {
            Ok(secret) => secret,
            Err(kube::Error::Api(e)) if e.code == 403 => {
                tracing::warn!(
                    secret = %name,
                    "the server may not read the CA it would take over (SERVING_CERTIFICATE_CA_FROM): it makes one of its own"
                );
                return Ok(None);
            }
            Err(e) => {
                return Err(e).context(format!(
                    "reading the CA to take over (SERVING_CERTIFICATE_CA_FROM={name})"
                ));
            }
        };
        let Some(material) = secret.as_ref().and_then(ca_of) else {
            return Ok(None);
        };
        tracing::info!(
            secret = %name,
            kept = %self.settings.secret,
            "taking over the CA kube-apiserver trusts already: the replicas serving what it signed stay trusted"
        );
        Ok(Some(material))
    }

    /// Writes the certificate and key to the files the TLS reloader serves, when they differ
    /// (each replaced whole, by a rename, so that a reload never reads half of one).
    fn write_files(&self, material: &Material) -> Result<()> {
        let s = &self.settings;
        write_if_changed(&s.key_file, &material.key)?;
        write_if_changed(&s.cert_file, &material.cert)?;
        Ok(())
    }
}

/// The labels of the Secret the server keeps.
fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".into(), "ifo-apiserver".into()),
        (
            "app.kubernetes.io/managed-by".into(),
            "ifo-apiserver".into(),
        ),
    ])
}

/// The annotations of the Secret the server keeps: Helm leaves it in place. A release of the
/// chart's own certificates made a Secret of the same name; the upgrade from them to the server's
/// deletes it when it is done, and would delete what the server had written into it meanwhile
/// (its CA and the doors' key: replicas that started before would hold others, and be
/// distrusted and refused by kube-apiserver until they read the new ones).
fn annotations() -> BTreeMap<String, String> {
    BTreeMap::from([("helm.sh/resource-policy".into(), "keep".into())])
}

fn is_race(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

/// The material a Secret holds, when it holds all of it.
fn material_of(secret: &Secret) -> Option<Material> {
    Some(Material {
        ca_bundle: text_of(secret, "ca.crt")?,
        ca_key: text_of(secret, "ca.key")?,
        cert: text_of(secret, "tls.crt")?,
        key: text_of(secret, "tls.key")?,
    })
}

/// The CA a Secret of type `kubernetes.io/tls` holds (`tls.crt`, `tls.key`: the chart's own
/// certificates keep theirs so), as material without a serving certificate.
fn ca_of(secret: &Secret) -> Option<Material> {
    Some(Material {
        ca_bundle: text_of(secret, "tls.crt")?,
        ca_key: text_of(secret, "tls.key")?,
        cert: String::new(),
        key: String::new(),
    })
}

/// The text a Secret holds under `key`, when it holds valid UTF-8 there.
fn text_of(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone()).ok()
}

/// The doors' key a Secret holds, when it holds a valid one.
fn door_key_of(secret: &Secret) -> Option<DoorKey> {
    let bytes = secret.data.as_ref()?.get(DOOR_KEY)?;
    DoorKey::parse(std::str::from_utf8(&bytes.0).ok()?)
}

/// The Secret's key of the doors' key.
const DOOR_KEY: &str = "door.key";

fn data_of(m: &Material, key: &DoorKey) -> BTreeMap<String, ByteString> {
    BTreeMap::from([
        (
            DOOR_KEY.into(),
            ByteString(key.as_str().as_bytes().to_vec()),
        ),
        (
            "ca.crt".into(),
            ByteString(m.ca_bundle.clone().into_bytes()),
        ),
        ("ca.key".into(), ByteString(m.ca_key.clone().into_bytes())),
        ("tls.crt".into(), ByteString(m.cert.clone().into_bytes())),
        ("tls.key".into(), ByteString(m.key.clone().into_bytes())),
    ])
}

fn write_if_changed(path: &Path, content: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|c| c == content) {
        return Ok(());
    }
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let temporary = path.with_extension("new");
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut f| f.write_all(content.as_bytes()))
        .with_context(|| format!("writing {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("replacing {}", path.display()))
}
