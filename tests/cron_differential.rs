//! Cron read exactly as Kubernetes reads it: for a corpus of (schedule, time zone, start)
//! triples, the next runs our reader finds are the ones kube-controller-manager's cron library
//! finds (`github.com/robfig/cron/v3` at the version Kubernetes pins, built from the Go module
//! proxy by `tests/cron/`: Go is a prerequisite of the test command, as for the control plane).
//!
//! The corpus: every form kube-apiserver's validation accepts (descriptors, `@every`, lists,
//! ranges, steps, names, `?`, `CRON_TZ=`/`TZ=` prefixes, a day of month beside a day of week),
//! in zones with daylight saving time (Europe/Berlin, America/New_York, Australia/Lord_Howe's
//! half hour), one that abolished it (America/Sao_Paulo) and UTC, from starts around both DST
//! days of 2026 and 2027, and thousands of random valid schedules from random starts. Only
//! schedules the library reads are compared (kube-apiserver refuses the others); on those, ours
//! must read them too and give the same runs.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use ifo::schedule::cron::CronSchedule;
use jiff::Timestamp;

/// Runs compared per triple.
const RUNS: usize = 5;

/// The reference program, built once into the target directory.
fn reference() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let binary = target.join("cron-reference");
    let status = Command::new("go")
        // No version-control stamp: the checkout's owner may not be the test's user.
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&binary)
        .arg(".")
        .current_dir(root.join("tests/cron"))
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run go ({e}): the cron differential test builds Kubernetes' cron library \
                 with Go (bash tests/run.sh installs it)"
            )
        });
    assert!(status.success(), "go build of tests/cron failed");
    binary
}

/// A small deterministic generator (xorshift64*), so the corpus is the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A random field between `lo` and `hi`: `*`, a value, a range, a step, or a list of them.
fn field(rng: &mut Rng, lo: u64, hi: u64, names: &[&str]) -> String {
    let value = |rng: &mut Rng| {
        let v = lo + rng.below(hi - lo + 1);
        if !names.is_empty() && rng.below(4) == 0 {
            names[(v - lo) as usize % names.len()].to_owned()
        } else {
            v.to_string()
        }
    };
    let one = |rng: &mut Rng| match rng.below(6) {
        0 => "*".to_owned(),
        1 => {
            let span = if rng.below(8) == 0 { 200 } else { hi - lo + 1 };
            format!("*/{}", 1 + rng.below(span))
        }
        2 => {
            let a = lo + rng.below(hi - lo + 1);
            let b = a + rng.below(hi - a + 1);
            format!("{a}-{b}")
        }
        3 => {
            let a = lo + rng.below(hi - lo + 1);
            let b = a + rng.below(hi - a + 1);
            format!("{a}-{b}/{}", 1 + rng.below(5))
        }
        4 => format!("{}/{}", lo + rng.below(hi - lo + 1), 1 + rng.below(7)),
        _ => value(rng),
    };
    match rng.below(6) {
        0 => (0..2 + rng.below(3))
            .map(|_| one(rng))
            .collect::<Vec<_>>()
            .join(","),
        // Empty items, which Kubernetes' library drops.
        1 => {
            let (a, b) = (one(rng), one(rng));
            format!("{a},,{b}")
        }
        _ => one(rng),
    }
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

fn random_schedule(rng: &mut Rng) -> String {
    let dom = if rng.below(4) == 0 {
        "?".to_owned()
    } else {
        field(rng, 1, 31, &[])
    };
    format!(
        "{} {} {} {} {}",
        field(rng, 0, 59, &[]),
        field(rng, 0, 23, &[]),
        dom,
        field(rng, 1, 12, &MONTHS),
        field(rng, 0, 6, &DAYS),
    )
}

const ZONES: [&str; 6] = [
    "",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "UTC",
];

/// Both DST days of 2026 and 2027 in the northern zones and Lord Howe, a day before.
const DST_STARTS: [&str; 12] = [
    "2026-03-28T12:00:00Z",
    "2026-03-07T12:00:00Z",
    "2026-04-04T00:00:00Z",
    "2026-10-24T12:00:00Z",
    "2026-10-31T12:00:00Z",
    "2026-10-03T00:00:00Z",
    "2027-03-27T12:00:00Z",
    "2027-03-13T12:00:00Z",
    "2027-04-03T00:00:00Z",
    "2027-10-30T12:00:00Z",
    "2027-11-06T12:00:00Z",
    "2027-10-02T00:00:00Z",
];

/// Fixed-time schedules that meet the DST changes, and every form the validation accepts.
const FORMS: [&str; 47] = [
    "*/90 * * * *",
    "0/100 * * * *",
    "5 */25 * * *",
    "0,,30 * * * *",
    "0, * * * *",
    ", * * * *",
    "0 0 , * *",
    "*-5 * * * *",
    "+5 * * * *",
    "0 0 * * Fri",
    "0 0 * * FRİ",
    "0 0 * * frİ-SAT",
    "0 0 1 K * *",
    "30 2 * * *",
    "0 2 * * *",
    "59 1 * * *",
    "0 3 * * *",
    "30 1 * * *",
    "15 2 * * 0",
    "*/30 1-3 * * *",
    "0 * * * *",
    "*/7 * * * *",
    "5/15 * * * *",
    "0 0 ? * MON",
    "0 0 1,15 * 5",
    "0 0 13 * FRI",
    "0 9-17 * * 1-5",
    "0 9-17/2 * JAN-MAR MON-FRI",
    "0 12 L-2 * *",
    "0 0 29 2 *",
    "0 0 31 * *",
    "0 0 30 2 *",
    "@yearly",
    "@annually",
    "@monthly",
    "@weekly",
    "@daily",
    "@midnight",
    "@hourly",
    "@every 90m",
    "@every 1h30m10s",
    "CRON_TZ=Europe/Berlin 30 2 * * *",
    "TZ=America/New_York 30 2 * * *",
    "CRON_TZ=Australia/Lord_Howe 15 2 * * *",
    "0 0 * * 7",
    "0 0 * * SUN-SAT",
    "0 0 1 */2 *",
];

struct Triple {
    schedule: String,
    zone: &'static str,
    start: Timestamp,
}

fn corpus() -> Vec<Triple> {
    let mut triples = Vec::new();
    for schedule in FORMS {
        for zone in ZONES {
            // A prefix beside a time zone: kube-apiserver refuses such a CronJob, and the
            // controller adds no prefix to it.
            if schedule.contains("TZ=") && !zone.is_empty() {
                continue;
            }
            for start in DST_STARTS {
                triples.push(Triple {
                    schedule: schedule.to_owned(),
                    zone,
                    start: start.parse().unwrap(),
                });
            }
        }
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // 2025 to 2028.
    let (from, span) = (1_735_689_600_i64, 4 * 365 * 86_400_i64);
    while triples.len() < 12_000 {
        let schedule = random_schedule(&mut rng);
        let zone = ZONES[rng.below(ZONES.len() as u64) as usize];
        let start = Timestamp::from_second(from + rng.below(span as u64) as i64).unwrap();
        triples.push(Triple {
            schedule,
            zone,
            start,
        });
    }
    triples
}

/// The reference's runs of each triple (`None`: it does not read the schedule).
fn reference_runs(triples: &[Triple]) -> Vec<Option<Vec<i64>>> {
    let mut child = Command::new(reference())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = String::new();
    for t in triples {
        writeln!(
            input,
            "{}\t{}\t{}\t{RUNS}",
            t.schedule,
            t.zone,
            t.start.as_second()
        )
        .unwrap();
    }
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(output.status.success());
    let text = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), triples.len(), "one answer per triple");
    lines
        .iter()
        .map(|l| {
            (*l != "error").then(|| l.split_whitespace().map(|s| s.parse().unwrap()).collect())
        })
        .collect()
}

