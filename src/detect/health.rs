//! What detection knows of itself, in one store: where it is not current, per target and
//! namespace ([`super::target_health`]: the API's `Warning`s, the maintenance gates' `Unknown`,
//! the `ifo_target_*` metrics), and what each ruleset hit ([`super::ruleset_health`]: its status
//! conditions).
//!
//! One fact often concerns both: an object skipped over a ruleset's budget makes its namespace's
//! answers incomplete and is named on the ruleset; a suspension stops a ruleset and blinds the
//! namespaces it covers. [`Health`]'s writers record such a fact on both sides at once, so that no
//! caller can update one without the other. Readers get a [`HealthReader`], which cannot write.

use super::WatchState;
use super::ruleset_health::{RuleSetHealth, RuleSets};
use super::suspension::SuspendPolicy;
use super::target_health::{LagSaid, Namespaces, Reach, Stale, Stream, TargetHealth};
use crate::evaluate::OverBudget;
use crate::index::{FeedsClock, GateScope};
use crate::operation::Subject;
use crate::readiness::Readiness;
use crate::ruleset::{CompiledRuleSet, Target};
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// The namespaces `rs` covers (`None`: every one).
fn covered(rs: &CompiledRuleSet) -> Namespaces {
    (!rs.namespaces.is_empty()).then(|| rs.namespaces.iter().cloned().collect())
}

/// Detection's health, per target and per ruleset. Written by the watchers and the detector.
#[derive(Debug, Default)]
pub(crate) struct Health {
    targets: TargetHealth,
    rulesets: RuleSets,
}

impl Health {
    /// A read-only handle, for the API, the gates and the rulesets' status.
    pub(crate) fn reader(self: &Arc<Self>) -> HealthReader {
        HealthReader(self.clone())
    }

    // What a watcher learns of its target.

    /// A watcher (re)starts for `target`, for rulesets feeding `feeds` (see
    /// [`TargetHealth::watching`]).
    pub(crate) fn watching(&self, target: &Target, feeds: Option<BTreeSet<String>>) {
        self.targets.watching(target, feeds);
    }

    /// The rulesets watching `target` reach the gates of `reach`, each its own.
    pub(crate) fn reaches(&self, target: &Target, reach: BTreeMap<String, Reach>) {
        self.targets.reaches(target, reach);
    }

    /// No ruleset targets `target` any more.
    pub(crate) fn forget(&self, target: &Target) {
        self.targets.forget(target);
    }

    /// The API server does not serve `target` (its CRD is not installed).
    pub(crate) fn not_served(&self, target: &Target) {
        self.targets.not_served(target);
    }

    /// Discovery of `target` failed.
    pub(crate) fn unresolved(&self, target: &Target, reason: String) {
        self.targets.unresolved(target, reason);
    }

    /// Discovery found `target`; it is watched through `streams`.
    pub(crate) fn resolved(&self, target: &Target, namespaced: bool, streams: &[Stream]) {
        self.targets.resolved(target, namespaced, streams);
    }

    /// A list of `stream` completed: it is current.
    pub(crate) fn listed(&self, target: &Target, stream: &Stream, at: Timestamp) {
        self.targets.listed(target, stream, at);
    }

    /// Listing or watching `stream` failed: it is not current until a list completes again.
    pub(crate) fn failed(&self, target: &Target, stream: &Stream, reason: String) {
        self.targets.failed(target, stream, reason);
    }

    /// A liveness probe of `stream` failed (`Some`) or succeeded (`None`).
    pub(crate) fn probed(&self, target: &Target, stream: &Stream, failure: Option<String>) {
        self.targets.probed(target, stream, failure);
    }

    /// Every stream of `target` completed a list started after its rulesets last dropped
    /// events: nothing is missing any more.
    pub(crate) fn relisted(&self, target: &Target) {
        self.targets.relisted(target);
    }

    /// A list of `stream` of `target` saw exactly the objects `present` (by uid).
    pub(crate) fn keep_skipped(&self, target: &Target, stream: &Stream, present: &HashSet<String>) {
        self.targets.keep_skipped(target, stream, present);
    }

    /// Object `uid` of `target` was deleted (read by its watcher): its skip marks go, and what
    /// its evaluations still queued find is ignored.
    pub(crate) fn object_gone(&self, target: &Target, uid: &str) {
        self.targets.object_gone(target, uid);
    }

