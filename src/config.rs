//! Settings of `ifo-apiserver serve`, from flags or the environment, validated at start: a bad
//! value stops the server with a message naming it, never a panic.

use clap::Args;
use jiff::SignedDuration;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

pub(crate) use ifo_apimachinery::duration::parse_duration;

/// The settings of `ifo-apiserver serve`; each flag also reads the environment variable named
/// beside it, which is how `deploy/` sets them.
#[derive(Args, Debug, Clone)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "BIND_ADDRESS", default_value = "127.0.0.1")]
    pub bind_address: IpAddr,
    /// HTTPS port of the API (what the aggregator and direct clients call).
    #[arg(long, env = "SECURE_PORT", default_value_t = 8443)]
    pub secure_port: u16,
    /// HTTPS port of the admission doors (the webhooks' `/admission/...` paths): a listener of
    /// their own, with connection pools of their own, that serves nothing else, so that what
    /// callers of the API hold open (watches, with any token) takes nothing kube-apiserver's
    /// reviews need. Same serving certificate as SECURE_PORT.
    #[arg(long, env = "ADMISSION_PORT", default_value_t = 9443)]
    pub admission_port: u16,
    /// Plain-HTTP port of the probes (`/livez`, `/readyz`, `/healthz`): a listener of their
    /// own, which no request budget of the HTTPS port stands in front of.
    #[arg(long, env = "HEALTH_PORT", default_value_t = 8081)]
    pub health_port: u16,
    /// Serving certificate (PEM). Its SANs must include `<service>.<namespace>.svc`.
    #[arg(long, env = "TLS_CERT_FILE")]
    pub tls_cert_file: PathBuf,
    /// Serving key (PEM).
    #[arg(long, env = "TLS_PRIVATE_KEY_FILE")]
    pub tls_private_key_file: PathBuf,
    /// Kubeconfig to reach kube-apiserver. Default: `$KUBECONFIG` (else `~/.kube/config`) when
    /// one exists, else the in-cluster service account (what `kube::Config::infer` does).
    #[arg(long, env = "KUBECONFIG_FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// How long an operation stays Active after its rule stops matching, before it completes.
    #[arg(long, env = "DEBOUNCE_THRESHOLD", default_value = "30s", value_parser = parse_duration)]
    pub debounce_threshold: SignedDuration,
    /// Deadline of each call to kube-apiserver that is not a watch: TokenReview,
    /// SubjectAccessReview, status writes, discovery (connect and write timeouts too). At least
    /// 1s.
    #[arg(long, env = "K8S_API_TIMEOUT", default_value = "10s", value_parser = parse_setting_duration)]
    pub k8s_api_timeout: Duration,
    /// Keep completed operations for COMPLETED_RETENTION instead of removing them at once.
    #[arg(long, env = "RETAIN_COMPLETED_IFOS", default_value_t = false, action = clap::ArgAction::Set)]
    pub retain_completed_ifos: bool,
    /// How long completed operations are kept when RETAIN_COMPLETED_IFOS is true.
    #[arg(long, env = "COMPLETED_RETENTION", default_value = "15m", value_parser = parse_duration)]
    pub completed_retention: SignedDuration,
    /// Most completed operations kept at once; the oldest go first.
    #[arg(long, env = "MAX_COMPLETED_IFOS", default_value_t = 10_000)]
    pub max_completed_ifos: usize,
    /// How long a watcher whose target the cluster does not serve (yet), or whose discovery
    /// failed, waits before it looks the target up again; a change to any CRD makes it look at
    /// once. Failed lists and watches back off on their own (1s to 30s). At least 1s.
    #[arg(long, env = "REQUEUE_INTERVAL", default_value = "60s", value_parser = parse_setting_duration)]
    pub requeue_interval: Duration,
    /// Watch events kept for watches that resume from a resourceVersion.
    #[arg(long, env = "EVENT_HISTORY", default_value_t = 10_000)]
    pub event_history: usize,
    /// Most memory the kept watch events may take, in MiB (records and their JSON, estimated):
    /// when operations churn, this bounds the history before EVENT_HISTORY does.
    #[arg(long, env = "EVENT_HISTORY_MIB", default_value_t = 12)]
    pub event_history_mib: usize,
    /// Events a single watcher may fall behind before it is cut with 410 Expired.
    #[arg(long, env = "WATCH_BUFFER", default_value_t = 1_000)]
    pub watch_buffer: usize,
    /// Watches open at once on the live API, in total; more are refused with 429.
    #[arg(long, env = "MAX_WATCHES", default_value_t = 10_000)]
    pub max_watches: usize,
    /// Watches open at once by one user; more are refused with 429.
    #[arg(long, env = "MAX_WATCHES_PER_USER", default_value_t = 1_000)]
    pub max_watches_per_user: usize,
    /// Memory all open watches may hold (each is charged 32 KiB and what its parsed selectors
    /// take), in bytes or with a `Ki`, `Mi` or `Gi` suffix; more are refused with 429.
    #[arg(long, env = "MAX_WATCH_MEMORY", default_value = "512Mi", value_parser = parse_bytes)]
    pub max_watch_memory: usize,
    /// Memory the open watches of one user may hold (see MAX_WATCH_MEMORY); more are refused
    /// with 429.
    #[arg(long, env = "MAX_WATCH_MEMORY_PER_USER", default_value = "32Mi", value_parser = parse_bytes)]
    pub max_watch_memory_per_user: usize,
    /// Client connections at once, on each of SECURE_PORT and ADMISSION_PORT (each has its own
    /// pools), whose client certificate was verified in the TLS handshake
    /// (the aggregator's front proxy multiplexes its requests over a few); more are closed at
    /// once. A connection that carries a review at the doors' key's path (kube-apiserver's, see
    /// SERVING_CERTIFICATE_SECRET) joins them from then on, while there is room. Other
    /// connections never take from these (MAX_ANONYMOUS_CONNECTIONS).
    #[arg(long, env = "MAX_CONNECTIONS", default_value_t = 1_000)]
    pub max_connections: usize,
    /// Connections at once, on each of SECURE_PORT and ADMISSION_PORT, without a verified client
    /// certificate (kube-apiserver's webhook
    /// calls unless configured with one, until a review at the doors' key's path; clients with
    /// a bearer token: a token proves a request, not its connection), shared fairly by address.
    /// When full, a new one displaces the oldest connection that sent a review the doors
    /// refused, busy or not; else a connection of the addresses that hold the most, never of one
    /// holding fewer than the newcomer's: one with no request in flight (the silent first, the
    /// oldest of them, then the one idle longest), else, from addresses holding at least two
    /// more, their oldest, requests in flight and all.
    #[arg(long, env = "MAX_ANONYMOUS_CONNECTIONS", default_value_t = 512)]
    pub max_anonymous_connections: usize,
    /// Time a client has to send a request's headers. A new connection has as long from its
    /// accept to its first request (TLS handshake and HTTP/1-or-2 detection included); an idle
    /// HTTP/1 connection closes after as long.
    #[arg(long, env = "REQUEST_HEADER_TIMEOUT", default_value = "10s", value_parser = parse_setting_duration)]
    pub request_header_timeout: Duration,
    /// On SIGTERM, how long `/readyz` fails before open watches are ended and the server stops,
    /// so that load balancers and the aggregator stop sending requests first. Without leader
    /// election only: a leader hands the Lease over instead, and a standby stops at once.
    #[arg(long, env = "SHUTDOWN_DELAY", default_value = "5s", value_parser = parse_setting_duration)]
    pub shutdown_delay: Duration,
    /// Longest `/readyz` waits for the initial sync (rulesets listed, their targets listed)
    /// before it reports ready with what is known: an unready server stalls the APIService.
    #[arg(long, env = "INITIAL_SYNC_TIMEOUT", default_value = "2m", value_parser = parse_setting_duration)]
    pub initial_sync_timeout: Duration,
    /// How often each watched target is listed (one object) to notice a watch that stalled
    /// without failing (etcd unavailable); a list slower than K8S_API_TIMEOUT counts as failed.
    /// At least 1s.
    #[arg(long, env = "WATCH_PROBE_INTERVAL", default_value = "15s", value_parser = parse_setting_duration)]
    pub watch_probe_interval: Duration,
    /// Get each watched target's objects as one streamed watch (sendInitialEvents,
    /// kube-apiserver's WatchList) rather than in pages of 500: faster to start, since
    /// kube-apiserver sends while the server evaluates. An API server that refuses it, or sends
    /// nothing for 60s before ending it, is listed in pages anyway. False: always in pages.
    #[arg(long, env = "STREAMING_LISTS", default_value_t = true, action = clap::ArgAction::Set)]
    pub streaming_lists: bool,
    /// Runtime cost one CEL expression may use on one object (elements iterated × the size of
    /// the comprehension body, elements created); beyond it the evaluation stops as unknown.
    #[arg(long, env = "CEL_COST_LIMIT", default_value_t = crate::evaluate::DEFAULT_COST_LIMIT,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub cel_cost_limit: u64,
    /// CPU time one ruleset's evaluation on one object may use (its work: time spent waiting
    /// for a CPU is not counted).
    #[arg(long, env = "CEL_EVALUATION_TIMEOUT", default_value = "100ms", value_parser = parse_setting_duration)]
    pub cel_evaluation_timeout: Duration,
    /// Different objects of one namespace a ruleset goes over its budget on within
    /// CEL_SUSPEND_WINDOW that suspend it there until its spec changes; 0 never suspends.
    #[arg(long, env = "CEL_SUSPEND_AFTER", default_value_t = crate::detect::DEFAULT_SUSPEND_AFTER)]
    pub cel_suspend_after: u32,
    /// See CEL_SUSPEND_AFTER.
    #[arg(long, env = "CEL_SUSPEND_WINDOW", default_value = "10m", value_parser = parse_setting_duration)]
    pub cel_suspend_window: Duration,
    /// Longest the oldest event a ruleset has not evaluated yet may wait (its evaluation lag)
    /// before the ruleset's detection in its namespace counts as not current: answers carry a
    /// Warning and the gates the late changes can reach are Unknown until the lag is back under
    /// it. At least 1s.
    #[arg(long, env = "EVALUATION_LAG_BOUND", default_value = "5s", value_parser = parse_setting_duration)]
    pub evaluation_lag_bound: Duration,
    /// Least time between two writes of a ruleset's status that nobody waits on: its other
    /// conditions, counts and learned durations (a change after a quiet interval is written at
    /// once). Ready, InvalidRule and a suspension are written within 2s. At least 1s.
    #[arg(long, env = "RULESET_STATUS_INTERVAL", default_value = "60s", value_parser = parse_setting_duration)]
    pub ruleset_status_interval: Duration,
    /// Also write every operation as a cluster-scoped `inflightoperations.ifo.kubevirt.io`
    /// custom resource (the CRD of deploy/persist/ must be installed), read back at start.
    #[arg(long, env = "PERSIST", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub persist: bool,
    /// Least time between two writes of one operation's persisted copy.
    #[arg(long, env = "PERSIST_INTERVAL", default_value = "5s", value_parser = parse_setting_duration)]
    pub persist_interval: Duration,
    /// Writes of persisted copies per second, all operations together.
    #[arg(long, env = "PERSIST_QPS", default_value_t = 50.0, value_parser = positive)]
    pub persist_qps: f64,
    /// Writes of persisted copies allowed at once above PERSIST_QPS.
    #[arg(long, env = "PERSIST_BURST", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub persist_burst: u32,
    /// Answer the maintenance guard's reviews of evictions at `/admission/evictions` (the
    /// ValidatingWebhookConfiguration of deploy/guard/): an eviction of a pod on a node whose
    /// gate is not Clear is refused with 429. Watches the cluster's pods (their nodes) for it.
    #[arg(long, env = "EVICTION_GUARD", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub eviction_guard: bool,
    /// What the guard answers while a node's gate is Unknown (the server cannot vouch that
    /// nothing is in flight there): `deny` holds the drain until it can (the default), `allow`
    /// lets it through as if the guard were not installed.
    #[arg(long, env = "GUARD_WHEN_UNKNOWN", value_enum, default_value_t = WhenUnknown::Deny)]
    pub guard_when_unknown: WhenUnknown,
    /// How often each replica checks, with EVICTION_GUARD, that kube-apiserver reaches the
    /// guard's door it stands behind: a dry-run eviction of a pod of POD_NAMESPACE that does not
    /// exist, sent through kube-apiserver, whose review the door recognizes and answers (the
    /// result is `ifo_guard_reached`). At least 1s.
    #[arg(long, env = "GUARD_REACH_CHECK_INTERVAL", default_value = "30s", value_parser = parse_setting_duration)]
    pub guard_reach_check_interval: Duration,
    /// Make and renew the serving certificate here, kept in this Secret of POD_NAMESPACE (with
    /// its CA), written to TLS_CERT_FILE and TLS_PRIVATE_KEY_FILE, and its CA written into the
    /// `caBundle` of CA_BUNDLE_TARGETS, so that no manifest of the install holds a certificate.
    /// Unset: the certificate is read from those files, made by someone else.
    #[arg(long, env = "SERVING_CERTIFICATE_SECRET")]
    pub serving_certificate_secret: Option<String>,
    /// The DNS names (and IP addresses) the certificate SERVING_CERTIFICATE_SECRET holds is
    /// for, comma-separated: the Services kube-apiserver calls (`ifo-apiserver.<namespace>.svc`).
    #[arg(long, env = "SERVING_CERTIFICATE_NAMES", value_delimiter = ',')]
    pub serving_certificate_names: Vec<String>,
    /// How long a serving certificate made here is valid: renewed when a third is left; its CA
    /// lives ten times as long, and is renewed while it can still outlive one.
    #[arg(long, env = "SERVING_CERTIFICATE_LIFETIME", default_value = "8760h", value_parser = parse_lifetime)]
    pub serving_certificate_lifetime: Duration,
    /// A Secret of POD_NAMESPACE holding a CA and its key (`tls.crt`, `tls.key`) that
    /// SERVING_CERTIFICATE_SECRET takes over while it holds no CA of its own: the CA an install
    /// that made its certificates otherwise kept (the chart's `ifo-apiserver-ca`), which
    /// kube-apiserver already trusts, so that a change to the server's own certificates
    /// leaves it trusting both the replicas still serving the certificate that CA signed and the
    /// server's first. Absent or unreadable: a CA of its own is made.
    #[arg(long, env = "SERVING_CERTIFICATE_CA_FROM")]
    pub serving_certificate_ca_from: Option<String>,
    /// What kube-apiserver is told to trust the CA of SERVING_CERTIFICATE_SECRET in,
    /// comma-separated: `apiservice/<name>`, `validatingwebhookconfiguration/<name>` (every
    /// webhook of it).
    #[arg(long, env = "CA_BUNDLE_TARGETS", value_delimiter = ',')]
    pub ca_bundle_targets: Vec<crate::certificates::TrustTarget>,
    /// Common names of the client certificates kube-apiserver presents to the admission doors
    /// (its `AdmissionConfiguration`'s webhook kubeconfig), comma-separated. When set, the
    /// doors answer only a caller with such a certificate, of ADMISSION_CLIENT_CA_FILE (or else
    /// the cluster's client CA); any other gets 401 before its body is read.
    #[arg(long, env = "ADMISSION_ALLOWED_NAMES", value_delimiter = ',')]
    pub admission_allowed_names: Vec<String>,
    /// The CA certificates (PEM) of kube-apiserver's webhook client certificate, when it is not
    /// the cluster's client CA (`client-ca-file` of kube-system/extension-apiserver-authentication).
    #[arg(long, env = "ADMISSION_CLIENT_CA_FILE")]
    pub admission_client_ca_file: Option<std::path::PathBuf>,
    /// Run as one of several replicas: only the holder of a Lease serves the API (and writes
    /// persisted copies); the others keep their index warm and take over when it goes.
    #[arg(long, env = "LEADER_ELECT", default_value_t = false, action = clap::ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,
    /// How long the others wait after the leader's last renewal before they take the lease.
    #[arg(long, env = "LEADER_ELECT_LEASE_DURATION", default_value = "15s", value_parser = parse_setting_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it stops serving.
    #[arg(long, env = "LEADER_ELECT_RENEW_DEADLINE", default_value = "10s", value_parser = parse_setting_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// Time between two looks at the lease.
    #[arg(long, env = "LEADER_ELECT_RETRY_PERIOD", default_value = "2s", value_parser = parse_setting_duration)]
    pub leader_elect_retry_period: Duration,
    /// Name of the Lease.
    #[arg(
        long,
        env = "LEADER_ELECT_RESOURCE_NAME",
        default_value = "ifo-apiserver"
    )]
    pub leader_elect_resource_name: String,
    /// This replica's pod (from the downward API): its name is its identity in the Lease, and
    /// the leader labels it `ifo.kubevirt.io/leader=true` for the Service to select.
    #[arg(long, env = "POD_NAME")]
    pub pod_name: Option<String>,
    /// Namespace of the Lease and of the pod (in a pod: its own, from the downward API), and
    /// where the guard's reach checks are sent (see GUARD_REACH_CHECK_INTERVAL).
    #[arg(long, env = "POD_NAMESPACE", default_value = "ifo-system")]
    pub leader_elect_resource_namespace: String,
    /// The container that runs the server in the replicas' pods. With `POD_NAME` set, followers
    /// watch the leader's pod and take the Lease as soon as kubelet reports this container of it
    /// ended after the leader took the Lease, instead of waiting for the Lease to expire.
    #[arg(
        long,
        env = "LEADER_ELECT_CONTAINER_NAME",
        default_value = "ifo-apiserver"
    )]
    pub leader_elect_container_name: String,
}

