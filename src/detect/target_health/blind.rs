//! Why detection in part of a target is not current: one [`Blind`] per reason, read as the rest
//! of a sentence about the target (what the API's `Warning`s and the gates' conditions say).

use std::fmt;
use std::time::Duration;

/// Why detection in part of a target is not current.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Blind {
    /// Its watch is not current (starting, failing or stalled): nothing of it is seen.
    NotWatched(String),
    /// A ruleset of it is suspended in a namespace: its rules do not run there.
    Suspended {
        /// The ruleset.
        ruleset: String,
        /// The namespace; `None`: cluster-scoped subjects.
        namespace: Option<String>,
    },
    /// A ruleset's evaluation fell behind and dropped events; the target is listed again.
    DroppedEvents {
        /// The ruleset.
        ruleset: String,
    },
    /// A ruleset's evaluation lags: the oldest event its lane holds of a namespace has waited
    /// longer than the bound. Nothing is lost; what changed since is seen once evaluation
    /// catches up.
    Lagging {
        /// The ruleset.
        ruleset: String,
        /// The namespace whose changes are late; `None`: cluster-scoped objects.
        namespace: Option<String>,
        /// How long that event had waited when this was last said (whole seconds, at least
        /// `bound`).
        lag: Duration,
        /// The bound (`EVALUATION_LAG_BOUND`).
        bound: Duration,
    },
    /// One object is not evaluated.
    Skipped {
        /// `namespace/name` of the object.
        object: String,
        /// Why (it cannot be decoded, a ruleset went over its budget on it, or a rule fails on
        /// it), with the remedy.
        why: String,
    },
    /// A ruleset does not compile: none of its rules run.
    Invalid {
        /// The ruleset.
        ruleset: String,
        /// Its first problem.
        error: String,
    },
}

/// Reads as the rest of a sentence whose subject is the target.
impl fmt::Display for Blind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blind::NotWatched(reason) => write!(f, "{}{reason}", ifo_model::NOT_WATCHED),
            Blind::Suspended { ruleset, namespace } => {
                let place = match namespace {
                    Some(ns) => format!("in namespace {ns}"),
                    None => "for cluster-scoped objects".to_owned(),
                };
                write!(
                    f,
                    "is not evaluated by ruleset {ruleset}: it is suspended {place} (it kept going over its evaluation budget there); make its rules cheaper or the objects there smaller (any change to its spec resumes it)"
                )
            }
            Blind::DroppedEvents { ruleset } => write!(
                f,
                "lost events of ruleset {ruleset} (its evaluation fell behind); listing it again"
            ),
            Blind::Lagging {
                ruleset,
                namespace,
                lag,
                bound,
            } => write!(
                f,
                "is evaluated late by ruleset {ruleset}{}: its oldest event not yet evaluated there has waited over {} (EVALUATION_LAG_BOUND: {}), so what changed since is not seen yet; make the ruleset's rules cheaper, or find what changes its objects so often (ifo_evaluation_lag_seconds, ifo_object_events_total)",
                namespace
                    .as_deref()
                    .map(|ns| format!(" in namespace {ns}"))
                    .unwrap_or_default(),
                seconds(*lag),
                seconds(*bound),
            ),
            Blind::Skipped { object, why } => write!(f, "object {object} is skipped: {why}"),
            Blind::Invalid { ruleset, error } => write!(
                f,
                "is not evaluated by ruleset {ruleset}: its rules do not compile ({error}); fix the ruleset (kubectl describe ors {ruleset})"
            ),
        }
    }
}

/// `d` as a setting writes it: `5s`, `2.5s`, `500ms`.
fn seconds(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}
