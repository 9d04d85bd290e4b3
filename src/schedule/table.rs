//! What each object's rules announce: per ruleset, subject and operation, the schedule or time
//! the object last gave. Written by the detector on every event of an object (one entry per
//! rule with a `schedule` whose object announces something), and on its deletion, a relist, a
//! ruleset's removal or change; bounded, as the index is, by the objects of the loaded rulesets.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use jiff::Timestamp;
use parking_lot::{Mutex, RwLock};

use super::cron::{CronError, CronSchedule};
use crate::evaluate::{EvalError, NextStart};
use crate::history::Durations;
use crate::operation::Subject;
use crate::ruleset::CompiledRuleSet;

/// A subject's announced operation: (subject uid, operation).
type Key = (String, String);

/// The announced operations of one ruleset.
type Table = HashMap<Key, Arc<Entry>>;

/// When an announced operation starts.
#[derive(Debug, Clone)]
pub(super) enum When {
    /// At each time of a schedule.
    Cron(Box<CronSchedule>),
    /// Once, at a time.
    At(Timestamp),
    /// Not known: the object's schedule cannot be read, or the rule's schedule failed on it
    /// (why). Nothing can be promised past now in its scopes.
    Unknown(String),
}

/// One announced operation, and what names it.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) ruleset: String,
    pub(super) component: String,
    pub(super) operation: String,
    pub(super) subject: Subject,
    pub(super) when: When,
    /// Whose learned durations it is expected to take: (ruleset, operation).
    pub(super) durations_of: (String, String),
    /// The first start after the time it was last asked for, kept until that time passes (a
    /// schedule is read once per run, not once per request).
    next: Mutex<Option<(Timestamp, Option<Timestamp>)>>,
}

impl Entry {
    /// Whose own durations its runs take (see `history::Durations::own`): its subject's, by
    /// uid, when they are its own rule's operations; else, when the rule that detects them
    /// keeps theirs under the object a `durationsBy` label names (a Velero Backup its
    /// Schedule), those kept under its subject's name; else none (its runs take that rule's).
    pub(super) fn own_key(&self, durations: &Durations) -> Option<String> {
        let (ruleset, operation) = &self.durations_of;
        if *ruleset == self.ruleset && *operation == self.operation {
            Some(self.subject.uid.clone())
        } else {
            durations.keyed_by_label(ruleset, operation).then(|| {
                crate::history::named_key(self.subject.namespace.as_deref(), &self.subject.name)
            })
        }
    }

    /// Its first start after `now`, if any.
    pub(super) fn next_after(&self, now: Timestamp) -> Option<Timestamp> {
        match &self.when {
            When::At(t) => (*t > now).then_some(*t),
            When::Unknown(_) => None,
            When::Cron(c) => {
                let mut cached = self.next.lock();
                if let Some((asked, next)) = *cached
                    && asked <= now
                    && next.is_none_or(|n| n > now)
                {
                    return next;
                }
                let next = c.next_after(now);
                *cached = Some((now, next));
                next
            }
        }
    }
}

/// The announced operations of every loaded ruleset, and the durations they are expected to
/// take. Cheap to clone: one table.
#[derive(Clone, Default)]
pub struct Schedules {
    by_ruleset: Arc<RwLock<HashMap<String, Table>>>,
    pub(super) durations: Arc<Durations>,
}

impl Schedules {
    /// An empty table whose operations take what `durations` learned.
    pub fn new(durations: Arc<Durations>) -> Schedules {
        Schedules {
            by_ruleset: Default::default(),
            durations,
        }
    }

