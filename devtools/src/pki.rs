//! Certificates for a local control plane, made with openssl: a cluster CA, a front-proxy CA (kept
//! apart from the cluster CA, as the aggregation layer requires), serving certificates and client
//! certificates whose CN/O become Kubernetes user names and groups.

use anyhow::{Context, Result};
use openssl::asn1::{Asn1Time, Asn1TimeRef};
use openssl::bn::{BigNum, MsbOption};
use openssl::ec::{EcGroup, EcKey};
use openssl::hash::MessageDigest;
use openssl::nid::Nid;
use openssl::pkey::{PKey, Private};
use openssl::rsa::Rsa;
use openssl::x509::extension::{
    AuthorityKeyIdentifier, BasicConstraints, ExtendedKeyUsage, KeyUsage, SubjectAlternativeName,
    SubjectKeyIdentifier,
};
use openssl::x509::{X509, X509Builder, X509Name, X509NameBuilder, X509NameRef};
use std::net::IpAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// A certificate with its private key, both PEM-encoded.
#[derive(Clone)]
pub struct KeyPair {
    /// The certificate, PEM.
    pub cert_pem: Vec<u8>,
    /// Its private key, PEM (PKCS#8).
    pub key_pem: Vec<u8>,
    cert: X509,
    key: PKey<Private>,
}

/// What a certificate is for; decides key usage and extended key usage.
pub enum Usage<'a> {
    /// TLS server for these DNS names and IP addresses.
    Server {
        /// The DNS names the certificate is valid for (subject alternative names).
        dns: &'a [&'a str],
        /// The IP addresses the certificate is valid for (subject alternative names).
        ips: &'a [IpAddr],
    },
    /// TLS client; Kubernetes reads the user from CN and the groups from O.
    Client,
}

fn new_key() -> Result<PKey<Private>> {
    let group = EcGroup::from_curve_name(Nid::X9_62_PRIME256V1)?;
    Ok(PKey::from_ec_key(EcKey::generate(&group)?)?)
}

fn serial() -> Result<openssl::asn1::Asn1Integer> {
    let mut bn = BigNum::new()?;
    bn.rand(127, MsbOption::MAYBE_ZERO, false)?;
    Ok(bn.to_asn1_integer()?)
}

/// `O=<organizations>, CN=<common_name>`.
fn subject(common_name: &str, organizations: &[&str]) -> Result<X509Name> {
    let mut name = X509NameBuilder::new()?;
    for org in organizations {
        name.append_entry_by_nid(Nid::ORGANIZATIONNAME, org)?;
    }
    name.append_entry_by_nid(Nid::COMMONNAME, common_name)?;
    Ok(name.build())
}

/// A v3 certificate builder with a random serial, the subject, issuer, key and validity set.
fn builder(
    subject: &X509NameRef,
    issuer: &X509NameRef,
    key: &PKey<Private>,
    not_before: &Asn1TimeRef,
    not_after: &Asn1TimeRef,
) -> Result<X509Builder> {
    let mut b = X509::builder()?;
    b.set_version(2)?;
    b.set_serial_number(&*serial()?)?;
    b.set_subject_name(subject)?;
    b.set_issuer_name(issuer)?;
    b.set_pubkey(key)?;
    b.set_not_before(not_before)?;
    b.set_not_after(not_after)?;
    Ok(b)
}

fn finish(cert: X509, key: PKey<Private>) -> Result<KeyPair> {
    Ok(KeyPair {
        cert_pem: cert.to_pem()?,
        key_pem: key.private_key_to_pem_pkcs8()?,
        cert,
        key,
    })
}

impl KeyPair {
    /// A self-signed certificate authority.
    pub fn new_ca(common_name: &str) -> Result<KeyPair> {
        KeyPair::ca_of(common_name, new_key()?)
    }

    /// A self-signed certificate authority with an RSA key (2048 bits), as Helm's `genCA` makes
    /// one (see [`KeyPair::rsa_key_pem`]).
    pub fn new_rsa_ca(common_name: &str) -> Result<KeyPair> {
        KeyPair::ca_of(common_name, PKey::from_rsa(Rsa::generate(2048)?)?)
    }

    /// The private key as PEM in PKCS #1 (`RSA PRIVATE KEY`), as Helm writes an RSA key; an
    /// error for a key that is not RSA.
    pub fn rsa_key_pem(&self) -> Result<Vec<u8>> {
        Ok(self.key.rsa()?.private_key_to_pem()?)
    }

    fn ca_of(common_name: &str, key: PKey<Private>) -> Result<KeyPair> {
        let name = subject(common_name, &[])?;
        let not_before = Asn1Time::days_from_now(0)?;
        let not_after = Asn1Time::days_from_now(3650)?;
        let mut b = builder(&name, &name, &key, &not_before, &not_after)?;
        b.append_extension(BasicConstraints::new().critical().ca().build()?)?;
        b.append_extension(
            KeyUsage::new()
                .critical()
                .key_cert_sign()
                .crl_sign()
                .digital_signature()
                .build()?,
        )?;
        let ski = SubjectKeyIdentifier::new().build(&b.x509v3_context(None, None))?;
        b.append_extension(ski)?;
        b.sign(&key, MessageDigest::sha256())?;
        finish(b.build(), key).context("making a CA certificate")
    }

