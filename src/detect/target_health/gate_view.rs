//! The maintenance gates' view of the health store: which blind spots can hide an operation in
//! the gate of a scope ([`Reach`]), where every other question asks about a namespace.

use crate::index::GateScope;

use super::entry::{Entry, Lag, Resolution, SkippedObject};
use super::reach::covers;
use super::{Blind, Namespaces, Stale, TargetHealth};

impl TargetHealth {
    /// The targets that may hide an operation in the maintenance gate of `scope`, and why:
    /// every blind spot of a ruleset that can put an operation in it (see [`super::Reach`]),
    /// and every ruleset reaching it that does not compile.
    pub(in crate::detect) fn stale_for_gate(&self, scope: &GateScope) -> Vec<Stale> {
        let mut out: Vec<Stale> = {
            let targets = self.targets.lock();
            targets
                .iter()
                .filter(|(_, e)| match scope {
                    GateScope::Namespace(ns) => e.feeds(ns),
                    _ => true,
                })
                .flat_map(|(target, e)| {
                    e.blind_for_gate(scope).into_iter().map(|reason| Stale {
                        target: target.clone(),
                        reason,
                    })
                })
                .collect()
        };
        out.extend(self.invalid_reaching(|reach| reach.reaches(scope)));
        out
    }

    /// Whether a ruleset the server knows of declares `component` (its gate exists).
    pub(in crate::detect) fn declares_component(&self, component: &str) -> bool {
        self.targets.lock().values().any(|e| {
            e.reach
                .as_ref()
                .is_some_and(|r| r.values().any(|r| r.component == component))
        }) || self
            .invalid
            .lock()
            .values()
            .any(|i| i.reach.component == component)
    }
}

impl Entry {
    /// Whether `ruleset` (`None`: any of this target's) can put an operation in the gate of
    /// `scope`. A ruleset the entry has no reach for counts as reaching every gate.
    fn reaches(&self, ruleset: Option<&str>, scope: &GateScope) -> bool {
        let Some(reach) = &self.reach else {
            return true;
        };
        match ruleset {
            Some(name) => reach.get(name).is_none_or(|r| r.reaches(scope)),
            None => reach.values().any(|r| r.reaches(scope)),
        }
    }

    /// Every reason why this target may hide an operation in the gate of `scope`: any blind
    /// spot of a ruleset that reaches it, unless the blind spot is known to be elsewhere.
    fn blind_for_gate(&self, scope: &GateScope) -> Vec<Blind> {
        let mut out = Vec::new();
        let namespace = match scope {
            GateScope::Namespace(ns) => Some(ns.as_str()),
            _ => None,
        };
        if self.reaches(None, scope)
            && let Some(reason) = self.stale_reason(namespace)
        {
            out.push(Blind::NotWatched(reason));
        }
        if self.resolution == Resolution::NotServed {
            return out;
        }
        self.rulesets_blind(
            &mut out,
            // Not node gates: what changes in a suspended namespace is skipped with its nodes.
            |ruleset, place| {
                self.reaches(Some(ruleset), scope)
                    && match scope {
                        GateScope::Node(_) => false,
                        GateScope::Namespace(ns) => place == Some(ns.as_str()),
                        GateScope::Cluster | GateScope::Component(_) => true,
                    }
            },
            |ruleset, covered: &Namespaces| {
                self.reaches(Some(ruleset), scope)
                    && match scope {
                        GateScope::Namespace(ns) => covers(covered, Some(ns)),
                        _ => true,
                    }
            },
            |ruleset, lag| self.reaches(Some(ruleset), scope) && lag.may_be_in(scope),
            |ruleset, o| o.may_be_in(scope) && self.skipper_reaches(ruleset, o, scope),
        );
        out
    }

    /// Whether the ruleset that skips `object` (`None`: it cannot be decoded, so every ruleset
    /// of the target that applies to its namespace) can put an operation in the gate of `scope`.
    fn skipper_reaches(
        &self,
        ruleset: Option<&str>,
        object: &SkippedObject,
        scope: &GateScope,
    ) -> bool {
        match (ruleset, &self.reach) {
            (Some(_), _) | (None, None) => self.reaches(ruleset, scope),
            (None, Some(reach)) => reach
                .values()
                .any(|r| r.reaches(scope) && covers(&r.namespaces, object.namespace.as_deref())),
        }
    }
}

impl Lag {
    /// Whether the changes it holds back can be in the gate of `scope`, for a ruleset that
    /// reaches it: a node's only when one of them is on that node (or their nodes cannot be
    /// known), a namespace's only when it is late there.
    fn may_be_in(&self, scope: &GateScope) -> bool {
        match scope {
            GateScope::Node(node) => self.nodes.as_ref().is_none_or(|n| n.contains(node)),
            GateScope::Namespace(ns) => covers(&self.covered, Some(ns)),
            GateScope::Cluster | GateScope::Component(_) => true,
        }
    }
}

impl SkippedObject {
    /// Whether what it hides can be in the gate of `scope`, for a ruleset that reaches it.
    fn may_be_in(&self, scope: &GateScope) -> bool {
        match scope {
            GateScope::Node(node) => self.nodes.as_ref().is_none_or(|n| n.contains(node)),
            GateScope::Namespace(ns) => self.namespace.as_deref() == Some(ns.as_str()),
            GateScope::Cluster | GateScope::Component(_) => true,
        }
    }
}