/// Our runs of `t`: `Err` when we do not read it.
fn our_runs(t: &Triple) -> Result<Vec<i64>, String> {
    let schedule =
        CronSchedule::parse(&t.schedule, t.zone, Some(t.start)).map_err(|e| e.to_string())?;
    let mut runs = Vec::new();
    let mut at = t.start;
    while runs.len() < RUNS {
        let Some(next) = schedule.next_after(at) else {
            break;
        };
        // The reference gives up on a search past five years after its start's year.
        let year = |t: Timestamp| t.to_zoned(jiff::tz::TimeZone::UTC).year();
        if year(next) > year(at) + 5 {
            break;
        }
        runs.push(next.as_second());
        at = next;
    }
    Ok(runs)
}

#[test]
fn our_cron_reader_finds_the_runs_kubernetes_finds() {
    let triples = corpus();
    let expected = reference_runs(&triples);
    let mut compared = 0;
    let mut differences = Vec::new();
    let mut refused = 0;
    for (t, expected) in triples.iter().zip(&expected) {
        let Some(expected) = expected else {
            // Refused by Kubernetes (kube-apiserver refuses such a CronJob): refused by us too,
            // or we would announce runs that never happen (a Velero Schedule is not validated).
            refused += 1;
            if let Ok(runs) = our_runs(t) {
                differences.push(format!(
                    "{:?} in {:?}: refused by Kubernetes, read by us ({} runs)",
                    t.schedule,
                    t.zone,
                    runs.len()
                ));
            }
            continue;
        };
        compared += 1;
        let ours = our_runs(t);
        if ours.as_ref() != Ok(expected) {
            differences.push(format!(
                "{:?} in {:?} from {}: Kubernetes {:?}, ours {:?}",
                t.schedule,
                t.zone,
                t.start,
                expected
                    .iter()
                    .map(|s| Timestamp::from_second(*s).unwrap().to_string())
                    .collect::<Vec<_>>(),
                ours.map(|r| r
                    .iter()
                    .map(|s| Timestamp::from_second(*s).unwrap().to_string())
                    .collect::<Vec<_>>())
            ));
        }
    }
    println!(
        "{compared} of {} (schedule, zone, start) triples read by Kubernetes' cron library, \
         {refused} refused by it; {} differences",
        triples.len(),
        differences.len()
    );
    assert!(
        compared >= 10_000,
        "only {compared} triples compared: the corpus is too small"
    );
    assert!(
        differences.is_empty(),
        "{} differences, the first:\n{}",
        differences.len(),
        differences
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}
