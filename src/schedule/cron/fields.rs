//! The five fields of a cron schedule (minute, hour, day of month, month, day of week) and the
//! search for the next time they match, as Kubernetes' cron library (`robfig/cron/v3`, which
//! kube-apiserver validates CronJobs with and kube-controller-manager runs them by) reads and
//! searches them — its quirks included, since a gate must announce the runs the controller
//! will start (`tests/cron_differential.rs` compares the two on thousands of schedules):
//!
//! - A field is a comma-separated list of `*` or `?` (every value), a value, a range `a-b`, each
//!   with an optional `/step`; `a/step` runs from `a` to the field's end. Months and days of the
//!   week also by name (`JAN`, `mon`); days of the week are 0–6 (Sunday 0; 7 is refused).
//! - A day matches when its day of month *and* its day of the week match if either field holds a
//!   `*` or `?` (anywhere in its list, a step of 1 included), else when either matches.
//! - The search steps field by field in the schedule's zone, in absolute time: on the day a zone
//!   springs forward a run in the skipped hour does not happen, on the day it falls back a run in
//!   the repeated hour happens twice, and a time built from fields that does not exist or exists
//!   twice is resolved as Go's `time.Date` resolves it. No run within five years of the year
//!   asked from is none.

use jiff::civil::{Date, DateTime};
use jiff::tz::{Offset, TimeZone};
use jiff::{SignedDuration, Timestamp, Zoned};

/// Set in a field's bits when it holds `*` or `?` (above every value's bit).
const STAR: u64 = 1 << 63;

/// One field's bounds and, for months and days of the week, its names (lowercase, from the
/// bound's value on).
struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

/// A field of numbers only.
const fn numbers(min: u32, max: u32) -> Bounds {
    Bounds {
        min,
        max,
        names: &[],
    }
}

const MINUTE: Bounds = numbers(0, 59);
const HOUR: Bounds = numbers(0, 23);
const DOM: Bounds = numbers(1, 31);
const MONTH: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// The values each field matches, one bit per value ([`STAR`] besides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Fields {
    minute: u64,
    hour: u64,
    dom: u64,
    month: u64,
    dow: u64,
}

/// Every value of `b`, and [`STAR`].
fn all(b: &Bounds) -> u64 {
    bits(b.min.into(), b.max.into(), 1) | STAR
}

/// The bits of `min` to `max` (at most 63) by `step` (any size: past `max`, `min` alone).
fn bits(min: u64, max: u64, step: u64) -> u64 {
    let step = usize::try_from(step).unwrap_or(usize::MAX);
    (min..=max).step_by(step).fold(0, |acc, v| acc | 1 << v)
}

impl Fields {
    /// `@yearly` and the other descriptors, as the library defines them (`@midnight` is
    /// `@daily`); `None` for a name it does not know.
    pub(super) fn descriptor(name: &str) -> Option<Fields> {
        let (minute, hour) = (1, 1);
        Some(match name {
            "@yearly" | "@annually" => Fields {
                minute,
                hour,
                dom: 1 << 1,
                month: 1 << 1,
                dow: all(&DOW),
            },
            "@monthly" => Fields {
                minute,
                hour,
                dom: 1 << 1,
                month: all(&MONTH),
                dow: all(&DOW),
            },
            "@weekly" => Fields {
                minute,
                hour,
                dom: all(&DOM),
                month: all(&MONTH),
                dow: 1,
            },
            "@daily" | "@midnight" => Fields {
                minute,
                hour,
                dom: all(&DOM),
                month: all(&MONTH),
                dow: all(&DOW),
            },
            "@hourly" => Fields {
                minute,
                hour: all(&HOUR),
                dom: all(&DOM),
                month: all(&MONTH),
                dow: all(&DOW),
            },
            _ => return None,
        })
    }

    /// Five fields separated by whitespace.
    pub(super) fn parse(text: &str) -> Result<Fields, String> {
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [minute, hour, dom, month, dow] = fields[..] else {
            return Err(format!("expected exactly 5 fields, found {}", fields.len()));
        };
        Ok(Fields {
            minute: field(minute, &MINUTE)?,
            hour: field(hour, &HOUR)?,
            dom: field(dom, &DOM)?,
            month: field(month, &MONTH)?,
            dow: field(dow, &DOW)?,
        })
    }

    /// Whether no time can match: a field that holds no value (`,` alone), or day fields that
    /// can match no day. Known without a search (which would step through five years).
    pub(super) fn never(&self) -> bool {
        let values = |bits: u64| bits & !STAR;
        let days = self.days(values(self.dom) != 0, values(self.dow) != 0);
        values(self.minute) == 0 || values(self.hour) == 0 || values(self.month) == 0 || !days
    }

