//! The names of one kind the inventory holds, and whether they are current.

use std::collections::HashMap;

use super::{Kept, Kind, Presence, Sync};

/// The names of one kind (with what is [`Kept`] of them) and whether they are current. Each change says
/// whether it changed anything a gate shows: which names exist, and whether they are current.
#[derive(Debug, Default)]
pub(super) struct Names {
    pub(super) names: HashMap<Box<str>, Kept>,
    pub(super) sync: Sync,
}

impl Names {
    pub(super) fn presence(&self, kind: Kind, name: &str) -> Presence {
        if self.names.contains_key(name) {
            return Presence::Present;
        }
        match &self.sync {
            Sync::Listed => Presence::Absent,
            Sync::NotListed => Presence::Unknown(format!(
                "the cluster's {} have not been listed yet",
                kind.plural()
            )),
            Sync::Failing(why) => Presence::Unknown(format!(
                "the watch of the cluster's {} is failing: {why}",
                kind.plural()
            )),
        }
    }

    /// A list completed with `names`: they replace those held.
    pub(super) fn listed(&mut self, mut names: HashMap<Box<str>, Kept>) -> bool {
        let mut changed = self.sync != Sync::Listed || self.names.len() != names.len();
        for (name, kept) in &mut names {
            changed |= match self.names.get(name) {
                Some(previous) => kept.follows(previous),
                None => true,
            };
        }
        self.names = names;
        self.sync = Sync::Listed;
        changed
    }

    /// `name` was created or changed.
    pub(super) fn applied(&mut self, name: Box<str>, mut kept: Kept) -> bool {
        let changed = match self.names.get(&name) {
            Some(previous) => kept.follows(previous),
            None => true,
        };
        self.names.insert(name, kept);
        changed
    }

    /// `name` was deleted.
    pub(super) fn deleted(&mut self, name: &str) -> bool {
        self.names.remove(name).is_some()
    }

    /// The list or watch failed: not synced until a list completes again.
    pub(super) fn failed(&mut self, why: String) -> bool {
        let failing = Sync::Failing(why);
        let changed = self.sync != failing;
        self.sync = failing;
        changed
    }
}
