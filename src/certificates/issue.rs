//! Making the CA and the serving certificate, and judging what a kept pair still needs: pure,
//! given the time.
//!
//! A CA is valid [`CA_LIFETIMES`] serving lifetimes and is replaced while it can still outlive
//! the certificate it would sign; a serving certificate is replaced when a third of its lifetime
//! is left, when it is not for the names asked, or not signed by the current CA. The CA bundle
//! kube-apiserver trusts holds the current CA and, while it is valid, the one before it, so that
//! a replica still serving the previous certificate is trusted until it reloads.

use anyhow::{Context, Result, anyhow};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use std::time::Duration;
use time::OffsetDateTime;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// A CA lives this many serving certificates' lifetimes.
pub(super) const CA_LIFETIMES: u32 = 10;

/// The CA and serving certificate, as PEM, as the Secret keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Material {
    /// The current CA first, then the previous one while it is valid.
    pub ca_bundle: String,
    /// The current CA's key.
    pub ca_key: String,
    pub cert: String,
    pub key: String,
}

/// What kept material needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Needs {
    Nothing,
    /// A new serving certificate under the current CA.
    Certificate,
    /// A new CA, and a serving certificate under it.
    Ca,
}

/// What `kept` needs for serving `names` for `lifetime` from `now`.
pub(super) fn needs(
    kept: Option<&Material>,
    names: &[String],
    lifetime: Duration,
    now: OffsetDateTime,
) -> Needs {
    let Some(kept) = kept else {
        return Needs::Ca;
    };
    let Some(ca) = certificates(&kept.ca_bundle).into_iter().next() else {
        return Needs::Ca;
    };
    let ca_ok = parsed(&ca, |ca| {
        KeyPair::from_pem(&kept.ca_key).is_ok()
            && ca.validity().not_after.to_datetime() - now > lifetime
    });
    if ca_ok != Some(true) {
        return Needs::Ca;
    }
    let Some(cert) = certificates(&kept.cert).into_iter().next() else {
        return Needs::Certificate;
    };
    let cert_ok = parsed(&cert, |cert| {
        let left = cert.validity().not_after.to_datetime() - now;
        KeyPair::from_pem(&kept.key).is_ok()
            && left > lifetime / 3
            && parsed(&ca, |ca| {
                ca.subject() == cert.issuer()
                    && cert.verify_signature(Some(ca.public_key())).is_ok()
            }) == Some(true)
            && same_names(&subject_alt_names(cert), names)
    });
    if cert_ok == Some(true) {
        Needs::Nothing
    } else {
        Needs::Certificate
    }
}