    /// A leaf certificate signed by this CA, valid for a year.
    pub fn issue(
        &self,
        common_name: &str,
        organizations: &[&str],
        usage: Usage,
    ) -> Result<KeyPair> {
        let not_after = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(365 * 24);
        self.issue_until(common_name, organizations, usage, not_after)
    }

    /// A leaf certificate signed by this CA that expires at `not_after` (to the second).
    pub fn issue_until(
        &self,
        common_name: &str,
        organizations: &[&str],
        usage: Usage,
        not_after: jiff::Timestamp,
    ) -> Result<KeyPair> {
        let key = new_key()?;
        let name = subject(common_name, organizations)?;
        // Backdated a little: the processes reading it may start in the same second.
        let not_before = Asn1Time::from_unix(jiff::Timestamp::now().as_second() - 3600)?;
        let not_after = Asn1Time::from_unix(not_after.as_second())?;
        let mut b = builder(
            &name,
            self.cert.subject_name(),
            &key,
            &not_before,
            &not_after,
        )?;
        b.append_extension(BasicConstraints::new().critical().build()?)?;
        b.append_extension(
            KeyUsage::new()
                .critical()
                .digital_signature()
                .key_encipherment()
                .build()?,
        )?;
        match usage {
            Usage::Server { dns, ips } => {
                b.append_extension(ExtendedKeyUsage::new().server_auth().build()?)?;
                let mut san = SubjectAlternativeName::new();
                for d in dns {
                    san.dns(d);
                }
                for ip in ips {
                    san.ip(&ip.to_string());
                }
                let san = san.build(&b.x509v3_context(Some(&self.cert), None))?;
                b.append_extension(san)?;
            }
            Usage::Client => {
                b.append_extension(ExtendedKeyUsage::new().client_auth().build()?)?;
            }
        }
        let aki = AuthorityKeyIdentifier::new()
            .keyid(true)
            .build(&b.x509v3_context(Some(&self.cert), None))?;
        b.append_extension(aki)?;
        b.sign(&self.key, MessageDigest::sha256())?;
        finish(b.build(), key).with_context(|| format!("issuing a certificate for {common_name}"))
    }
}

/// An RSA key pair for service-account token signing (PEM private key, PEM public key).
pub fn service_account_key() -> Result<(Vec<u8>, Vec<u8>)> {
    let rsa = Rsa::generate(2048)?;
    Ok((rsa.private_key_to_pem()?, rsa.public_key_to_pem()?))
}

/// Writes a private key, token or kubeconfig readable by its owner only (0600), whatever the
/// umask: on a shared machine, any user who could read one would be cluster-admin.
pub fn write_private(path: &Path, data: impl AsRef<[u8]>) -> Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    // An existing file keeps its mode on open.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    file.write_all(data.as_ref())
        .with_context(|| format!("writing {}", path.display()))
}

/// Creates a directory (and its missing parents) for private files, open to its owner only
/// (0700).
pub fn create_private_dir(path: &Path) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
        .with_context(|| format!("creating {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("restricting {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use openssl::x509::X509StoreContext;
    use openssl::x509::store::X509StoreBuilder;

    #[test]
    fn private_files_and_directories_are_the_owners_only() {
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let base = std::env::temp_dir().join(format!("ifo-pki-test-{}", std::process::id()));
        let dir = base.join("a/b");
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let key = dir.join("x.key");
        std::fs::write(&key, "old").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&key, "secret").unwrap();
        assert_eq!(mode(&key), 0o600);
        assert_eq!(std::fs::read_to_string(&key).unwrap(), "secret");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn leaf_verifies_against_its_ca_only() {
        let ca = KeyPair::new_ca("test-ca").unwrap();
        let other = KeyPair::new_ca("other-ca").unwrap();
        let leaf = ca.issue("alice", &["team-a"], Usage::Client).unwrap();
        let verify = |ca: &KeyPair| {
            let mut store = X509StoreBuilder::new().unwrap();
            store.add_cert(ca.cert.clone()).unwrap();
            let store = store.build();
            let chain = openssl::stack::Stack::new().unwrap();
            let mut ctx = X509StoreContext::new().unwrap();
            ctx.init(&store, &leaf.cert, &chain, |c| c.verify_cert())
                .unwrap()
        };
        assert!(verify(&ca));
        assert!(!verify(&other));
        let cn = leaf
            .cert
            .subject_name()
            .entries_by_nid(Nid::COMMONNAME)
            .next()
            .unwrap();
        assert_eq!(cn.data().as_slice(), b"alice");
    }
}