/// What the maintenance guard answers for a node whose gate is Unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WhenUnknown {
    /// Refuse the eviction (429), as for a node with operations in flight.
    Deny,
    /// Let it through.
    Allow,
}

/// Why a setting's value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SettingError {
    /// Not bytes, nor a number with a binary suffix.
    #[error("{0:?} is not a size (bytes, or a number with Ki, Mi or Gi)")]
    NotASize(String),
    /// Not a finite number above zero.
    #[error("{0:?} is not a positive number")]
    NotPositive(String),
    /// The leader election's periods cannot work together.
    #[error(
        "leader election needs 0 < retry period ({retry:?}) < renew deadline ({renew:?}) < lease duration ({lease:?})"
    )]
    LeaderElectionPeriods {
        /// `LEADER_ELECT_RETRY_PERIOD`.
        retry: Duration,
        /// `LEADER_ELECT_RENEW_DEADLINE`.
        renew: Duration,
        /// `LEADER_ELECT_LEASE_DURATION`.
        lease: Duration,
    },
}

/// A setting's duration (see [`parse_duration`]) as the timers that use it take it: settings are
/// never negative.
fn parse_setting_duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map(|d| d.unsigned_abs())
}

/// A certificate's lifetime: a duration of at least a minute (renewals come at a third of it).
fn parse_lifetime(s: &str) -> Result<Duration, String> {
    let d = parse_setting_duration(s)?;
    if d < Duration::from_secs(60) {
        return Err(format!("{s:?} is shorter than a minute"));
    }
    Ok(d)
}

