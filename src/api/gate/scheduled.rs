//! A gate's scheduled operations (`status.scheduled`, `status.scheduledThrough`): what the rules
//! announce in its scope before it starts (see [`crate::schedule`]). A node's gate has none: a
//! scheduled operation's node is not known before it starts.

use ifo_model::{GateScheduled, GateSubject};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::index::GateScope;
use crate::operation::Subject;
use crate::schedule::{Schedules, Unknown, Upcoming};

/// The scheduled operations of a gate's scope: soonest first, every start up to `through`.
#[derive(Debug, Default)]
pub(crate) struct Scheduled {
    pub(crate) listed: Vec<GateScheduled>,
    /// `None` for a node's gate, which lists none.
    pub(crate) through: Option<Timestamp>,
}

/// The scheduled operations of `scope` after `now`.
pub(super) fn of_scope(schedules: &Schedules, scope: &GateScope, now: Timestamp) -> Scheduled {
    let upcoming = match scope {
        GateScope::Node(_) => return Scheduled::default(),
        GateScope::Cluster => schedules.upcoming(now, |_, _| true),
        GateScope::Namespace(ns) => schedules.upcoming(now, |n, _| n == Some(ns.as_str())),
        GateScope::Component(c) => schedules.upcoming(now, |_, component| component == c),
    };
    // Those whose next start is not known first: they take every window away.
    let unknown = upcoming.unknown.iter().map(not_known);
    Scheduled {
        listed: unknown.chain(upcoming.listed.iter().map(served)).collect(),
        through: Some(upcoming.through),
    }
}

fn gate_subject(subject: &Subject) -> GateSubject {
    GateSubject {
        kind: subject.kind.clone(),
        name: subject.name.clone(),
        namespace: subject.namespace.clone(),
    }
}

fn not_known(u: &Unknown) -> GateScheduled {
    GateScheduled {
        subject: gate_subject(u.subject()),
        operation: u.operation().to_owned(),
        component: u.component().to_owned(),
        rule_set: u.ruleset().to_owned(),
        message: format!("when it next starts is not known: {}", u.why()),
        ..GateScheduled::default()
    }
}

fn served(u: &Upcoming) -> GateScheduled {
    let subject = u.subject();
    let (schedule, time_zone) = match u.schedule() {
        Some((s, tz)) => (Some(s.to_owned()), Some(tz.to_owned())),
        None => (None, None),
    };
    let after =
        |d: Option<jiff::SignedDuration>| d.and_then(|d| u.start.checked_add(d).ok()).map(Time);
    GateScheduled {
        subject: gate_subject(subject),
        operation: u.operation().to_owned(),
        component: u.component().to_owned(),
        rule_set: u.ruleset().to_owned(),
        expected_start: Some(Time(u.start)),
        expected_end: after(u.p50),
        expected_end_p90: after(u.p90),
        schedule,
        time_zone,
        message: String::new(),
    }
}
