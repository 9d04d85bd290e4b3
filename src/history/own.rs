//! What each subject's own operations took, where a subject repeats them: a rule's durations mix
//! every object it detects, so a 3-hour nightly backup CronJob beside a 5-second every-minute
//! cleanup of the same rule would be expected to take the cleanup's 5 seconds (and be overdue
//! by the cleanup's p99), and a VM with 64 GiB of memory to migrate as fast as the 2 GiB ones.
//!
//! Per subject and rule operation, the durations of its last [`OWN_WINDOW`] operations that
//! succeeded. A subject is kept by its uid, or, for a rule with `durationsBy`, by the object its
//! label names ([`named_key`]: a Velero Backup counts toward its Schedule, whose announced runs
//! take what its backups took). Bounded whatever the cluster's churn: a subject that succeeded once (most
//! pods: their uid never comes back) is kept among the last [`MAX_ONCE`] such, and only one that
//! succeeds again in the same rule operation, or that announces its runs (a CronJob), joins the
//! [`MAX_REPEATING`] repeating ones, so a churn of one-off subjects never pushes out the
//! CronJobs and VMs whose own durations pay. In each, the subject whose last success (or
//! announcement) is the oldest goes first; a deleted subject's go with it. About 600 bytes per subject
//! and rule operation: 6 MiB at 10,000 CronJobs, 12 MiB at most.
//!
//! An operation is expected to take its subject's own durations once there are [`MIN_SAMPLES`]
//! of them ([`in_flight`], [`expected`]), else its rule's.

use std::collections::{BTreeMap, HashMap, VecDeque};

use jiff::SignedDuration;

use super::expectation::MIN_SAMPLES;
use super::quantiles::{Quantiles, quantiles_of};

/// The key of the object `name` in `namespace` (empty: cluster-scoped) that a rule's
/// `durationsBy` label names: its operations' durations are kept under it. `<namespace>/<name>`,
/// which no uid is (a uid never holds a `/`).
pub(crate) fn named_key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

/// Successful operations of one subject kept: the most recent ones.
pub(crate) const OWN_WINDOW: usize = 20;

/// Subjects with one success kept: the last ones.
pub(crate) const MAX_ONCE: usize = 10_000;

/// Subjects with more than one success kept: those that succeeded last.
pub(crate) const MAX_REPEATING: usize = 10_000;

/// One rule operation of one subject: its last durations (ms), oldest first, and their
/// quantiles (read on every change and refresh of its operations in flight).
#[derive(Debug)]
struct Runs {
    ruleset: String,
    operation: String,
    recent: VecDeque<u64>,
    quantiles: Quantiles,
}

impl Runs {
    fn record(&mut self, ms: u64) {
        if self.recent.len() == OWN_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(ms);
        self.quantiles = quantiles_of(self.recent.iter().copied());
    }
}

/// What one subject's operations took, per rule operation, and when it last succeeded or was
/// announced (a counter: their order).
#[derive(Debug, Default)]
struct Subject {
    runs: Vec<Runs>,
    last: u64,
}

impl Subject {
    fn runs(&self, ruleset: &str, operation: &str) -> Option<&Runs> {
        self.runs
            .iter()
            .find(|r| r.ruleset == ruleset && r.operation == operation)
    }

    /// Whether one of its rule operations succeeded more than once.
    fn repeated(&self) -> bool {
        self.runs.iter().any(|r| r.recent.len() > 1)
    }
}

/// Subjects by uid, bounded: past `max`, the one that succeeded longest ago goes.
#[derive(Debug)]
struct Tier {
    max: usize,
    subjects: HashMap<String, Subject>,
    /// Uids by last success.
    order: BTreeMap<u64, String>,
}