/// Bytes, bare or with a binary suffix as Kubernetes quantities write them (`512Mi`).
fn parse_bytes(s: &str) -> Result<usize, SettingError> {
    let not_a_size = || SettingError::NotASize(s.to_owned());
    let (number, unit) = match s.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => s.split_at(i),
        None => (s, ""),
    };
    let shift = match unit {
        "" => 0,
        "Ki" => 10,
        "Mi" => 20,
        "Gi" => 30,
        _ => return Err(not_a_size()),
    };
    number
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(not_a_size)
}

fn positive(s: &str) -> Result<f64, SettingError> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(SettingError::NotPositive(s.to_owned())),
    }
}

impl ServeArgs {
    /// The evaluation budget and suspension policy these settings give.
    pub(crate) fn evaluation_limits(&self) -> crate::detect::Limits {
        crate::detect::Limits {
            budget: crate::evaluate::Budget {
                cost_limit: self.cel_cost_limit,
                timeout: self.cel_evaluation_timeout,
            },
            suspend: crate::detect::SuspendPolicy {
                after: self.cel_suspend_after,
                window: self.cel_suspend_window,
            },
            lag_bound: self.evaluation_lag_bound.max(Duration::from_secs(1)),
        }
    }

    /// How the persistence writer paces itself.
    pub(crate) fn persist_settings(&self) -> crate::persist::Settings {
        crate::persist::Settings {
            interval: self.persist_interval,
            qps: self.persist_qps,
            burst: self.persist_burst,
        }
    }

