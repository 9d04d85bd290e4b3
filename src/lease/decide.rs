//! The rule for one look at the Lease: take it, renew it, or wait.

use std::time::Duration;

use tokio::time::Instant;

/// What this replica last saw of the Lease and when, by its own clock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Observation {
    /// `spec.holderIdentity`; `None` or empty when released.
    pub holder: Option<String>,
    /// `metadata.resourceVersion`: it changes with every renewal.
    pub resource_version: Option<String>,
    /// `spec.leaseDurationSeconds` as the holder wrote it.
    pub duration: Duration,
    /// The pod a leader released the Lease to (its handover to a newer replica), if it named
    /// one: the others leave it to that pod for a lease duration.
    pub successor: Option<String>,
    /// When this replica first saw the Lease in this state.
    pub seen_at: Instant,
}

impl Observation {
    /// The same Lease seen again at `now`: keeps the earlier `seen_at` unless it changed.
    pub(super) fn update(
        previous: Option<&Observation>,
        holder: Option<String>,
        resource_version: Option<String>,
        duration: Duration,
        successor: Option<String>,
        now: Instant,
    ) -> Observation {
        let unchanged =
            previous.is_some_and(|p| p.holder == holder && p.resource_version == resource_version);
        Observation {
            seen_at: if unchanged {
                previous.map_or(now, |p| p.seen_at)
            } else {
                now
            },
            holder,
            resource_version,
            duration,
            successor,
        }
    }
}

/// What to do after looking at the Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum LeaseStep {
    /// Nobody holds it, the holder has not renewed for a whole lease duration, or the holder is
    /// proven gone: take it.
    Take,
    /// We hold it: renew.
    Renew,
    /// Another replica holds it and renewed recently.
    Wait {
        /// Its identity.
        holder: String,
    },
}

/// The rule of client-go's leader election: a lease is free when released or when nobody
/// renewed it for its duration as measured from when *we* saw its last change; and, before
/// that, when `holder_gone` (kubelet reported the holder's process ended: see `proof`). A lease
/// released to a successor (`me_pod` is this replica's pod) is its successor's alone until a
/// lease duration after we saw the release.
pub(super) fn decide(
    me: &str,
    me_pod: Option<&str>,
    seen: &Observation,
    holder_gone: bool,
    now: Instant,
) -> LeaseStep {
    match seen.holder.as_deref() {
        None | Some("") => match seen.successor.as_deref() {
            Some(successor)
                if Some(successor) != me_pod
                    && now.duration_since(seen.seen_at) < seen.duration =>
            {
                LeaseStep::Wait {
                    holder: format!("{successor} (handed over to)"),
                }
            }
            _ => LeaseStep::Take,
        },
        Some(holder) if holder == me => LeaseStep::Renew,
        Some(holder) => {
            if holder_gone || now.duration_since(seen.seen_at) >= seen.duration {
                LeaseStep::Take
            } else {
                LeaseStep::Wait {
                    holder: holder.to_owned(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn seen(holder: Option<&str>, rv: &str, at: Instant) -> Observation {
        Observation {
            holder: holder.map(str::to_owned),
            resource_version: Some(rv.to_owned()),
            duration: LEASE,
            successor: None,
            seen_at: at,
        }
    }

    /// Holder b's lease seen again at `at`, at resourceVersion `rv`.
    fn b_again(previous: &Observation, rv: &str, at: Instant) -> Observation {
        Observation::update(
            Some(previous),
            Some("b".into()),
            Some(rv.into()),
            LEASE,
            None,
            at,
        )
    }

    #[test]
    fn what_is_done_with_a_lease_just_seen() {
        let wait = LeaseStep::Wait { holder: "b".into() };
        // (why, holder, whether the holder is proven gone, the decision)
        let cases = [
            ("released", None, false, LeaseStep::Take),
            ("no holder", Some(""), false, LeaseStep::Take),
            ("ours", Some("a"), false, LeaseStep::Renew),
            ("ours, proven gone", Some("a"), true, LeaseStep::Renew),
            ("theirs", Some("b"), false, wait),
            ("theirs, proven gone", Some("b"), true, LeaseStep::Take),
        ];
        let now = Instant::now();
        for (why, holder, gone, expected) in cases {
            let observed = seen(holder, "1", now);
            assert_eq!(decide("a", None, &observed, gone, now), expected, "{why}");
        }
    }

    #[test]
    fn another_holder_is_respected_until_it_stops_renewing_for_a_lease_duration() {
        let start = Instant::now();
        let first = seen(Some("b"), "1", start);
        let wait = LeaseStep::Wait { holder: "b".into() };
        assert_eq!(decide("a", None, &first, false, start + LEASE / 2), wait);
        // It renews (a new resourceVersion): the clock starts again from when we saw that.
        let renewed = b_again(&first, "2", start + LEASE / 2);
        assert_eq!(decide("a", None, &renewed, false, start + LEASE), wait);
        // It stops renewing: the same state seen again keeps its first sighting.
        let stale = b_again(&renewed, "2", start + LEASE);
        assert_eq!(stale.seen_at, start + LEASE / 2);
        assert_eq!(
            decide("a", None, &stale, false, start + LEASE / 2 + LEASE),
            LeaseStep::Take
        );
    }

    /// A Lease released to a successor is the successor's: the others wait a lease duration
    /// (from when they saw the release) before they take it, the successor takes it at once.
    #[test]
    fn a_lease_handed_over_is_the_successors_for_a_lease_duration() {
        let start = Instant::now();
        let released = Observation {
            successor: Some("pod-new".into()),
            ..seen(None, "5", start)
        };
        assert_eq!(
            decide("pod-new_x", Some("pod-new"), &released, false, start),
            LeaseStep::Take
        );
        let wait = LeaseStep::Wait {
            holder: "pod-new (handed over to)".into(),
        };
        assert_eq!(
            decide("pod-old_y", Some("pod-old"), &released, false, start),
            wait
        );
        assert_eq!(decide("z", None, &released, false, start + LEASE / 2), wait);
        assert_eq!(
            decide(
                "pod-old_y",
                Some("pod-old"),
                &released,
                false,
                start + LEASE
            ),
            LeaseStep::Take
        );
    }

    #[test]
    fn the_holders_own_timestamps_play_no_part() {
        // A holder whose clock runs hours behind renews all the same: only our sightings count.
        let start = Instant::now();
        let first = seen(Some("b"), "7", start);
        let later = b_again(&first, "8", start + LEASE * 3);
        let then = start + LEASE * 3 + Duration::from_secs(1);
        let wait = LeaseStep::Wait { holder: "b".into() };
        assert_eq!(decide("a", None, &later, false, then), wait);
    }
}
