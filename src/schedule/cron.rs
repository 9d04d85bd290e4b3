//! Cron schedules as Kubernetes CronJobs (and Velero Schedules, through the same Go library)
//! read them: five fields (minute, hour, day of month, month, day of week) or `@yearly`,
//! `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`; a day of month and a day of week
//! both restricted match either (as Vixie cron); `N/step` is `N-<end>/step`; `?` is `*`; a
//! `CRON_TZ=<zone>` or `TZ=<zone>` prefix names the time zone, else the one given beside (a
//! CronJob's `spec.timeZone`), else UTC. `@every <duration>`, which the same Go library takes,
//! is not read (an error naming the object: nothing is announced).
//!
//! Times are found in the time zone, so a daily run at 02:30 skips the day its zone springs
//! past 02:30 and runs once on the day it falls back (croner follows Vixie cron there).

use croner::Cron;
use croner::parser::{CronParser, Seconds};
use jiff::Timestamp;
use jiff::tz::TimeZone;

/// Longest schedule text read: a CronJob's is a short line.
const MAX_LEN: usize = 256;

/// A parsed schedule in its time zone.
#[derive(Debug, Clone)]
pub struct CronSchedule {
    /// The text it was read from.
    text: String,
    cron: Cron,
    zone: TimeZone,
    /// The time zone's name, as given (`UTC` when none was).
    zone_name: String,
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
}

impl CronSchedule {
    /// `schedule` in `time_zone` (an IANA name; empty: UTC, unless the schedule names one).
    pub fn parse(schedule: &str, time_zone: &str) -> Result<CronSchedule, CronError> {
        let bad = |reason: &str| CronError::Schedule {
            schedule: schedule.chars().take(64).collect(),
            reason: reason.to_owned(),
        };
        if schedule.len() > MAX_LEN {
            return Err(bad("longer than 256 bytes"));
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
        // `N/step` is N to the field's end by step, as Kubernetes' cron library reads it.
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .sloppy_ranges(true)
            .build()
            .parse(fields)
            .map_err(|e| bad(&e.to_string()))?;
        Ok(CronSchedule {
            text: fields.to_owned(),
            cron,
            zone,
            zone_name: zone_name.to_owned(),
        })
    }

    /// The first time the schedule fires after `after`, if it ever does (`0 0 30 2 *` never
    /// does).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        let from = after.to_zoned(self.zone.clone());
        self.cron
            .find_next_occurrence(&from, false)
            .ok()
            .map(|z| z.timestamp())
    }

    /// Whether `other` is the same schedule in the same time zone.
    pub fn same_as(&self, other: &CronSchedule) -> bool {
        self.text == other.text && self.zone_name == other.zone_name
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
            let next = CronSchedule::parse(schedule, zone)
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
            let e = CronSchedule::parse(schedule, zone).unwrap_err();
            assert!(matches!(e, CronError::Schedule { .. }), "{schedule}: {e}");
        }
        assert_eq!(
            CronSchedule::parse("* * * * *", "Mars/Olympus").unwrap_err(),
            CronError::TimeZone("Mars/Olympus".into())
        );
        assert!(CronSchedule::parse(&"1".repeat(300), "").is_err());
    }
}
