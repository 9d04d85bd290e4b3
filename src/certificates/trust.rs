//! Telling kube-apiserver to trust the CA, and where the doors are: the CA bundle written into
//! the `caBundle` of the APIService of the live API and of each webhook of the server's webhook
//! configurations, and the doors' key into each webhook's path (its Service's `path`, or its
//! `url`'s, for a door's path: see [`DoorKey::in_path`]), where they differ (read, changed,
//! replaced with the resourceVersion read: a change made meanwhile is not overwritten, and the
//! next check writes again).

use anyhow::{Context, Result, bail};
use base64::Engine as _;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;

use super::DoorKey;

/// The doors whose paths take the key: the first segment after `/admission/`.
const DOORS: &[&str] = &["rulesets", "evictions"];

/// An object whose `caBundle` is the CA's: `apiservice/<name>` or
/// `validatingwebhookconfiguration/<name>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// `apiservice/<name>`.
    ApiService(String),
    /// `validatingwebhookconfiguration/<name>`: every webhook of it.
    WebhookConfiguration(String),
}

impl std::str::FromStr for Target {
    type Err = String;

    fn from_str(s: &str) -> Result<Target, String> {
        match s.split_once('/') {
            Some(("apiservice", name)) if !name.is_empty() => Ok(Target::ApiService(name.into())),
            Some(("validatingwebhookconfiguration", name)) if !name.is_empty() => {
                Ok(Target::WebhookConfiguration(name.into()))
            }
            _ => Err(format!(
                "{s:?} is neither apiservice/<name> nor validatingwebhookconfiguration/<name>"
            )),
        }
    }
}

impl Target {
    fn resource(&self) -> (ApiResource, &str) {
        match self {
            Target::ApiService(name) => (
                ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk("apiregistration.k8s.io", "v1", "APIService"),
                    "apiservices",
                ),
                name,
            ),
            Target::WebhookConfiguration(name) => (
                ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(
                        "admissionregistration.k8s.io",
                        "v1",
                        "ValidatingWebhookConfiguration",
                    ),
                    "validatingwebhookconfigurations",
                ),
                name,
            ),
        }
    }
}

/// Writes `bundle` (PEM) as the `caBundle` of each of `targets`, and `key` into the path of
/// each of their webhooks, where they differ; the first error, after every target was tried.
/// (Each call is bounded by the client's deadline.)
pub(super) async fn write(
    client: &kube::Client,
    targets: &[Target],
    bundle: &str,
    key: &DoorKey,
) -> Result<()> {
    let encoded = base64::engine::general_purpose::STANDARD.encode(bundle);
    let mut first = None;
    for target in targets {
        if let Err(e) = write_one(client, target, &encoded, key).await {
            first.get_or_insert(e.context(format!("writing the caBundle of {target:?}")));
        }
    }
    first.map_or(Ok(()), Err)
}

/// `config`, a webhook's `clientConfig`, calling its door at `key`'s path; whether it changed.
fn keyed(config: &mut Value, key: &DoorKey) -> bool {
    if let Some(path) = config["service"]["path"].as_str()
        && let Some(keyed) = key.in_path(path, DOORS)
        && keyed != path
    {
        config["service"]["path"] = Value::String(keyed);
        return true;
    }
    if let Some(url) = config["url"].as_str()
        && let Ok(parsed) = url.parse::<axum::http::Uri>()
        && let Some(keyed) = key.in_path(parsed.path(), DOORS)
        && keyed != parsed.path()
    {
        let mut parts = parsed.into_parts();
        parts.path_and_query = keyed.parse().ok();
        if let Ok(uri) = axum::http::Uri::from_parts(parts) {
            config["url"] = Value::String(uri.to_string());
            return true;
        }
    }
    false
}

async fn write_one(
    client: &kube::Client,
    target: &Target,
    encoded: &str,
    key: &DoorKey,
) -> Result<()> {
    let (resource, name) = target.resource();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let Some(mut object) = api.get_opt(name).await.context("reading it")? else {
        bail!("it does not exist");
    };
    let wanted = Value::String(encoded.to_owned());
    let mut changed = false;
    match target {
        Target::ApiService(_) => {
            let spec = &mut object.data["spec"];
            if spec["caBundle"] != wanted {
                spec["caBundle"] = wanted;
                changed = true;
            }
        }
        Target::WebhookConfiguration(_) => {
            for webhook in object.data["webhooks"].as_array_mut().into_iter().flatten() {
                let config = &mut webhook["clientConfig"];
                if config["caBundle"] != wanted {
                    config["caBundle"] = wanted.clone();
                    changed = true;
                }
                changed |= keyed(config, key);
            }
        }
    }
    if changed {
        api.replace(name, &PostParams::default(), &object)
            .await
            .context("replacing it")?;
        tracing::info!(
            ?target,
            "caBundle and doors' paths written: kube-apiserver trusts the serving certificate's CA, and calls the doors with their key"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhooks_door_is_called_with_the_key_whether_by_service_or_by_url() {
        let key = DoorKey::generate().unwrap();
        let k = key.as_str();
        let mut service = serde_json::json!({"service": {"name": "ifo", "namespace": "ifo-system",
                                                         "path": "/admission/evictions/standby"}});
        assert!(keyed(&mut service, &key));
        assert_eq!(
            service["service"]["path"],
            format!("/admission/{k}/evictions/standby")
        );
        assert!(!keyed(&mut service, &key), "written once");
        let mut url = serde_json::json!({"url": "https://localhost:8443/admission/rulesets"});
        assert!(keyed(&mut url, &key));
        assert_eq!(
            url["url"],
            format!("https://localhost:8443/admission/{k}/rulesets")
        );
        // Not a door's: left alone.
        let mut other = serde_json::json!({"url": "https://example.com/validate"});
        assert!(!keyed(&mut other, &key));
    }

    #[test]
    fn targets_are_read_by_kind_and_name() {
        assert_eq!(
            "apiservice/v1alpha1.live.ifo.kubevirt.io".parse::<Target>(),
            Ok(Target::ApiService("v1alpha1.live.ifo.kubevirt.io".into()))
        );
        assert_eq!(
            "validatingwebhookconfiguration/ifo-maintenance-guard".parse::<Target>(),
            Ok(Target::WebhookConfiguration("ifo-maintenance-guard".into()))
        );
        for wrong in ["secret/x", "apiservice/", "apiservice", ""] {
            assert!(wrong.parse::<Target>().is_err(), "{wrong}");
        }
    }
}