    fn day_matches(&self, t: &Zoned) -> bool {
        let dom = self.dom & 1 << t.day() != 0;
        let dow = self.dow & 1 << t.weekday().to_sunday_zero_offset() != 0;
        self.days(dom, dow)
    }

    /// Whether the day fields match, given whether the day of month and the day of the week
    /// do: both where either field holds `*` or `?`, else either.
    fn days(&self, dom: bool, dow: bool) -> bool {
        if self.dom & STAR != 0 || self.dow & STAR != 0 {
            dom && dow
        } else {
            dom || dow
        }
    }

    /// The first time after `after` (to the second) that the fields match in `zone`; `None`
    /// when none does within five years of the year it starts from.
    pub(super) fn next_after(&self, after: Timestamp, zone: &TimeZone) -> Option<Timestamp> {
        // The next whole second.
        let start = Timestamp::from_second(after.as_second().checked_add(1)?).ok()?;
        let mut t = start.to_zoned(zone.clone());
        let year_limit = t.year() + 5;
        let mut added = false;
        'wrap: loop {
            if t.year() > year_limit {
                return None;
            }
            while self.month & 1 << t.month() == 0 {
                if !added {
                    added = true;
                    t = start_of(Unit::Month, &t)?;
                }
                t = add_months(zone, &t, 1)?;
                if t.month() == 1 {
                    continue 'wrap;
                }
            }
            while !self.day_matches(&t) {
                if !added {
                    added = true;
                    t = start_of(Unit::Day, &t)?;
                }
                t = add_days(zone, &t, 1)?;
                // Where the day does not begin at midnight (a zone that springs forward at
                // midnight), back to it or on to the next.
                let hour = i64::from(t.hour());
                if hour != 0 {
                    let by = if hour > 12 { 24 - hour } else { -hour };
                    t = add(&t, SignedDuration::from_hours(by))?;
                }
                if t.day() == 1 {
                    continue 'wrap;
                }
            }
            while self.hour & 1 << t.hour() == 0 {
                if !added {
                    added = true;
                    t = start_of(Unit::Hour, &t)?;
                }
                t = add(&t, SignedDuration::from_hours(1))?;
                if t.hour() == 0 {
                    continue 'wrap;
                }
            }
            while self.minute & 1 << t.minute() == 0 {
                if !added {
                    added = true;
                    t = truncate_to_minute(&t)?;
                }
                t = add(&t, SignedDuration::from_mins(1))?;
                if t.minute() == 0 {
                    continue 'wrap;
                }
            }
            // Seconds: the fields run at second 0.
            while t.second() != 0 {
                if !added {
                    added = true;
                }
                t = add(&t, SignedDuration::from_secs(1))?;
                if t.second() == 0 {
                    continue 'wrap;
                }
            }
            return Some(t.timestamp());
        }
    }
}

/// One field: a comma-separated list of ranges.
fn field(text: &str, b: &Bounds) -> Result<u64, String> {
    // Empty items are dropped (`0,,30` is `0,30`; `,` alone matches nothing).
    text.split(',')
        .filter(|range| !range.is_empty())
        .try_fold(0, |acc, range| Ok(acc | self::range(range, b)?))
}

/// `*`, `?`, `a` or `a-b`, with an optional `/step`.
fn range(text: &str, b: &Bounds) -> Result<u64, String> {
    let (span, step) = match text.split_once('/') {
        Some((span, step)) => (span, Some(step)),
        None => (text, None),
    };
    if step.is_some_and(|s| s.contains('/')) {
        return Err(format!("too many slashes: {text}"));
    }
    let (min, max) = (u64::from(b.min), u64::from(b.max));
    let parts: Vec<&str> = span.split('-').collect();
    let star = parts[0] == "*" || parts[0] == "?";
    let (start, mut end, mut extra) = if star {
        (min, max, STAR)
    } else {
        let start = value(parts[0], b)?;
        let end = match parts[..] {
            [_] => start,
            [_, high] => value(high, b)?,
            _ => return Err(format!("too many hyphens: {text}")),
        };
        (start, end, 0)
    };
    let step = match step {
        None => 1,
        Some(step) => {
            let step = number(step)?;
            // `a/step`: from a to the field's end.
            if parts.len() == 1 {
                end = max;
            }
            if step > 1 {
                extra = 0;
            }
            step
        }
    };
    if start < min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({min}): {text}"
        ));
    }
    if end > max {
        return Err(format!(
            "end of range ({end}) above maximum ({max}): {text}"
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {text}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {text}"));
    }
    Ok(bits(start, end, step) | extra)
}

/// A value of a field: a number, or a name the field has, in any case.
fn value(text: &str, b: &Bounds) -> Result<u64, String> {
    let lower = go_lowercase(text);
    match b.names.iter().position(|n| *n == lower) {
        Some(i) => Ok(u64::from(b.min) + i as u64),
        None => number(text),
    }
}

/// `text` lowercased as Go's `strings.ToLower` lowercases it, the way the library reads a name:
/// a character at a time, by Unicode's simple mapping, so the Turkish dotted capital `İ` is
/// `i` (`FRİ` is Friday there; its full lowercase is two characters, `i` and a combining dot).
fn go_lowercase(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{130}' => 'i',
            c => {
                let mut lower = c.to_lowercase();
                match (lower.next(), lower.next()) {
                    (Some(one), None) => one,
                    _ => c,
                }
            }
        })
        .collect()
}