    /// The watch of `ruleset`'s target is in `state`.
    pub(crate) fn set_watch(&self, ruleset: &str, state: WatchState) {
        self.rulesets.set_watch(ruleset, state);
    }

    /// Object `uid` of `target` (`object`: `namespace/name`, in `namespace`) cannot be decoded
    /// (`why`): no ruleset of `rulesets` that applies to its namespace evaluates it.
    pub(crate) fn undecodable(
        &self,
        target: &Target,
        rulesets: &[Arc<CompiledRuleSet>],
        (uid, namespace): (&str, Option<&str>),
        object: String,
        why: &str,
    ) {
        for rs in rulesets.iter().filter(|rs| rs.applies_to(namespace)) {
            self.rulesets.record_skipped(
                &rs.info.name,
                uid,
                format!("{object}: cannot be decoded: {why}"),
            );
        }
        self.targets.skipped(
            target,
            (uid, None),
            namespace,
            (object, None),
            format!("it cannot be decoded: {why}; fix or delete the object"),
        );
    }

    /// Object `uid` of `target` was decoded: whatever decoding skipped of it is current again.
    pub(crate) fn decoded(&self, target: &Target, uid: &str) {
        self.targets.evaluated(target, uid, None);
    }

    // What the detector learns of a ruleset.

    /// An error of `ruleset`'s rules (or labels), for its status.
    pub(crate) fn record_error(&self, ruleset: &str, error: String) {
        self.rulesets.record_error(ruleset, error);
    }

    /// `rs` evaluated object `uid` within its budget: it is no longer skipped by it.
    pub(crate) fn evaluated(&self, rs: &CompiledRuleSet, uid: &str) {
        self.targets.evaluated(&rs.target, uid, Some(&rs.info.name));
        self.rulesets.clear_skipped(&rs.info.name, uid);
    }

    /// Object `uid` is gone: no ruleset of `rulesets` skips it any more. Called from a lane, in
    /// order after its evaluations of the object: what those marked goes too, on the target as
    /// on the ruleset.
    pub(crate) fn deleted(&self, rulesets: &[Arc<CompiledRuleSet>], uid: &str) {
        for rs in rulesets {
            self.rulesets.clear_skipped(&rs.info.name, uid);
            self.targets.evaluated(&rs.target, uid, Some(&rs.info.name));
        }
    }

    /// A rule (or a node label) of `rs` fails on `subject` (`error`): whether its operation is
    /// in flight is unknown, so the object counts as skipped by the ruleset until an evaluation
    /// succeeds. `nodes`: the nodes it is on, where known.
    pub(crate) fn rule_failed(
        &self,
        rs: &CompiledRuleSet,
        subject: &Subject,
        nodes: Option<BTreeSet<String>>,
        error: &str,
    ) {
        let name = &rs.info.name;
        self.targets.skipped(
            &rs.target,
            (&subject.uid, Some(name)),
            subject.namespace.as_deref(),
            (subject.reference(), nodes),
            format!("ruleset {name} cannot evaluate it ({error}); fix the ruleset's rules"),
        );
    }

    /// Evaluating `rs` on `subject` went over its budget (`over`): the object is skipped,
    /// and the ruleset is suspended in the subject's namespace when that keeps happening on
    /// different objects there under `policy`. True when this suspends it there (once).
    /// `nodes`: the nodes the object is on, where known.
    pub(crate) fn over_budget(
        &self,
        rs: &CompiledRuleSet,
        (subject, nodes): (&Subject, Option<BTreeSet<String>>),
        over: &OverBudget,
        recalled: bool,
        policy: &SuspendPolicy,
    ) -> bool {
        let name = &rs.info.name;
        let object = subject.reference();
        let place = subject.namespace.clone();
        let what = format!(
            "{} {object}: over the evaluation budget in {over}",
            subject.kind
        );
        // Not for an object deleted meanwhile (its evaluation was still queued).
        if self.targets.skipped(
            &rs.target,
            (&subject.uid, Some(name)),
            subject.namespace.as_deref(),
            (object, nodes),
            format!(
                "over the evaluation budget of ruleset {name} ({over}); make the ruleset cheaper or the object smaller"
            ),
        ) {
            self.rulesets.record_skipped(name, &subject.uid, what);
        }
        let what = format!("{over} (object {}/{})", subject.kind, subject.name);
        let suspended = self.rulesets.record_over_budget(
            name,
            (&subject.uid, &place),
            (what, recalled),
            policy,
        );
        if suspended {
            self.targets
                .suspended(&rs.target, name, subject.namespace.as_deref());
        }
        suspended
    }

