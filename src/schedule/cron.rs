//! Cron schedules as Kubernetes CronJobs (and Velero Schedules, through the same Go library)
//! read them: five fields (minute, hour, day of month, month, day of week) or `@yearly`,
//! `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`; a day of month and a day of week
//! both restricted match either (as Vixie cron); `N/step` is `N-<end>/step`; `?` is `*`; a
//! `CRON_TZ=<zone>` or `TZ=<zone>` prefix names the time zone, else the one given beside (a
//! CronJob's `spec.timeZone`), else UTC. `@every <duration>` runs that long after the last
//! run (whole seconds, at least one), so it needs when that was: a CronJob's
//! `status.lastScheduleTime` or a Velero Schedule's `status.lastBackup`, else the object's
//! creation, as their controllers count; without it, it is an error naming the object.
//!
//! The fields are read and searched as that library does (see [`fields`]): a daily run at 02:30
//! does not run the day its zone springs past 02:30 and runs twice the day it falls back.

mod fields;

use fields::Fields;
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};

/// Longest schedule text read. kube-apiserver bounds a CronJob's schedule by nothing but the
/// object's size; reading one is linear in its length, so this only keeps a pathological text
/// from being copied around.
const MAX_LEN: usize = 64 << 10;

/// A parsed schedule in its time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    /// The text it was read from.
    text: String,
    times: Times,
    zone: TimeZone,
    /// The time zone's name, as given (`UTC` when none was).
    zone_name: String,
}

/// When a schedule fires.
#[derive(Debug, Clone)]
enum Times {
    /// At the times its fields match, in its zone.
    Fields(Fields),
    /// Fields that no date matches (`0 0 30 2 *`): it never fires. Found once, when read, so
    /// that no question about its next run searches the centuries again.
    Never,
    /// `every` after `from` (whole seconds), and every `every` after that.
    Every {
        every: SignedDuration,
        from: Timestamp,
    },
}

/// Why a schedule cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CronError {
    /// The text is not a cron schedule.
    #[error("{schedule:?} is not a cron schedule: {reason}")]
    Schedule {
        /// The text (shortened).
        schedule: String,
        /// What the parser said.
        reason: String,
    },
    /// The time zone is not one the time zone database has.
    #[error("{0:?} is not a time zone (an IANA name such as Europe/Berlin)")]
    TimeZone(String),
    /// An `@every` schedule, and no time its runs are counted from.
    #[error(
        "{0:?} runs that long after the last run, and the rule's schedule.from says of no last run"
    )]
    EveryWithoutFrom(String),
}

impl CronSchedule {
    /// `schedule` in `time_zone` (an IANA name; empty: UTC, unless the schedule names one);
    /// an `@every` schedule's runs counted from `from`.
    pub fn parse(
        schedule: &str,
        time_zone: &str,
        from: Option<Timestamp>,
    ) -> Result<CronSchedule, CronError> {
        let bad = |reason: &str| CronError::Schedule {
            schedule: schedule.chars().take(64).collect(),
            reason: reason.to_owned(),
        };
        if schedule.len() > MAX_LEN {
            return Err(bad("longer than 64 KiB"));
        }
        let text = schedule.trim();
        let (zone_name, fields) = match text
            .strip_prefix("CRON_TZ=")
            .or_else(|| text.strip_prefix("TZ="))
        {
            Some(rest) => rest
                .split_once(char::is_whitespace)
                .map(|(zone, fields)| (zone, fields.trim()))
                .ok_or_else(|| bad("a time zone prefix and no fields"))?,
            None => (time_zone.trim(), text),
        };
        let zone_name = if zone_name.is_empty() {
            "UTC"
        } else {
            zone_name
        };
        let zone = jiff::tz::db()
            .get(zone_name)
            .map_err(|_| CronError::TimeZone(zone_name.chars().take(64).collect()))?;
        let times = match fields.strip_prefix("@every ") {
            Some(every) => {
                let every: SignedDuration = every
                    .trim()
                    .parse()
                    .map_err(|_| bad("@every takes a duration such as 90m or 1h30m"))?;
                if every.is_negative() {
                    return Err(bad("@every takes a positive duration"));
                }
                let from = from.ok_or_else(|| {
                    CronError::EveryWithoutFrom(fields.chars().take(64).collect())
                })?;
                // As Kubernetes' cron library: whole seconds, at least one, after a whole
                // second.
                Times::Every {
                    every: SignedDuration::from_secs(every.as_secs().max(1)),
                    from: Timestamp::from_second(from.as_second())
                        .map_err(|_| bad("its runs are counted from an unreadable time"))?,
                }
            }
            None => {
                let fields = match Fields::descriptor(fields) {
                    Some(fields) => fields,
                    None if fields.starts_with('@') => {
                        return Err(bad("not a descriptor Kubernetes knows"));
                    }
                    None => Fields::parse(fields).map_err(|e| bad(&e))?,
                };
                // Dates repeat: fields that match none within five years from now match none
                // from any time.
                if fields.never() || fields.next_after(Timestamp::now(), &zone).is_none() {
                    Times::Never
                } else {
                    Times::Fields(fields)
                }
            }
        };
        Ok(CronSchedule {
            text: fields.to_owned(),
            times,
            zone,
            zone_name: zone_name.to_owned(),
        })
    }

