//! A gate's verdict, typed: clear, in flight, or unknown and why. Judged once, from the scope's
//! members and feeds (see [`judge`]); the API renders it as the `Clear` condition, the guard
//! decides from it, the metrics count it. Nothing reads the rendered strings back.

use super::feeds::Feeds;

/// What a gate says of its scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Nothing in flight, and the server vouches for the scope.
    Clear,
    /// Operations in flight (the scope's members say which).
    InFlight,
    /// The server cannot vouch for the scope.
    Unknown(Unknown),
}

/// Why a verdict is unknown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unknown {
    /// A feed of the scope is not current, or the initial sync is not done.
    Stale,
    /// Only whether the scope exists is not known.
    Existence,
}

impl Verdict {
    /// What clients read of it (see [`ifo_model::Verdict`]).
    pub(crate) fn read(self) -> ifo_model::Verdict {
        match self {
            Verdict::Clear => ifo_model::Verdict::Clear,
            Verdict::InFlight => ifo_model::Verdict::InFlight,
            Verdict::Unknown(_) => ifo_model::Verdict::Unknown,
        }
    }

    /// The `Clear` condition's status: its wire form.
    pub(crate) fn status(self) -> &'static str {
        self.read().status()
    }

    /// The `Clear` condition's reason.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Verdict::Clear => "NothingInFlight",
            Verdict::InFlight => "OperationsInFlight",
            Verdict::Unknown(Unknown::Stale) => "Stale",
            Verdict::Unknown(Unknown::Existence) => "ExistenceUnknown",
        }
    }
}

/// The verdict on a scope with `active` operations in flight, whose feeds are `feeds`: never
/// clear on data the server cannot vouch for.
pub(crate) fn judge(active: usize, feeds: &Feeds) -> Verdict {
    if !feeds.is_current() {
        if feeds.synced && feeds.stale.is_empty() {
            Verdict::Unknown(Unknown::Existence)
        } else {
            Verdict::Unknown(Unknown::Stale)
        }
    } else if active > 0 {
        Verdict::InFlight
    } else {
        Verdict::Clear
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feeds(synced: bool, stale: bool, existence_unknown: bool) -> Feeds {
        let target = crate::ruleset::Target {
            group: "kubevirt.io".into(),
            version: "v1".into(),
            resource: "virtualmachines".into(),
        };
        Feeds {
            synced,
            stale: if stale {
                vec![crate::detect::Stale {
                    target,
                    reason: crate::detect::Blind::NotWatched("starting".into()),
                }]
            } else {
                Vec::new()
            },
            existence_unknown: existence_unknown.then(|| "not listed yet".to_owned()),
        }
    }

    #[test]
    fn clear_only_when_nothing_is_in_flight_and_every_fact_is_known() {
        let current = feeds(true, false, false);
        assert_eq!(judge(0, &current), Verdict::Clear);
        assert_eq!(judge(2, &current), Verdict::InFlight);
        for (synced, stale, existence, why) in [
            (false, false, false, Unknown::Stale),
            (true, true, false, Unknown::Stale),
            (false, false, true, Unknown::Stale),
            (true, false, true, Unknown::Existence),
            (true, true, true, Unknown::Stale),
        ] {
            let f = feeds(synced, stale, existence);
            for active in [0, 3] {
                assert_eq!(judge(active, &f), Verdict::Unknown(why), "{f:?}");
            }
        }
    }
}