    /// `subject` changed where `rs` is suspended: its rules did not run, so what it is doing is
    /// unknown; it counts as skipped, on `nodes` (what its node labels gave, where known), until
    /// the ruleset resumes or the object is gone.
    pub(crate) fn unevaluated(
        &self,
        rs: &CompiledRuleSet,
        subject: &Subject,
        nodes: Option<BTreeSet<String>>,
    ) {
        let name = &rs.info.name;
        let place = match &subject.namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "for cluster-scoped objects".to_owned(),
        };
        self.targets.skipped(
            &rs.target,
            (&subject.uid, Some(name)),
            subject.namespace.as_deref(),
            (subject.reference(), nodes),
            format!(
                "it changed while ruleset {name} is suspended {place}; make the ruleset cheaper (any change to its spec resumes it)"
            ),
        );
    }

    /// `rs`'s evaluation lane on `target` fell behind and dropped events (`error` for its
    /// status): what they said is missing until the watcher's next complete list.
    pub(crate) fn dropped_events(&self, target: &Target, rs: &CompiledRuleSet, error: String) {
        self.rulesets.record_error(&rs.info.name, error);
        self.targets
            .dropped_events(target, &rs.info.name, covered(rs));
    }

    /// `rs`'s evaluation lane on `target` lags in `namespace` (`None`: on cluster-scoped
    /// objects): the oldest event of it there has waited over the bound (`Some`, with the
    /// nodes its late changes are on); or it no longer does (`None`). Nothing was lost, so no
    /// list is needed: its detection there is current again once the lag is back under the
    /// bound. A namespace's lag is its own: other namespaces, and the nodes none of its late
    /// changes are on, stay current.
    pub(crate) fn lagging(
        &self,
        target: &Target,
        rs: &CompiledRuleSet,
        namespace: Option<&str>,
        lag: Option<LagSaid>,
    ) {
        let covered = match namespace {
            Some(ns) => Some([ns.to_owned()].into()),
            None => covered(rs),
        };
        self.targets
            .lagging(target, (&rs.info.name, namespace), covered, lag);
    }

    /// `ruleset` (`spec`) does not compile (`error`, its first problem): none of its rules run,
    /// and every gate it could put an operation in is Unknown until a new generation compiles
    /// (or it is deleted).
    pub(crate) fn invalid(&self, ruleset: &str, spec: &crate::ruleset::RuleSetSpec, error: String) {
        self.targets
            .invalid(ruleset, spec.target.clone(), Reach::of_spec(spec), error);
    }

    /// The rulesets known not to compile.
    pub(crate) fn invalid_rulesets(&self) -> Vec<String> {
        self.targets.invalid_rulesets()
    }

    /// A ruleset was reloaded (a new generation) or deleted: what was known of it (its
    /// suspension, its skipped objects, its dropped events, that it did not compile) is
    /// forgotten.
    pub(crate) fn ruleset_reset(&self, ruleset: &str) {
        self.rulesets.reset(ruleset);
        self.targets.ruleset_reset(ruleset);
    }

    /// Whether `ruleset`'s rules are suspended in `namespace` (`None`: for cluster-scoped
    /// subjects), until it is reset by a new generation.
    pub(crate) fn is_suspended(&self, ruleset: &str, namespace: Option<&str>) -> bool {
        self.rulesets
            .is_suspended(ruleset, &namespace.map(str::to_owned))
    }
}

/// The read side of [`Health`]: what the API, the gates and the rulesets' status ask.
#[derive(Clone, Debug, Default)]
pub(crate) struct HealthReader(Arc<Health>);

impl HealthReader {
    /// Where detection feeding operations in `namespace` (`None`: anywhere) is not current, and
    /// why (see [`TargetHealth::stale`]).
    pub(crate) fn stale(&self, namespace: Option<&str>) -> Vec<Stale> {
        self.0.targets.stale(namespace)
    }

    /// The targets that feed the maintenance gate of `scope` and are not current.
    pub(crate) fn stale_for_gate(&self, scope: &GateScope) -> Vec<Stale> {
        self.0.targets.stale_for_gate(scope)
    }

    /// Whether a ruleset the server knows of declares `component`: the gate of a component
    /// no ruleset declares does not exist.
    pub(crate) fn declares_component(&self, component: &str) -> bool {
        self.0.targets.declares_component(component)
    }