    /// With `--leader-elect`, where the Lease is and how it is kept; an error names a setting
    /// that cannot work (each period must be shorter than the one it guards, as in Kubernetes).
    pub(crate) fn leader_election(&self) -> Result<Option<crate::lease::Settings>, SettingError> {
        if !self.leader_elect {
            return Ok(None);
        }
        let lease = self.leader_elect_lease_duration;
        let renew = self.leader_elect_renew_deadline;
        let retry = self.leader_elect_retry_period;
        if retry.is_zero() || renew <= retry || lease <= renew {
            return Err(SettingError::LeaderElectionPeriods {
                retry,
                renew,
                lease,
            });
        }
        let host = self
            .pod_name
            .clone()
            .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "ifo-apiserver".to_owned());
        Ok(Some(crate::lease::Settings {
            namespace: self.leader_elect_resource_namespace.clone(),
            name: self.leader_elect_resource_name.clone(),
            // Unique even for two processes on one host, as client-go's hostname_uuid.
            identity: format!("{host}_{:016x}", fastrand::u64(..)),
            lease_duration: lease,
            renew_deadline: renew,
            retry_period: retry,
            // Identities name their pods only with POD_NAME (else they name hosts).
            container: self
                .pod_name
                .as_ref()
                .map(|_| self.leader_elect_container_name.clone()),
        }))
    }

    /// The defaults of every flag.
    #[cfg(test)]
    pub(crate) fn defaults() -> ServeArgs {
        #[derive(clap::Parser)]
        struct Wrapper {
            #[command(flatten)]
            args: ServeArgs,
        }
        use clap::Parser;
        Wrapper::parse_from([
            "serve",
            "--tls-cert-file=tls.crt",
            "--tls-private-key-file=tls.key",
        ])
        .args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_election_is_off_by_default_and_checks_its_periods() {
        let mut args = ServeArgs::defaults();
        assert!(args.leader_election().unwrap().is_none());
        args.leader_elect = true;
        let settings = args.leader_election().unwrap().unwrap();
        assert_eq!(settings.lease_duration, std::time::Duration::from_secs(15));
        assert_eq!(settings.renew_deadline, std::time::Duration::from_secs(10));
        assert_eq!(settings.retry_period, std::time::Duration::from_secs(2));
        assert_eq!(settings.name, "ifo-apiserver");
        let other = args.leader_election().unwrap().unwrap();
        assert_ne!(
            settings.identity, other.identity,
            "two processes, two identities"
        );
        args.leader_elect_renew_deadline = Duration::from_secs(20);
        let error = args.leader_election().unwrap_err().to_string();
        assert!(error.contains("renew deadline"), "{error}");
    }

    #[test]
    fn sizes_read_as_kubernetes_writes_them() {
        assert_eq!(parse_bytes("512Mi"), Ok(512 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("2Gi"), Ok(2 << 30));
        assert!(parse_bytes("12MB").is_err());
        assert!(parse_bytes("Mi").is_err());
        let defaults = ServeArgs::defaults();
        assert_eq!(defaults.max_watch_memory, 512 << 20);
        assert_eq!(defaults.max_watch_memory_per_user, 32 << 20);
    }

    #[test]
    fn evaluation_limits_default_to_the_documented_values() {
        let limits = ServeArgs::defaults().evaluation_limits();
        assert_eq!(limits, crate::detect::Limits::default());
    }
}
