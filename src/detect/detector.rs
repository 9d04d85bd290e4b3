//! Turns object events into operations: bind the object, evaluate a ruleset within its budget,
//! feed the debounce table, and publish its changes to the index. The object is dropped after.
//! Called off the async runtime, one lane per ruleset (see `lanes`).

use super::health::{Health, HealthReader};
use super::over_budget::OverBudgetEvaluations;
use super::suspension::SuspendPolicy;
use crate::evaluate::{Bound, Budget, EvalError, evaluate_labels_within};
use crate::history::{self, Durations};
use crate::index::{OperationsWriter, Transitions};
use crate::operation::{Outcome, Subject};
use crate::ruleset::CompiledRuleSet;
use crate::schedule::Schedules;
use crate::track::{Change, Tracker};
use parking_lot::Mutex;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::Notify;

mod clock;
mod related;
mod report;
use related::subject_nodes;
use report::blinding_error;

/// What evaluating a ruleset may cost, when a ruleset that keeps exceeding it is suspended, and
/// how late its evaluation may run before its detection counts as not current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub budget: Budget,
    pub suspend: SuspendPolicy,
    /// The longest the oldest event of a ruleset's lane may wait to be evaluated (its lag)
    /// before the ruleset's detection on the target is not current (see `lanes`).
    pub lag_bound: std::time::Duration,
}

/// Default of the lag bound (`EVALUATION_LAG_BOUND`, [`Limits::lag_bound`]).
const DEFAULT_LAG_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

impl Default for Limits {
    fn default() -> Self {
        Limits {
            budget: Budget::default(),
            suspend: SuspendPolicy::default(),
            lag_bound: DEFAULT_LAG_BOUND,
        }
    }
}

pub(crate) struct Detector {
    tracker: Mutex<Tracker>,
    limits: Limits,
    index: OperationsWriter,
    /// What detection knows of itself: suspended rulesets, skipped objects and rule errors are
    /// reported here.
    health: Arc<Health>,
    /// What operations took, learned from those that completed: gives active ones their
    /// expected end (see `history`).
    pub durations: Arc<Durations>,
    /// What the rules announce of the objects: their next operations (see `schedule`).
    schedules: Schedules,
    /// Woken when the tracker may have an earlier deadline than the ticker sleeps to.
    deadlines: Notify,
    /// The related parts of each loaded ruleset that has any (see `related`).
    related_parts: Mutex<HashMap<String, related::Parts>>,
    /// Evaluations that went over the budget, used again for objects that did not change.
    over_budget: OverBudgetEvaluations,
}

fn now() -> jiff::Timestamp {
    jiff::Timestamp::now()
}

/// One log line about an operation, at `level`, naming its ruleset, subject and operation,
/// with any further fields.
macro_rules! log_operation {
    ($level:ident, $op:expr, $what:literal $(, $key:ident = $value:expr)*) => {
        tracing::$level!(
            ruleset = %$op.ruleset,
            subject = %$op.subject.reference(),
            kind = %$op.subject.kind,
            operation = %$op.operation,
            name = %$op.name,
            $($key = %$value,)*
            $what
        )
    };
}

/// Counts completions and logs both kinds of transition, one line per operation naming its
/// ruleset, subject and operation.
fn report_transitions(transitions: &Transitions) {
    for op in &transitions.started {
        log_operation!(debug, op, "operation started");
    }
    for op in &transitions.completed {
        crate::metrics::operation_completed(op);
        let outcome = op.outcome.map_or("", |o| o.as_str());
        if op.outcome == Some(Outcome::Failed) {
            let message = op.message.as_deref().unwrap_or("");
            log_operation!(
                warn,
                op,
                "operation failed",
                outcome = outcome,
                message = message
            );
        } else {
            log_operation!(debug, op, "operation completed", outcome = outcome);
        }
    }
}

impl Detector {
    pub(crate) fn new(
        tracker: Tracker,
        index: OperationsWriter,
        health: Arc<Health>,
        limits: Limits,
    ) -> Self {
        let durations = Arc::new(Durations::default());
        Detector {
            tracker: Mutex::new(tracker),
            limits,
            index,
            health,
            schedules: Schedules::new(durations.clone()),
            durations,
            deadlines: Notify::new(),
            related_parts: Mutex::new(HashMap::new()),
            over_budget: OverBudgetEvaluations::default(),
        }
    }

    /// What the rules announce, for the gates.
    pub(crate) fn schedules(&self) -> &Schedules {
        &self.schedules
    }

    /// Where the detector reports what it knows of itself (for the watchers and lanes).
    pub(super) fn health(&self) -> &Health {
        &self.health
    }