    /// The first time the schedule fires after `after`, if it ever does (`0 0 30 2 *` never
    /// does).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.times {
            Times::Fields(fields) => fields.next_after(after, &self.zone),
            Times::Never => None,
            Times::Every { every, from } => {
                // The first run after `after`: `from` plus a whole number (at least one) of
                // `every`s, in seconds (both are whole).
                let (every, from) = (every.as_secs(), from.as_second());
                let runs = after.as_second().saturating_sub(from).max(0) / every + 1;
                let next = runs.checked_mul(every)?.checked_add(from)?;
                Timestamp::from_second(next).ok()
            }
        }
    }

    /// Whether `other` is the same schedule in the same time zone, counted from the same time.
    pub fn same_as(&self, other: &CronSchedule) -> bool {
        self.text == other.text
            && self.zone_name == other.zone_name
            && self.counted_from() == other.counted_from()
    }

    /// When an `@every` schedule's runs are counted from (its last run, to the second); `None`
    /// for a schedule of fields.
    pub fn counted_from(&self) -> Option<Timestamp> {
        match self.times {
            Times::Every { from, .. } => Some(from),
            Times::Fields(_) | Times::Never => None,
        }
    }

    /// The schedule's fields, as given (without a time zone prefix).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The time zone it is read in.
    pub fn zone_name(&self) -> &str {
        &self.zone_name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// Each schedule in its zone, the time after which its next start is asked, and that start.
    fn assert_next(cases: &[(&str, &str, &str, &str)]) {
        for (schedule, zone, after, want) in cases {
            let next = CronSchedule::parse(schedule, zone, None)
                .unwrap()
                .next_after(t(after))
                .map(|t| t.to_string());
            assert_eq!(
                next.as_deref(),
                Some(*want),
                "{schedule} in {zone:?} after {after}"
            );
        }
    }

    #[test]
    fn five_fields_in_utc_by_default() {
        assert_next(&[
            (
                "*/2 * * * *",
                "",
                "2026-11-26T08:01:30Z",
                "2026-11-26T08:02:00Z",
            ),
            // Strictly after: a run due now is the one after.
            (
                "*/2 * * * *",
                "",
                "2026-11-26T08:02:00Z",
                "2026-11-26T08:04:00Z",
            ),
            (
                "@hourly",
                "",
                "2026-11-26T08:02:00Z",
                "2026-11-26T09:00:00Z",
            ),
            (
                "0 0 ? * *",
                "",
                "2026-11-26T08:04:00Z",
                "2026-11-27T00:00:00Z",
            ),
            // From minute 3 on, every 5 minutes.
            (
                "3/5 * * * *",
                "",
                "2026-11-26T08:04:00Z",
                "2026-11-26T08:08:00Z",
            ),
        ]);
    }

    #[test]
    fn read_in_its_time_zone() {
        assert_next(&[
            // 09:00 in Kolkata (UTC+05:30) is 03:30 UTC.
            (
                "0 9 * * *",
                "Asia/Kolkata",
                "2026-11-26T08:00:00Z",
                "2026-11-27T03:30:00Z",
            ),
            // The prefix names it too, and wins.
            (
                "CRON_TZ=Asia/Kolkata 0 9 * * *",
                "Europe/Berlin",
                "2026-11-26T08:00:00Z",
                "2026-11-27T03:30:00Z",
            ),
            // Across a change of offset: 02:30 Berlin the day after summer time begins is 00:30
            // UTC.
            (
                "30 2 * * *",
                "Europe/Berlin",
                "2026-03-29T12:00:00Z",
                "2026-03-30T00:30:00Z",
            ),
        ]);
    }

    /// As kube-controller-manager: no run the day the zone skips the hour, two the day it
    /// repeats it (Europe/Berlin, 2026-03-29 and 2026-10-25).
    #[test]
    fn a_run_in_the_hour_a_zone_skips_or_repeats_happens_as_kubernetes_runs_it() {
        let runs = |after: &str, n: usize| {
            let s = CronSchedule::parse("30 2 * * *", "Europe/Berlin", None).unwrap();
            let mut at = t(after);
            (0..n)
                .map(|_| {
                    at = s.next_after(at).unwrap();
                    at.to_string()
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            runs("2026-03-28T12:00:00Z", 2),
            ["2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z"]
        );
        assert_eq!(
            runs("2026-10-24T12:00:00Z", 3),
            [
                "2026-10-25T00:30:00Z",
                "2026-10-25T01:30:00Z",
                "2026-10-26T01:30:00Z"
            ]
        );
    }

    #[test]
    fn day_of_month_or_day_of_week() {
        // The 1st or a Monday, as Vixie cron: 2026-11-30 is a Monday, before December 1st.
        assert_next(&[(
            "0 0 1 * MON",
            "",
            "2026-11-26T00:00:00Z",
            "2026-11-30T00:00:00Z",
        )]);
    }

    #[test]
    fn what_is_not_a_schedule_says_why() {
        for (schedule, zone) in [
            ("every minute", ""),
            ("* * * * * *", ""),
            ("61 * * * *", ""),
            ("TZ=Europe/Berlin", ""),
        ] {
            let e = CronSchedule::parse(schedule, zone, None).unwrap_err();
            assert!(matches!(e, CronError::Schedule { .. }), "{schedule}: {e}");
        }
        assert_eq!(
            CronSchedule::parse("* * * * *", "Mars/Olympus", None).unwrap_err(),
            CronError::TimeZone("Mars/Olympus".into())
        );
        assert!(CronSchedule::parse(&"1".repeat(300), "", None).is_err());
        assert!(CronSchedule::parse(&"1".repeat(65 << 10), "", None).is_err());
    }

    /// `@midnight`, which Kubernetes' cron library reads as `@daily`.
    #[test]
    fn midnight_is_daily() {
        assert_next(&[
            (
                "@midnight",
                "",
                "2026-11-26T08:02:00Z",
                "2026-11-27T00:00:00Z",
            ),
            (
                "CRON_TZ=Asia/Kolkata @midnight",
                "",
                "2026-11-26T08:02:00Z",
                "2026-11-26T18:30:00Z",
            ),
        ]);
    }

    /// A schedule longer than 256 bytes, which kube-apiserver takes, is read: every minute,
    /// hour and day of the month listed one by one.
    #[test]
    fn a_long_schedule_is_read() {
        let list = |values: std::ops::RangeInclusive<u32>| {
            values.map(|v| v.to_string()).collect::<Vec<_>>().join(",")
        };
        let schedule = format!("{} {} {} * *", list(0..=59), list(0..=23), list(1..=31));
        assert!(schedule.len() > 256, "{}", schedule.len());
        assert_next(&[(
            &schedule,
            "",
            "2026-11-26T08:02:00Z",
            "2026-11-26T08:03:00Z",
        )]);
    }

    /// One that never fires is found so when it is read: asking for its next run searches
    /// nothing. One that fires once in four years is not taken for it.
    #[test]
    fn a_schedule_that_never_fires_is_known_when_read() {
        let never = CronSchedule::parse("0 0 30 2 *", "", None).unwrap();
        assert!(matches!(never.times, Times::Never), "{never:?}");
        assert_eq!(never.next_after(t("2026-11-26T08:00:00Z")), None);
        let leap = CronSchedule::parse("0 0 29 2 *", "", None).unwrap();
        assert!(matches!(leap.times, Times::Fields(_)), "{leap:?}");
        assert_eq!(
            leap.next_after(t("2026-11-26T08:00:00Z")),
            Some(t("2028-02-29T00:00:00Z"))
        );
    }

    #[test]
    fn every_runs_that_long_after_the_last_run() {
        let at = |from: &str, after: &str| {
            CronSchedule::parse("@every 1h30m", "", Some(t(from)))
                .unwrap()
                .next_after(t(after))
                .map(|t| t.to_string())
        };
        // The first run after the last, then every 90 minutes from it; strictly after.
        let cases = [
            (
                "2026-11-26T08:00:00Z",
                "2026-11-26T08:10:00Z",
                "2026-11-26T09:30:00Z",
            ),
            (
                "2026-11-26T08:00:00Z",
                "2026-11-26T09:30:00Z",
                "2026-11-26T11:00:00Z",
            ),
            (
                "2026-11-26T08:00:00Z",
                "2026-11-26T12:00:00Z",
                "2026-11-26T12:30:00Z",
            ),
            // Counted from the last run's whole second; a last run ahead of the clock counts.
            (
                "2026-11-26T08:00:00.7Z",
                "2026-11-26T08:00:00Z",
                "2026-11-26T09:30:00Z",
            ),
            (
                "2026-11-26T10:00:00Z",
                "2026-11-26T08:00:00Z",
                "2026-11-26T11:30:00Z",
            ),
        ];
        for (from, after, want) in cases {
            assert_eq!(
                at(from, after).as_deref(),
                Some(want),
                "from {from} after {after}"
            );
        }
        // Less than a second is one second; the zone changes nothing; `from` tells two apart.
        let from = Some(t("2026-11-26T08:00:00Z"));
        let short = CronSchedule::parse("TZ=Asia/Kolkata @every 200ms", "", from).unwrap();
        assert_eq!(
            short.next_after(t("2026-11-26T08:00:00Z")),
            Some(t("2026-11-26T08:00:01Z"))
        );
        let later = CronSchedule::parse("@every 200ms", "", Some(t("2026-11-26T09:00:00Z")));
        assert!(!short.same_as(&later.unwrap()));
        // Without a last run it cannot be read; nor without a duration.
        assert_eq!(
            CronSchedule::parse("@every 24h", "", None).unwrap_err(),
            CronError::EveryWithoutFrom("@every 24h".into())
        );
        // A last run long ago still has a next run; past the last time there is none.
        let every_second = CronSchedule::parse("@every 1s", "", Some(t("1900-01-01T00:00:00Z")));
        assert_eq!(
            every_second
                .unwrap()
                .next_after(t("2026-11-26T08:00:00.5Z")),
            Some(t("2026-11-26T08:00:01Z"))
        );
        let far = CronSchedule::parse("@every 20000000h", "", Some(t("9000-01-01T00:00:00Z")));
        assert_eq!(far.unwrap().next_after(t("2026-11-26T08:00:00Z")), None);
        for bad in ["@every", "@every tomorrow", "@every -1h"] {
            assert!(
                matches!(
                    CronSchedule::parse(bad, "", from),
                    Err(CronError::Schedule { .. })
                ),
                "{bad}"
            );
        }
    }
}
