//! Durations: settings written as Go components write theirs, and human-readable ages for
//! Table `date` columns, as apimachinery `duration.HumanDuration`.
//!
//! kubectl prints Table cells verbatim, so the AGE column must be rendered by the server the
//! way native resources render it (`45s`, `5m30s`, `3h10m`, `2d3h`, `1y20d`), or `kubectl get`
//! output for this resource would look different from every other resource.

use jiff::{SignedDuration, Timestamp};

/// A non-negative duration of a setting, written as Go components write theirs (`30s`, `2m`,
/// `1h30m`) or as bare seconds (`30`).
pub fn parse_duration(s: &str) -> Result<SignedDuration, String> {
    let s = s.trim();
    let d = if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse::<i64>()
            .map(SignedDuration::from_secs)
            .map_err(|e| e.to_string())?
    } else {
        s.parse::<SignedDuration>().map_err(|_| {
            format!("{s:?} is not a duration (examples: 30s, 2m, 1h30m, or seconds as a number)")
        })?
    };
    if d.is_negative() {
        return Err(format!("{s:?} is negative"));
    }
    Ok(d)
}

/// Go's `time.Duration` is an `int64` of nanoseconds and `time.Since` saturates at its bounds;
/// clamping keeps the result identical for absurd timestamps (e.g. `292y`).
const GO_DURATION_MAX_SECS: i64 = i64::MAX / 1_000_000_000;

/// Formats a duration with ~2–3 significant figures, exactly as `duration.HumanDuration`:
///
/// | range | format |
/// |---|---|
/// | < -1s | `<invalid>` (clock skew beyond tolerance) |
/// | [-1s, 0s) | `0s` |
/// | < 2m | `Ns` |
/// | < 10m | `NmSs` (`Nm` when S = 0) |
/// | < 3h | `Nm` |
/// | < 8h | `NhMm` (`Nh` when M = 0) |
/// | < 48h | `Nh` |
/// | < 8d | `NdHh` (`Nd` when H = 0) |
/// | < 2y | `Nd` |
/// | < 8y | `NyDd` (`Ny` when D = 0), a year being 365 days |
/// | otherwise | `Ny` |
///
/// Every unit is truncated, never rounded.
pub fn human_duration(d: SignedDuration) -> String {
    // Truncation toward zero, as Go's `int(d.Seconds())`.
    let seconds = d
        .as_secs()
        .clamp(-GO_DURATION_MAX_SECS, GO_DURATION_MAX_SECS);
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return two_units(minutes, "m", seconds % 60, "s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return two_units(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return two_units(hours / 24, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return two_units(hours / 24 / 365, "y", (hours / 24) % 365, "d");
    }
    format!("{}y", hours / 24 / 365)
}

/// `n` of `unit`, then `rest` of `rest_unit` unless it is 0 (`9m`, `9m30s`).
fn two_units(n: i64, unit: &str, rest: i64, rest_unit: &str) -> String {
    if rest == 0 {
        format!("{n}{unit}")
    } else {
        format!("{n}{unit}{rest}{rest_unit}")
    }
}

