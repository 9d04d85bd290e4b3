//! Detection, between the watchers and the index: each object a watcher sees is evaluated by its
//! rulesets on their lanes (`lanes`), within a budget whose repeated excess suspends a ruleset
//! (`suspension`); the results feed the debounce table and its changes the index (`detector`).
//! What detection knows of itself, per target (`target_health`) and per ruleset
//! (`ruleset_health`), is kept in one store (`health`), read by the API's warnings, the
//! maintenance gates and the rulesets' status.

mod detector;
mod health;
mod lanes;
mod over_budget;
mod ruleset_health;
mod suspension;
mod target_health;

pub(crate) use detector::{Detector, Limits};
pub(crate) use health::{Health, HealthReader};
pub(crate) use lanes::Lanes;
pub(crate) use ruleset_health::{RuleSetHealth, WatchState};
pub(crate) use suspension::{DEFAULT_SUSPEND_AFTER, SuspendPolicy};
// Why a target is not current (`Stale::reason`; the API tells what it names to whom).
pub(crate) use target_health::{Blind, LagSaid, Reach, Stale, Stream};