/// `kept` with what it `needs` made anew, for `names` and `lifetime` from `now`.
pub(super) fn renewed(
    kept: Option<&Material>,
    needs: Needs,
    names: &[String],
    lifetime: Duration,
    now: OffsetDateTime,
) -> Result<Material> {
    let (ca_bundle, ca_key) = match (needs, kept) {
        (Needs::Nothing, Some(kept)) => return Ok(kept.clone()),
        (Needs::Certificate, Some(kept)) => (kept.ca_bundle.clone(), kept.ca_key.clone()),
        _ => {
            let (ca, key) = new_ca(lifetime * CA_LIFETIMES, now)?;
            // The previous CA stays trusted while a replica may serve what it signed.
            let previous = kept
                .and_then(|k| certificates(&k.ca_bundle).into_iter().next())
                .filter(|old| {
                    parsed(old, |c| c.validity().not_after.to_datetime() > now) == Some(true)
                })
                .map(|old| pem("CERTIFICATE", &old))
                .unwrap_or_default();
            (format!("{ca}{previous}"), key)
        }
    };
    let current = certificates(&ca_bundle)
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("the CA bundle holds no certificate"))?;
    let ca_signing = KeyPair::from_pem(&ca_key).context("reading the CA's key")?;
    let issuer = Issuer::from_ca_cert_pem(&pem("CERTIFICATE", &current), ca_signing)
        .context("reading the CA")?;
    let mut params = CertificateParams::new(names.to_vec()).context("the serving names")?;
    params.distinguished_name = name(names.first().map_or("ifo-apiserver", String::as_str));
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + lifetime;
    let key = KeyPair::generate().context("making the serving key")?;
    let cert = params
        .signed_by(&key, &issuer)
        .context("signing the serving certificate")?;
    Ok(Material {
        ca_bundle,
        ca_key,
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// When the serving certificate of `material` ends (Unix seconds).
pub(super) fn not_after(material: &Material) -> Option<i64> {
    let cert = certificates(&material.cert).into_iter().next()?;
    parsed(&cert, |c| c.validity().not_after.timestamp())
}

/// A new CA valid for `lifetime` from `now`, and its key, as PEM. Its name carries the time it
/// was made, so that each CA is told from the one before it.
fn new_ca(lifetime: Duration, now: OffsetDateTime) -> Result<(String, String)> {
    let mut params = CertificateParams::default();
    params.distinguished_name = name(&format!("ifo-apiserver-ca@{}", now.unix_timestamp()));
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = now - time::Duration::minutes(5);
    params.not_after = now + lifetime;
    let key = KeyPair::generate().context("making the CA's key")?;
    let ca = params.self_signed(&key).context("signing the CA")?;
    Ok((ca.pem(), key.serialize_pem()))
}

fn name(common: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common);
    name
}

/// The certificates (DER) of a PEM bundle, in order.
fn certificates(bundle: &str) -> Vec<Vec<u8>> {
    x509_parser::pem::Pem::iter_from_buffer(bundle.as_bytes())
        .filter_map(Result::ok)
        .filter(|p| p.label == "CERTIFICATE")
        .map(|p| p.contents)
        .collect()
}

fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// `f` of the certificate `der`, when it parses.
fn parsed<T>(der: &[u8], f: impl FnOnce(&X509Certificate<'_>) -> T) -> Option<T> {
    X509Certificate::from_der(der).ok().map(|(_, c)| f(&c))
}

/// The DNS names and addresses a certificate is for, as strings.
fn subject_alt_names(cert: &X509Certificate<'_>) -> Vec<String> {
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::DNSName(d) => Some((*d).to_owned()),
            GeneralName::IPAddress(ip) => match ip.len() {
                4 => <[u8; 4]>::try_from(*ip)
                    .ok()
                    .map(|b| std::net::IpAddr::from(b).to_string()),
                16 => <[u8; 16]>::try_from(*ip)
                    .ok()
                    .map(|b| std::net::IpAddr::from(b).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn same_names(have: &[String], want: &[String]) -> bool {
    let mut have = have.to_vec();
    let mut want = want.to_vec();
    have.sort();
    want.sort();
    have == want
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86_400);

    fn names() -> Vec<String> {
        vec![
            "ifo-apiserver.ifo-system.svc".to_owned(),
            "127.0.0.1".to_owned(),
        ]
    }

    fn made(now: OffsetDateTime) -> Material {
        renewed(None, Needs::Ca, &names(), 30 * DAY, now).unwrap()
    }

    #[test]
    fn nothing_kept_needs_a_ca_and_what_is_made_needs_nothing_until_a_third_is_left() {
        let now = OffsetDateTime::now_utc();
        assert_eq!(needs(None, &names(), 30 * DAY, now), Needs::Ca);
        let m = made(now);
        assert_eq!(needs(Some(&m), &names(), 30 * DAY, now), Needs::Nothing);
        assert_eq!(
            needs(Some(&m), &names(), 30 * DAY, now + 19 * DAY),
            Needs::Nothing
        );
        assert_eq!(
            needs(Some(&m), &names(), 30 * DAY, now + 21 * DAY),
            Needs::Certificate
        );
        // Other names: a new certificate under the same CA.
        let other = vec!["ifo-apiserver.elsewhere.svc".to_owned()];
        assert_eq!(needs(Some(&m), &other, 30 * DAY, now), Needs::Certificate);
        let renewed = renewed(Some(&m), Needs::Certificate, &other, 30 * DAY, now).unwrap();
        assert_eq!(renewed.ca_bundle, m.ca_bundle);
        assert_ne!(renewed.cert, m.cert);
        assert_eq!(needs(Some(&renewed), &other, 30 * DAY, now), Needs::Nothing);
        let cert = certificates(&renewed.cert).remove(0);
        let san = parsed(&cert, subject_alt_names).unwrap();
        assert!(same_names(&san, &other), "{san:?}");
    }

    #[test]
    fn a_ca_near_its_end_is_replaced_and_the_old_one_kept_trusted_while_valid() {
        let now = OffsetDateTime::now_utc();
        let m = made(now);
        // The CA lives 300 days: at 280, it cannot outlive a 30-day certificate.
        let later = now + 280 * DAY;
        assert_eq!(needs(Some(&m), &names(), 30 * DAY, later), Needs::Ca);
        let next = renewed(Some(&m), Needs::Ca, &names(), 30 * DAY, later).unwrap();
        let bundle = certificates(&next.ca_bundle);
        assert_eq!(bundle.len(), 2, "{}", next.ca_bundle);
        assert_eq!(bundle[1], certificates(&m.ca_bundle)[0]);
        assert_eq!(
            needs(Some(&next), &names(), 30 * DAY, later),
            Needs::Nothing
        );
        // The new certificate is signed by the new CA, not the old one.
        let cert = certificates(&next.cert).remove(0);
        let issuer = parsed(&cert, |c| c.issuer().to_string()).unwrap();
        let new_ca = parsed(&bundle[0], |c| c.subject().to_string()).unwrap();
        assert_eq!(issuer, new_ca);
        // Once the old CA has ended, the next CA leaves it out.
        let much_later = now + 400 * DAY;
        let after = renewed(Some(&next), Needs::Ca, &names(), 30 * DAY, much_later).unwrap();
        assert_eq!(certificates(&after.ca_bundle).len(), 2);
        assert_eq!(certificates(&after.ca_bundle)[1], bundle[0]);
    }

    /// A CA taken over from the chart's own certificates, as Helm's `genCA` makes it (RSA, its
    /// key in PKCS #1): whether the server signs with it or makes a CA of its own, the bundle
    /// kube-apiserver is given still trusts it, and the new certificate verifies against the
    /// bundle's first CA.
    #[test]
    fn a_ca_taken_over_stays_trusted() {
        let ca = ifo_dev::pki::KeyPair::new_rsa_ca("ifo-apiserver-ca").unwrap();
        let key_pem = String::from_utf8(ca.rsa_key_pem().unwrap()).unwrap();
        assert!(key_pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"));
        let ca_pem = String::from_utf8(ca.cert_pem).unwrap();
        let taken = Material {
            ca_bundle: ca_pem.clone(),
            ca_key: key_pem,
            cert: String::new(),
            key: String::new(),
        };
        let now = OffsetDateTime::now_utc();
        for lifetime in [30 * DAY, 3650 * DAY] {
            let needed = needs(Some(&taken), &names(), lifetime, now);
            assert_ne!(needed, Needs::Nothing);
            let m = renewed(Some(&taken), needed, &names(), lifetime, now).unwrap();
            let bundle = certificates(&m.ca_bundle);
            assert!(
                bundle.contains(&certificates(&ca_pem)[0]),
                "{lifetime:?}: {}",
                m.ca_bundle
            );
            let cert = certificates(&m.cert).remove(0);
            let signed = parsed(&cert, |c| {
                parsed(&bundle[0], |ca| {
                    c.verify_signature(Some(ca.public_key())).is_ok()
                })
            });
            assert_eq!(signed, Some(Some(true)), "{lifetime:?}");
            assert_eq!(needs(Some(&m), &names(), lifetime, now), Needs::Nothing);
        }
    }

    #[test]
    fn damaged_material_is_made_again() {
        let now = OffsetDateTime::now_utc();
        let m = made(now);
        let no_key = Material {
            ca_key: "not a key".into(),
            ..m.clone()
        };
        assert_eq!(needs(Some(&no_key), &names(), 30 * DAY, now), Needs::Ca);
        let no_cert = Material {
            cert: String::new(),
            ..m.clone()
        };
        assert_eq!(
            needs(Some(&no_cert), &names(), 30 * DAY, now),
            Needs::Certificate
        );
        // A certificate of another CA.
        let other = made(now);
        let foreign = Material {
            cert: other.cert,
            key: other.key,
            ..m
        };
        assert_eq!(
            needs(Some(&foreign), &names(), 30 * DAY, now),
            Needs::Certificate
        );
    }
}