/// The AGE cell for an object created at `created`, seen at `now`; `<unknown>` when there is no
/// creation time (kubectl printers' `translateTimestampSince`).
pub fn table_age(created: Option<Timestamp>, now: Timestamp) -> String {
    match created {
        None => "<unknown>".to_owned(),
        Some(created) => human_duration(now.duration_since(created)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i64) -> String {
        human_duration(SignedDuration::from_secs(s))
    }

    #[test]
    fn seconds_and_skew() {
        assert_eq!(secs(0), "0s");
        assert_eq!(human_duration(SignedDuration::from_millis(999)), "0s");
        assert_eq!(secs(1), "1s");
        assert_eq!(secs(45), "45s");
        assert_eq!(secs(119), "119s");
        assert_eq!(human_duration(SignedDuration::from_millis(-500)), "0s");
        assert_eq!(secs(-1), "0s");
        assert_eq!(human_duration(SignedDuration::from_millis(-1999)), "0s");
        assert_eq!(secs(-2), "<invalid>");
        assert_eq!(secs(-3600), "<invalid>");
    }

    #[test]
    fn minutes() {
        assert_eq!(secs(120), "2m");
        assert_eq!(secs(121), "2m1s");
        assert_eq!(secs(5 * 60 + 30), "5m30s");
        assert_eq!(secs(9 * 60 + 59), "9m59s");
        assert_eq!(secs(10 * 60), "10m");
        assert_eq!(secs(10 * 60 + 59), "10m");
        assert_eq!(secs(3 * 3600 - 1), "179m");
    }

    #[test]
    fn hours() {
        assert_eq!(secs(3 * 3600), "3h");
        assert_eq!(secs(3 * 3600 + 60), "3h1m");
        assert_eq!(secs(3 * 3600 + 59), "3h");
        assert_eq!(secs(7 * 3600 + 59 * 60 + 59), "7h59m");
        assert_eq!(secs(8 * 3600), "8h");
        assert_eq!(secs(8 * 3600 + 60), "8h");
        assert_eq!(secs(48 * 3600 - 1), "47h");
    }

    #[test]
    fn days() {
        let day = 24 * 3600;
        assert_eq!(secs(2 * day), "2d");
        assert_eq!(secs(2 * day + 3 * 3600), "2d3h");
        assert_eq!(secs(8 * day - 1), "7d23h");
        assert_eq!(secs(8 * day), "8d");
        assert_eq!(secs(8 * day + 23 * 3600), "8d");
        assert_eq!(secs(2 * 365 * day - 1), "729d");
    }

    #[test]
    fn years() {
        let day = 24 * 3600;
        assert_eq!(secs(2 * 365 * day), "2y");
        assert_eq!(secs(2 * 365 * day + day), "2y1d");
        assert_eq!(secs(8 * 365 * day - 1), "7y364d");
        assert_eq!(secs(8 * 365 * day), "8y");
        assert_eq!(secs(100 * 365 * day + 200 * day), "100y");
        // Go's Duration saturates at ~292 years.
        assert_eq!(secs(1000 * 365 * day), "292y");
        assert_eq!(human_duration(SignedDuration::MAX), "292y");
        assert_eq!(human_duration(SignedDuration::MIN), "<invalid>");
    }

    #[test]
    fn table_ages() {
        let now: Timestamp = "2026-07-24T10:35:30Z".parse().unwrap();
        let created: Timestamp = "2026-07-24T10:30:00Z".parse().unwrap();
        assert_eq!(table_age(Some(created), now), "5m30s");
        assert_eq!(table_age(None, now), "<unknown>");
        assert_eq!(table_age(Some(now), now), "0s");
        // Created slightly in the future (replica clock skew) is tolerated up to 1s.
        let future: Timestamp = "2026-07-24T10:35:31Z".parse().unwrap();
        assert_eq!(table_age(Some(future), now), "0s");
        let far_future: Timestamp = "2026-07-24T10:35:33Z".parse().unwrap();
        assert_eq!(table_age(Some(far_future), now), "<invalid>");
    }

    #[test]
    fn durations_accept_units_and_bare_seconds_and_reject_garbage() {
        assert_eq!(parse_duration("30s"), Ok(SignedDuration::from_secs(30)));
        assert_eq!(parse_duration("2m"), Ok(SignedDuration::from_secs(120)));
        assert_eq!(parse_duration("1h30m"), Ok(SignedDuration::from_secs(5400)));
        assert_eq!(parse_duration("45"), Ok(SignedDuration::from_secs(45)));
        assert_eq!(parse_duration("0"), Ok(SignedDuration::ZERO));
        assert!(
            parse_duration("soon")
                .unwrap_err()
                .contains("not a duration")
        );
        assert!(parse_duration("-5s").is_err());
        assert!(parse_duration("").is_err());
        assert_eq!(
            parse_duration("100ms"),
            Ok(SignedDuration::from_millis(100))
        );
    }
}