    /// What `rs`'s rules announced on `subject` (`starts`: the evaluation's, in rule order):
    /// the entry of each rule with a schedule set, replaced or dropped (nothing announced); an
    /// object whose schedule cannot be read, or on which the schedule failed, announces a start
    /// that is not known. Returns, per operation, the schedules the object gives that cannot be
    /// read. Rules without a schedule cost nothing here (a reloaded ruleset's rules that lost
    /// theirs are dropped then: see [`Schedules::retain_operations`]).
    pub fn observe(
        &self,
        rs: &CompiledRuleSet,
        subject: &Subject,
        starts: &[Option<Result<NextStart, EvalError>>],
    ) -> Vec<(String, CronError)> {
        let mut unreadable = Vec::new();
        let mut found: Vec<(String, Option<When>, usize)> = Vec::new();
        for (i, start) in starts.iter().enumerate() {
            let Some(start) = start else { continue };
            let operation = rs.operations[i].clone();
            let when = match start {
                Ok(NextStart::Cron {
                    schedule,
                    time_zone,
                    from,
                }) => match CronSchedule::parse(schedule, time_zone, *from) {
                    Ok(c) => Some(When::Cron(Box::new(c))),
                    Err(e) => {
                        let why = e.to_string();
                        unreadable.push((operation.clone(), e));
                        Some(When::Unknown(why))
                    }
                },
                Ok(NextStart::At(t)) => Some(When::At(*t)),
                Ok(NextStart::Nothing) => None,
                // Reported with the rule's errors; what it announces is not known.
                Err(e) => Some(When::Unknown(format!("its schedule failed: {e}"))),
            };
            found.push((operation, when, i));
        }
        if found.is_empty()
            || found.iter().all(|(_, when, _)| when.is_none())
                && !self.by_ruleset.read().contains_key(&rs.info.name)
        {
            return unreadable;
        }
        // Whose own durations the new or changed entries' runs take: kept from their first
        // success on.
        let mut announced = Vec::new();
        let mut tables = self.by_ruleset.write();
        let table = tables.entry(rs.info.name.clone()).or_default();
        for (operation, when, i) in found {
            let key = (subject.uid.clone(), operation.clone());
            match when {
                Some(when) => {
                    let previous = table.get(&key);
                    let unchanged = previous.is_some_and(|e| {
                        e.subject == *subject
                            && same_when(&e.when, &when)
                            && e.durations_of == rs.durations_of[i]
                    });
                    if !unchanged {
                        let entry = Entry {
                            ruleset: rs.info.name.clone(),
                            component: rs.info.component.clone(),
                            operation,
                            subject: subject.clone(),
                            when,
                            durations_of: rs.durations_of[i].clone(),
                            next: Mutex::new(None),
                        };
                        announced.extend(entry.own_key(&self.durations));
                        table.insert(key, Arc::new(entry));
                    }
                }
                None => {
                    table.remove(&key);
                }
            }
        }
        if table.is_empty() {
            tables.remove(&rs.info.name);
        }
        drop(tables);
        for key in announced {
            self.durations.announced(&key);
        }
        unreadable
    }

    /// The object of uid `uid` was deleted: `ruleset`'s rules announce nothing on it, and the
    /// durations kept under its name (its backups', for a Velero Schedule) go with it.
    pub(crate) fn subject_deleted(&self, ruleset: &str, uid: &str) {
        let gone = self.retain(ruleset, |(u, _), _| u != uid);
        self.forget_named(&gone);
    }

    /// A relist of `namespace` (`None`: all) found only `present` (uids): the others are gone,
    /// as if deleted.
    pub(crate) fn resync(&self, ruleset: &str, namespace: Option<&str>, present: &HashSet<String>) {
        let gone = self.retain(ruleset, |(uid, _), e| {
            present.contains(uid)
                || namespace.is_some_and(|ns| e.subject.namespace.as_deref() != Some(ns))
        });
        self.forget_named(&gone);
    }

    /// The durations kept under the names of `gone` (deleted objects), where their runs took
    /// those.
    fn forget_named(&self, gone: &[Arc<Entry>]) {
        for entry in gone {
            if let Some(key) = entry.own_key(&self.durations)
                && key != entry.subject.uid
            {
                self.durations.subject_deleted(&key);
            }
        }
    }

    /// `ruleset` was deleted or became invalid.
    pub(crate) fn ruleset_removed(&self, ruleset: &str) {
        self.by_ruleset.write().remove(ruleset);
    }

    /// `ruleset` now has a schedule on the rules of `operations` only.
    pub(crate) fn retain_operations(&self, ruleset: &str, operations: &[String]) {
        self.retain(ruleset, |(_, op), _| operations.contains(op));
    }

    /// Keeps the entries of `ruleset` that `keep` takes; returns the others.
    fn retain(&self, ruleset: &str, keep: impl Fn(&Key, &Entry) -> bool) -> Vec<Arc<Entry>> {
        let mut tables = self.by_ruleset.write();
        let mut removed = Vec::new();
        if let Some(table) = tables.get_mut(ruleset) {
            table.retain(|k, e| {
                let kept = keep(k, e);
                if !kept {
                    removed.push(e.clone());
                }
                kept
            });
            if table.is_empty() {
                tables.remove(ruleset);
            }
        }
        removed
    }

    /// Every entry `includes` takes, as (its namespace, its component) say.
    pub(super) fn entries(&self, includes: impl Fn(Option<&str>, &str) -> bool) -> Vec<Arc<Entry>> {
        self.by_ruleset
            .read()
            .values()
            .flat_map(|t| t.values())
            .filter(|e| includes(e.subject.namespace.as_deref(), &e.component))
            .cloned()
            .collect()
    }
}

fn same_when(a: &When, b: &When) -> bool {
    match (a, b) {
        (When::At(a), When::At(b)) => a == b,
        (When::Cron(a), When::Cron(b)) => a.same_as(b),
        (When::Unknown(a), When::Unknown(b)) => a == b,
        _ => false,
    }
}