    /// Holds back every evaluation (each waits for the tracker) until the guard is dropped: a
    /// lane busy in a long evaluation, for the tests.
    #[cfg(test)]
    pub(super) fn hold_evaluations(&self) -> parking_lot::MutexGuard<'_, Tracker> {
        self.tracker.lock()
    }

    /// How late a lane's evaluation may run before its ruleset is not current ([`Limits`]).
    pub(super) fn lag_bound(&self) -> std::time::Duration {
        self.limits.lag_bound
    }

    /// What the detector knows of itself, read-only (for the rulesets' status).
    pub(crate) fn health_reader(&self) -> HealthReader {
        self.health.reader()
    }

    /// A ruleset was reloaded (a new generation) or deleted: what was known of its health (its
    /// suspension, its skipped objects) is forgotten, and so is its related parts' (their
    /// parts as loaded now are told by [`Detector::related_loaded`]).
    pub(crate) fn reset_ruleset(&self, ruleset: &str) {
        self.health.ruleset_reset(ruleset);
        self.over_budget.forget_ruleset(ruleset);
        for (part, _) in self.take_parts(ruleset) {
            self.health.ruleset_reset(&part);
            self.over_budget.forget_ruleset(&part);
        }
    }

    /// Runs `f` on the tracker and publishes its changes in the same critical section, so the
    /// index sees changes in the order the tracker made them.
    fn with_tracker(&self, f: impl FnOnce(&mut Tracker) -> Vec<Change>) {
        let mut tracker = self.tracker.lock();
        let changes = f(&mut tracker);
        self.publish(changes);
        drop(tracker);
        self.deadlines.notify_one();
    }

    /// Hands the tracker's changes to the index (call with the tracker locked, to keep their
    /// order), then counts and logs the operations that started and completed.
    fn publish(&self, mut changes: Vec<Change>) {
        if changes.is_empty() {
            return;
        }
        // Active records as the tracker makes them carry no expectation: history adds it.
        let at = now();
        for change in &mut changes {
            if let Change::Upsert(op) = change
                && let Some(with) = history::refreshed(op, &self.durations, at)
            {
                self.durations.shown(&with);
                *op = with;
            }
        }
        let transitions = self.index.apply(changes);
        for op in &transitions.completed {
            self.durations.completed(op);
        }
        crate::metrics::set_operations(self.index.len());
        if !transitions.is_empty() {
            report_transitions(&transitions);
        }
    }

    /// The nodes that changes of `objects` not yet evaluated by `rs` would put operations on
    /// (its node labels evaluated on each, within its budget), as the index keys node gates:
    /// where a lag of those changes can hide an operation. `None` when that cannot be known: a
    /// node label fails on one of them, or looking would go on past `deadline`.
    pub(crate) fn nodes_of_unseen(
        &self,
        rs: &CompiledRuleSet,
        objects: &[Arc<serde_json::Value>],
        deadline: std::time::Instant,
    ) -> Option<BTreeSet<String>> {
        let mut nodes = BTreeSet::new();
        for object in objects {
            if std::time::Instant::now() > deadline {
                return None;
            }
            let Some(subject) = Subject::from_object(object) else {
                continue;
            };
            let bound = Bound::new(object);
            let labels = evaluate_labels_within(&rs.exprs, &bound, &self.limits.budget, &NODE_KEYS);
            let found = if rs.related.is_empty() {
                nodes_of(rs, &labels)
            } else {
                // Related objects' labels are the tracker's: not waited for past the deadline
                // (a lane may hold it).
                let tracker = self.tracker.try_lock_until(deadline)?;
                subject_nodes(rs, &tracker, &subject, &labels)
            };
            nodes.extend(found?);
        }
        Some(nodes)
    }

    /// An object was listed, added or modified: evaluate `rs` on it. Where `rs` is suspended
    /// (the object's namespace), only its node labels are evaluated, and the object counts as
    /// skipped on those nodes.
    pub(crate) fn apply(&self, rs: &CompiledRuleSet, object: &serde_json::Value) {
        let Some(subject) = Subject::from_object(object) else {
            return;
        };
        let namespace = subject.namespace.as_deref();
        if !rs.applies_to(namespace) {
            return;
        }
        let bound = Bound::new(object);
        if self.health.is_suspended(&rs.info.name, namespace) {
            let labels = evaluate_labels_within(&rs.exprs, &bound, &self.limits.budget, &NODE_KEYS);
            let tracker = self.tracker.lock();
            if tracker.accepts(rs.owner()) {
                let nodes = subject_nodes(rs, &tracker, &subject, &labels);
                self.health.unevaluated(rs, &subject, nodes);
            }
            return;
        }
        let (evaluation, recalled) = self.evaluate(rs, &subject.uid, object, &bound);
        // What it found of the ruleset's health counts only while this generation is loaded: a
        // lane of a watcher being stopped (the ruleset changed or was deleted) still finishes
        // the evaluation under way, and would mark the object skipped, or the rules failing, for
        // a ruleset whose health was reset since. Under the tracker's lock, which reloading or
        // removing a ruleset takes before its health is reset.
        let tracker = self.tracker.lock();
        if !tracker.accepts(rs.owner()) {
            return;
        }
        match &evaluation.over_budget {
            // Not rule errors: past the budget every expression reads `CostExceeded`, its result
            // unknown rather than wrong, and that is counted and named once as over budget. As
            // rule errors, an evaluation cut short by a busy machine's clock raised
            // `IFORuleEvaluationErrors` for rules with nothing wrong in them.
            Some(over) => {
                if !recalled {
                    self.remember_over_budget(rs, &subject.uid, object, &evaluation);
                }
                let nodes = subject_nodes(rs, &tracker, &subject, &evaluation.labels);
                self.report_over_budget(rs, (&subject, nodes), over, recalled)
            }
            None => {
                self.report_errors(rs, &subject, &evaluation);
                match blinding_error(rs, &evaluation) {
                    Some(error) => self.health.rule_failed(
                        rs,
                        &subject,
                        subject_nodes(rs, &tracker, &subject, &evaluation.labels),
                        &error,
                    ),
                    None => self.health.evaluated(rs, &subject.uid),
                }
            }
        }
        // Under the tracker's lock, as the removal of the ruleset's entries is.
        if rs.part_of.is_none() {
            for (operation, e) in self.schedules.observe(rs, &subject, &evaluation.starts) {
                tracing::debug!(ruleset = %rs.info.name, subject = %subject.reference(), kind = %subject.kind, operation = %operation, error = %e, "schedule not read");
                crate::metrics::rule_error(&rs.owner().name);
                self.health.record_error(
                    &rs.info.name,
                    format!(
                        "rule {operation} schedule: {e} (object {}/{})",
                        subject.kind, subject.name
                    ),
                );
            }
        }
        drop(tracker);
        // A related part's evaluation labels its ruleset's subjects instead.
        if let Some(part) = &rs.part_of {
            self.relate(part, &subject, &evaluation);
            return;
        }
        let at = now();
        self.with_tracker(|t| {
            let observed = t.observe(&rs.info, &rs.operations, &subject, &evaluation, at);
            for warning in observed.warnings {
                // Repeats on every event until the ruleset is fixed: keep it out of the info log.
                tracing::debug!(ruleset = %rs.info.name, target = %rs.target, subject = %subject.reference(), warning = ?warning, "label not set");
                self.health
                    .record_error(&rs.info.name, format!("label not set: {warning:?}"));
            }
            observed.changes
        });
    }

    /// An object was deleted: its operations end at once.
    pub(crate) fn delete(&self, rulesets: &[Arc<CompiledRuleSet>], uid: &str) {
        self.health.deleted(rulesets, uid);
        self.over_budget
            .forget_object(rulesets.iter().map(|rs| rs.info.name.as_str()), uid);
        let at = now();
        self.with_tracker(|t| {
            let mut changes = Vec::new();
            for rs in rulesets {
                if let Some(part) = &rs.part_of {
                    changes.extend(t.related_gone(&part.ruleset, part.index, uid, at));
                } else if t.accepts(&rs.info) {
                    self.schedules.subject_deleted(&rs.info.name, uid);
                    self.durations.subject_deleted(uid);
                    changes.extend(t.subject_deleted(&rs.info.name, uid, at));
                }
            }
            changes
        });
    }

    /// A relist of `namespace` (`None`: all of the target) finished: subjects there no longer
    /// present were deleted while we were not watching.
    pub(crate) fn resync(
        &self,
        rulesets: &[Arc<CompiledRuleSet>],
        namespace: Option<&str>,
        present: &HashSet<String>,
    ) {
        let at = now();
        self.with_tracker(|t| {
            let mut changes = Vec::new();
            for rs in rulesets {
                if let Some(part) = &rs.part_of {
                    changes.extend(t.related_resync(
                        &part.ruleset,
                        part.index,
                        namespace,
                        present,
                        at,
                    ));
                } else if t.accepts(&rs.info) {
                    self.schedules.resync(&rs.info.name, namespace, present);
                    changes.extend(t.resync(&rs.info.name, namespace, present, at));
                }
            }
            changes
        });
    }

    /// A valid ruleset was loaded at `generation`: only its evaluations by that generation count.
    pub(crate) fn ruleset_loaded(&self, ruleset: &str, generation: Option<i64>) {
        self.tracker.lock().ruleset_loaded(ruleset, generation);
    }

    /// `ruleset` (`spec`) does not compile (`error`): the gates it could put operations in are
    /// Unknown until it does (see [`Health::invalid`]).
    pub(crate) fn ruleset_invalid(
        &self,
        ruleset: &str,
        spec: &crate::ruleset::RuleSetSpec,
        error: String,
    ) {
        self.health.invalid(ruleset, spec, error);
    }

    /// Every ruleset detection knows of: loaded, or known not to compile. A ruleset controller
    /// started again (after a failure) compares them with the rulesets it lists, so that those
    /// deleted meanwhile end their operations.
    pub(crate) fn known_rulesets(&self) -> BTreeSet<String> {
        let mut known: BTreeSet<String> = self.tracker.lock().loaded().map(str::to_owned).collect();
        known.extend(self.health.invalid_rulesets());
        known
    }

    /// A ruleset was deleted or became invalid: its operations end with `RuleSetRemoved`, and
    /// what its rules still evaluate (a watcher being stopped) is ignored.
    pub(crate) fn ruleset_removed(&self, ruleset: &str) {
        let at = now();
        self.with_tracker(|t| {
            self.schedules.ruleset_removed(ruleset);
            t.ruleset_removed(ruleset, at)
        });
    }

    /// A ruleset now has only the rules of `rs`: the operations of the others end with
    /// `RuleSetRemoved`, and only its rules with a schedule still announce.
    pub(crate) fn retain_rules(&self, rs: &CompiledRuleSet) {
        let at = now();
        let name = &rs.info.name;
        self.with_tracker(|t| {
            self.schedules
                .retain_operations(name, &rs.scheduled_operations());
            t.retain_operations(name, &rs.operations, at)
        });
    }

    /// Operations read back from their persisted copies at start: the tracker takes them
    /// (see [`Tracker::restore`]) and the index serves them at once, under the same name and
    /// uid. Returns the records the tracker did not take: their copies mirror nothing.
    pub(crate) fn restore(
        &self,
        records: Vec<Arc<crate::operation::InFlightOperation>>,
    ) -> Vec<Arc<crate::operation::InFlightOperation>> {
        let mut refused = Vec::new();
        self.with_tracker(|t| {
            let mut changes = Vec::new();
            for record in records {
                if t.restore(record.clone()) {
                    changes.push(Change::Upsert(record));
                } else {
                    refused.push(record);
                }
            }
            changes
        });
        refused
    }

    /// Active operations read from their persisted copies when this replica starts leading:
    /// those it detected on its own take the copies' uids and starts (see [`Tracker::adopt`]).
    pub(crate) fn adopt(&self, copies: &[Arc<crate::operation::InFlightOperation>]) {
        self.with_tracker(|t| copies.iter().filter_map(|c| t.adopt(c)).collect());
    }

    /// Restored operations nothing confirmed since the initial sync complete (see
    /// [`Tracker::sweep_restored`]).
    pub(crate) fn sweep_restored(&self) {
        let at = now();
        self.with_tracker(|t| t.sweep_restored(at));
    }

    pub(crate) fn active_count(&self, ruleset: &str) -> usize {
        self.tracker.lock().active_count(ruleset)
    }
}

/// The label keys that put an operation in a node's gate.
const NODE_KEYS: [&str; 2] = [ifo_model::NODE_LABEL, ifo_model::TARGET_NODE_LABEL];

/// The nodes an object's operations would be labelled with by `rs` (its static node labels,
/// else what its node label expressions gave in `labels`), as the index keys node gates; `None`
/// when a node label expression failed: the object may be on any node.
fn nodes_of(
    rs: &CompiledRuleSet,
    labels: &[(String, Result<String, EvalError>)],
) -> Option<BTreeSet<String>> {
    let mut nodes = BTreeSet::new();
    for key in NODE_KEYS {
        let value = match rs.info.labels.get(key) {
            Some(value) => value.as_str(),
            None => match labels.iter().find(|(k, _)| k == key) {
                Some((_, Ok(value))) => value.as_str(),
                Some((_, Err(_))) => return None,
                None => continue,
            },
        };
        if !value.is_empty() {
            nodes.insert(crate::operation::gate_node(value));
        }
    }
    Some(nodes)
}