impl Tier {
    fn new(max: usize) -> Tier {
        Tier {
            max,
            subjects: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn remove(&mut self, uid: &str) -> Option<Subject> {
        let subject = self.subjects.remove(uid)?;
        self.order.remove(&subject.last);
        Some(subject)
    }

    fn insert(&mut self, uid: &str, subject: Subject) {
        self.order.insert(subject.last, uid.to_owned());
        self.subjects.insert(uid.to_owned(), subject);
        while self.subjects.len() > self.max {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            self.subjects.remove(&oldest);
        }
    }
}

/// Every subject's own durations (see the [module](self)).
#[derive(Debug)]
pub(crate) struct OwnDurations {
    once: Tier,
    repeating: Tier,
    /// Successes and announcements so far: their order.
    clock: u64,
}

impl Default for OwnDurations {
    fn default() -> OwnDurations {
        OwnDurations::bounded(MAX_ONCE, MAX_REPEATING)
    }
}

impl OwnDurations {
    fn bounded(once: usize, repeating: usize) -> OwnDurations {
        OwnDurations {
            once: Tier::new(once),
            repeating: Tier::new(repeating),
            clock: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// An operation `operation` of `ruleset` on subject `uid` succeeded after `ms`.
    pub(crate) fn record(&mut self, uid: &str, ruleset: &str, operation: &str, ms: u64) {
        let (mut subject, repeating) = match self.repeating.remove(uid) {
            Some(s) => (s, true),
            None => (self.once.remove(uid).unwrap_or_default(), false),
        };
        subject.last = self.tick();
        match subject
            .runs
            .iter_mut()
            .find(|r| r.ruleset == ruleset && r.operation == operation)
        {
            Some(runs) => runs.record(ms),
            None => {
                let mut runs = Runs {
                    ruleset: ruleset.to_owned(),
                    operation: operation.to_owned(),
                    recent: VecDeque::new(),
                    quantiles: quantiles_of(std::iter::empty()),
                };
                runs.record(ms);
                subject.runs.push(runs);
            }
        }
        if repeating || subject.repeated() {
            self.repeating.insert(uid, subject);
        } else {
            self.once.insert(uid, subject);
        }
    }

    /// Subject `uid` announces its next runs (a CronJob): kept among the repeating subjects from
    /// its first success on, so that one-off subjects succeeding between two of its runs (a
    /// nightly CronJob's, a weekly one's) never push its first run out.
    pub(crate) fn announced(&mut self, uid: &str) {
        if self.repeating.subjects.contains_key(uid) {
            return;
        }
        let mut subject = self.once.remove(uid).unwrap_or_default();
        subject.last = self.tick();
        self.repeating.insert(uid, subject);
    }

    /// The quantiles of what `operation` of `ruleset` took on subject `uid`, once it succeeded.
    pub(crate) fn quantiles(&self, uid: &str, ruleset: &str, operation: &str) -> Option<Quantiles> {
        self.repeating
            .subjects
            .get(uid)
            .or_else(|| self.once.subjects.get(uid))?
            .runs(ruleset, operation)
            .map(|r| r.quantiles)
    }

    /// Subject `uid` was deleted: its durations go.
    pub(crate) fn forget(&mut self, uid: &str) {
        self.repeating.remove(uid);
        self.once.remove(uid);
    }

    /// `ruleset` now has rules for `operations` only: the durations of the others go.
    pub(crate) fn retain(&mut self, ruleset: &str, operations: &[String]) {
        for tier in [&mut self.once, &mut self.repeating] {
            let mut emptied = Vec::new();
            for (uid, subject) in &mut tier.subjects {
                let had = subject.runs.len();
                subject
                    .runs
                    .retain(|r| r.ruleset != ruleset || operations.contains(&r.operation));
                if had > 0 && subject.runs.is_empty() {
                    emptied.push(uid.clone());
                }
            }
            for uid in emptied {
                tier.remove(&uid);
            }
        }
    }
}

/// What an operation in flight is expected to take: its subject's `own` durations once there
/// are [`MIN_SAMPLES`] of them, else its `rule`'s (the expectation itself weighs what it has
/// taken so far: see `expect`).
pub(crate) fn in_flight(
    own: Option<Quantiles>,
    rule: impl FnOnce() -> Option<Quantiles>,
) -> Option<Quantiles> {
    own.filter(|q| q.count >= MIN_SAMPLES).or_else(rule)
}

/// The median and 90th percentile a run announced ahead is expected to take, from its object's
/// `own` runs and its `rule`'s: its own once there are [`MIN_SAMPLES`] of them, before that its
/// rule's but never less than its own took so far; `None` while neither has enough.
pub(crate) fn expected(
    own: Option<Quantiles>,
    rule: Option<Quantiles>,
) -> (Option<SignedDuration>, Option<SignedDuration>) {
    let learned = |q: &Quantiles| q.count >= MIN_SAMPLES;
    match (own, rule) {
        (Some(own), _) if learned(&own) => (Some(own.p50), Some(own.p90)),
        (own, Some(rule)) if learned(&rule) => {
            let at_least = |rule: SignedDuration, own: Option<SignedDuration>| {
                Some(own.map_or(rule, |own| own.max(rule)))
            };
            (
                at_least(rule.p50, own.map(|q| q.p50)),
                at_least(rule.p90, own.map(|q| q.p90)),
            )
        }
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i64) -> Option<SignedDuration> {
        Some(SignedDuration::from_secs(s))
    }

    /// `seconds` recorded as one subject's runs of one rule operation; their quantiles.
    fn runs(seconds: &[u64]) -> Option<Quantiles> {
        let mut own = OwnDurations::default();
        for &s in seconds {
            own.record("u", "rs", "Run", s * 1000);
        }
        own.quantiles("u", "rs", "Run")
    }

    #[test]
    fn an_objects_own_runs_decide_once_there_are_enough_and_bound_the_rules_before() {
        // The rule: a hundred 5-second cleanups.
        let rule = runs(&[5; 100]);
        // A nightly backup with six runs of its own: three hours, whatever the rule says.
        let nightly = runs(&[10_800, 10_700, 10_900, 10_800, 10_800, 10_800]);
        assert_eq!(expected(nightly, rule), (secs(10_800), secs(10_900)));
        // With two: not its own yet, but never less than they took.
        let young = runs(&[10_800, 10_900]);
        assert_eq!(expected(young, rule), (secs(10_800), secs(10_900)));
        // A cleanup of its own: its own.
        let cleanup = runs(&[4, 5, 6, 5, 5, 5]);
        assert_eq!(expected(cleanup, rule), (secs(5), secs(6)));
        // Nothing of its own: the rule's; nothing learned: nothing.
        assert_eq!(expected(None, rule), (secs(5), secs(5)));
        assert_eq!(expected(young, runs(&[5; 4])), (None, None));
        assert_eq!(expected(None, None), (None, None));
    }

    #[test]
    fn an_operation_in_flight_takes_its_subjects_own_durations_once_there_are_enough() {
        let rule = runs(&[5; 100]);
        let p50 = |q: Option<Quantiles>| q.map(|q| q.p50);
        let nightly = runs(&[10_800, 10_700, 10_900, 10_800, 10_800, 10_800]);
        assert_eq!(p50(in_flight(nightly, || rule)), secs(10_800));
        // Five of its own are not enough: the rule's.
        let young = runs(&[10_800; 5]);
        assert_eq!(p50(in_flight(young, || rule)), secs(5));
        assert_eq!(p50(in_flight(None, || rule)), secs(5));
        assert_eq!(p50(in_flight(None, || None)), None);
    }

    #[test]
    fn the_window_keeps_the_latest_runs() {
        let mut own = OwnDurations::default();
        for _ in 0..OWN_WINDOW {
            own.record("u", "rs", "Run", 1000);
        }
        for _ in 0..OWN_WINDOW {
            own.record("u", "rs", "Run", 60_000);
        }
        let q = own.quantiles("u", "rs", "Run").unwrap();
        assert_eq!(
            (q.count, q.p50),
            (OWN_WINDOW as u64, SignedDuration::from_secs(60))
        );
    }

    #[test]
    fn each_rule_operation_of_a_subject_has_its_own() {
        let mut own = OwnDurations::default();
        own.record("vm", "vm-rules", "Migrating", 60_000);
        own.record("vm", "vm-rules", "Starting", 5_000);
        own.record("vm", "other-rules", "Migrating", 1_000);
        let p50 = |rs: &str, op: &str| own.quantiles("vm", rs, op).map(|q| q.p50);
        assert_eq!(p50("vm-rules", "Migrating"), secs(60));
        assert_eq!(p50("vm-rules", "Starting"), secs(5));
        assert_eq!(p50("other-rules", "Migrating"), secs(1));
        assert_eq!(p50("vm-rules", "Stopping"), None);
        assert_eq!(own.quantiles("other", "vm-rules", "Migrating"), None);
    }

    /// Subjects that succeed once (pods) come and go by the thousand; those that repeat stay.
    #[test]
    fn a_churn_of_one_off_subjects_never_pushes_out_the_repeating_ones() {
        let mut own = OwnDurations::bounded(3, 2);
        for _ in 0..2 {
            own.record("cronjob-a", "rs", "Run", 3_600_000);
            own.record("cronjob-b", "rs", "Run", 60_000);
        }
        for pod in 0..1000 {
            own.record(&format!("pod-{pod}"), "rs", "Run", 1_000);
        }
        assert_eq!(
            own.quantiles("cronjob-a", "rs", "Run").map(|q| q.count),
            Some(2)
        );
        assert_eq!(
            own.quantiles("cronjob-b", "rs", "Run").map(|q| q.count),
            Some(2)
        );
        // The last one-off subjects only.
        assert_eq!(own.once.subjects.len(), 3);
        assert_eq!(own.once.order.len(), 3);
        assert!(own.quantiles("pod-999", "rs", "Run").is_some());
        assert!(own.quantiles("pod-996", "rs", "Run").is_none());
        // A third repeating subject: the one that succeeded longest ago goes.
        own.record("pod-999", "rs", "Run", 1_000);
        assert_eq!(own.repeating.subjects.len(), 2);
        assert_eq!(own.repeating.order.len(), 2);
        assert!(own.quantiles("cronjob-a", "rs", "Run").is_none());
        assert!(own.quantiles("cronjob-b", "rs", "Run").is_some());
        assert_eq!(
            own.quantiles("pod-999", "rs", "Run").map(|q| q.count),
            Some(2)
        );
    }

    /// A pod that started and stopped once, or that two rulesets watch, is still a one-off.
    #[test]
    fn one_success_in_each_of_several_rule_operations_is_not_repeating() {
        let mut own = OwnDurations::bounded(2, 2);
        own.record("cronjob", "rs", "Run", 60_000);
        own.record("cronjob", "rs", "Run", 60_000);
        for pod in 0..100 {
            let uid = format!("pod-{pod}");
            own.record(&uid, "rs", "Starting", 1_000);
            own.record(&uid, "rs", "Terminating", 1_000);
            own.record(&uid, "other", "Starting", 1_000);
        }
        assert_eq!(own.repeating.subjects.len(), 1);
        assert!(own.quantiles("cronjob", "rs", "Run").is_some());
    }

    /// A nightly CronJob's first run is not pushed out by the pods that come and go before its
    /// second.
    #[test]
    fn an_announcing_subject_keeps_its_first_run_through_any_churn() {
        let mut own = OwnDurations::bounded(2, 2);
        own.announced("nightly");
        own.record("nightly", "rs", "Run", 3_600_000);
        // Announced again, as on every change of the CronJob: nothing moves.
        own.announced("nightly");
        for pod in 0..1000 {
            own.record(&format!("pod-{pod}"), "rs", "Run", 1_000);
        }
        own.record("nightly", "rs", "Run", 3_600_000);
        assert_eq!(
            own.quantiles("nightly", "rs", "Run").map(|q| q.count),
            Some(2)
        );
        // A rule removed elsewhere leaves an announced subject without runs in place.
        own.announced("weekly");
        own.retain("other", &[]);
        assert!(own.repeating.subjects.contains_key("weekly"));
        assert_eq!(own.repeating.order.len(), own.repeating.subjects.len());
    }

    #[test]
    fn a_deleted_subject_and_a_removed_ruleset_take_their_durations_with_them() {
        let mut own = OwnDurations::default();
        for _ in 0..2 {
            own.record("a", "rs", "Run", 1_000);
            own.record("b", "rs", "Run", 1_000);
            own.record("b", "other", "Run", 1_000);
        }
        own.record("c", "rs", "Run", 1_000);
        own.forget("a");
        assert!(own.quantiles("a", "rs", "Run").is_none());
        own.retain("rs", &[]);
        assert!(own.quantiles("b", "rs", "Run").is_none());
        assert!(own.quantiles("c", "rs", "Run").is_none());
        assert!(own.quantiles("b", "other", "Run").is_some());
        assert_eq!(own.once.subjects.len() + own.repeating.subjects.len(), 1);
        assert_eq!(own.once.order.len() + own.repeating.order.len(), 1);
    }
}