/// A non-negative decimal number, as Go's `strconv.Atoi` reads one (a `+` allowed, at most
/// a 64-bit signed integer).
fn number(text: &str) -> Result<u64, String> {
    let digits = text.strip_prefix('+').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(format!("failed to parse int from {text}"));
    }
    digits
        .parse::<u64>()
        .ok()
        .filter(|n| i64::try_from(*n).is_ok())
        .ok_or_else(|| format!("{text} is out of range"))
}

fn add(t: &Zoned, by: SignedDuration) -> Option<Zoned> {
    t.timestamp()
        .checked_add(by)
        .ok()
        .map(|ts| ts.to_zoned(t.time_zone().clone()))
}

/// The start of `t`'s minute (Go's `Truncate(time.Minute)`: on absolute time).
fn truncate_to_minute(t: &Zoned) -> Option<Zoned> {
    let s = t.timestamp().as_second();
    Timestamp::from_second(s - s.rem_euclid(60))
        .ok()
        .map(|ts| ts.to_zoned(t.time_zone().clone()))
}

/// Go's `t.AddDate(0, months, 0)`: the same day and time `months` later, normalised.
fn add_months(zone: &TimeZone, t: &Zoned, months: i64) -> Option<Zoned> {
    let month = i64::from(t.month()) + months;
    go_date_time(
        zone,
        i64::from(t.year()),
        month,
        t.day().into(),
        (t.hour().into(), t.minute().into(), t.second().into()),
    )
}

/// Go's `t.AddDate(0, 0, days)`.
fn add_days(zone: &TimeZone, t: &Zoned, days: i64) -> Option<Zoned> {
    go_date_time(
        zone,
        t.year().into(),
        t.month().into(),
        i64::from(t.day()) + days,
        (t.hour().into(), t.minute().into(), t.second().into()),
    )
}

/// What [`start_of`] starts.
enum Unit {
    Month,
    Day,
    Hour,
}

/// The start of `t`'s month, day or hour in its zone, built as Go's `time.Date` builds it.
fn start_of(unit: Unit, t: &Zoned) -> Option<Zoned> {
    let (year, month) = (t.year().into(), t.month().into());
    let (day, hour) = match unit {
        Unit::Month => (1, 0),
        Unit::Day => (t.day().into(), 0),
        Unit::Hour => (t.day().into(), t.hour().into()),
    };
    go_date_time(t.time_zone(), year, month, day, (hour, 0, 0))
}

/// Go's `time.Date`: a month or day out of range carries into the next (or previous) year or
/// month; a local time the zone skips or repeats takes the offset Go takes — the one in effect
/// at that local time read as UTC, unless the instant it gives lies outside that offset's
/// period, then the offset in effect at that instant.
fn go_date_time(
    zone: &TimeZone,
    year: i64,
    month: i64,
    day: i64,
    (hour, minute, second): (i64, i64, i64),
) -> Option<Zoned> {
    let months = month - 1;
    let year = i16::try_from(year + months.div_euclid(12)).ok()?;
    let month = i8::try_from(months.rem_euclid(12) + 1).ok()?;
    let date = Date::new(year, month, 1)
        .ok()?
        .checked_add(jiff::Span::new().days(day - 1))
        .ok()?;
    let local = DateTime::from_parts(date, jiff::civil::Time::midnight())
        .checked_add(SignedDuration::from_secs(
            hour * 3600 + minute * 60 + second,
        ))
        .ok()?;
    // The local time's seconds read as a UTC instant.
    let unix = local.to_zoned(TimeZone::UTC).ok()?.timestamp().as_second();
    let offset =
        |at: i64| -> Option<Offset> { Some(zone.to_offset(Timestamp::from_second(at).ok()?)) };
    let mut off = offset(unix)?;
    let utc = unix - i64::from(off.seconds());
    let at_utc = offset(utc)?;
    if at_utc != off {
        off = at_utc;
    }
    Timestamp::from_second(unix - i64::from(off.seconds()))
        .ok()
        .map(|ts| ts.to_zoned(zone.clone()))
}