    /// What is known of `ruleset`, for its status.
    pub(crate) fn ruleset(&self, ruleset: &str) -> RuleSetHealth {
        self.0.rulesets.get(ruleset)
    }

    /// Tells `index` whenever what [`HealthReader::stale`] answers, or the initial sync, may
    /// have changed (see [`TargetHealth::report_to`]). Runs for as long as the server.
    pub(crate) async fn report_to(self, feeds: FeedsClock, readiness: Readiness) {
        self.0.targets.report_to(feeds, readiness).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::Blind;
    use crate::evaluate::{Engine, Exceeded};
    use serde_json::json;
    use std::time::Duration;

    fn ruleset(namespaces: &[&str]) -> Arc<CompiledRuleSet> {
        let spec = serde_json::from_value(json!({
            "component": "test",
            "target": {"group": "example.com", "version": "v1", "resource": "things"},
            "namespaces": namespaces,
            "rules": [{"operation": "Busy", "expression": "true"}],
        }))
        .unwrap();
        Arc::new(crate::ruleset::compile(&Engine::new(), "costly", Some(1), &spec).unwrap())
    }

    fn subject(uid: &str) -> Subject {
        Subject::from_object(&json!({
            "apiVersion": "example.com/v1", "kind": "Thing",
            "metadata": {"name": uid, "namespace": "a", "uid": uid},
        }))
        .unwrap()
    }

    /// The ruleset `costly`, in namespace a, its target current; the health and its reader.
    fn costly_in_a() -> (Arc<Health>, HealthReader, Arc<CompiledRuleSet>) {
        let health = Arc::new(Health::default());
        let rs = ruleset(&["a"]);
        health.watching(&rs.target, None);
        health.resolved(&rs.target, true, &[None]);
        health.listed(&rs.target, &None, Timestamp::UNIX_EPOCH);
        let reader = health.reader();
        (health, reader, rs)
    }

    #[test]
    fn a_skipped_object_and_a_suspension_show_on_the_target_and_on_the_ruleset() {
        let (health, reader, rs) = costly_in_a();
        let over = OverBudget {
            place: "rule Busy".into(),
            exceeded: Exceeded::Cost(10),
        };
        let policy = SuspendPolicy {
            after: 2,
            window: Duration::from_secs(60),
        };

        assert!(!health.over_budget(&rs, (&subject("u1"), None), &over, false, &policy));
        assert_eq!(reader.stale(Some("a")).len(), 1);
        assert!(reader.stale(Some("b")).is_empty());
        assert_eq!(reader.ruleset("costly").skipped.len(), 1);

        health.evaluated(&rs, "u1");
        assert!(reader.stale(None).is_empty());
        assert!(reader.ruleset("costly").skipped.is_empty());

        assert!(health.over_budget(&rs, (&subject("u2"), None), &over, false, &policy));
        assert_eq!(
            reader.ruleset("costly").suspended,
            [Some("a".to_string())].into()
        );
        assert!(reader.stale(Some("a")).iter().any(|s| s.reason
            == Blind::Suspended {
                ruleset: "costly".into(),
                namespace: Some("a".into()),
            }));
        assert!(
            reader.stale(Some("b")).is_empty(),
            "another namespace is not suspended"
        );

        health.ruleset_reset("costly");
        assert!(reader.stale(None).is_empty());
        assert!(reader.ruleset("costly").suspended.is_empty());
        assert!(reader.ruleset("costly").skipped.is_empty());
    }

    #[test]
    fn an_undecodable_object_shows_on_the_target_and_on_the_rulesets_that_apply() {
        let (health, reader, rs) = costly_in_a();
        let rulesets = [rs.clone()];
        health.undecodable(
            &rs.target,
            &rulesets,
            ("u1", Some("b")),
            "b/x".into(),
            "deep",
        );
        assert_eq!(reader.stale(Some("b")).len(), 1);
        assert!(
            reader.ruleset("costly").skipped.is_empty(),
            "not its namespace"
        );
        health.undecodable(
            &rs.target,
            &rulesets,
            ("u2", Some("a")),
            "a/y".into(),
            "deep",
        );
        assert_eq!(
            reader
                .ruleset("costly")
                .skipped
                .values()
                .collect::<Vec<_>>(),
            ["a/y: cannot be decoded: deep"]
        );
        health.decoded(&rs.target, "u2");
        health.object_gone(&rs.target, "u1");
        assert!(reader.stale(None).is_empty());
    }
}
