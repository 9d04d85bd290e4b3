//! What the server knows of its own data for one scope: the initial sync, the feeds' (watched
//! targets') state, whether the scope's existence is known; read before and after the scope's
//! operations, so that a verdict never rests on half a list.

use crate::detect::{HealthReader, Stale};
use crate::index::GateScope;
use crate::readiness::Readiness;

/// What the server knows of its own data, for one scope.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Feeds {
    /// The initial sync is done.
    pub synced: bool,
    /// The targets feeding the scope that are not current.
    pub stale: Vec<Stale>,
    /// Why the server cannot tell whether the scope exists (it has not listed the cluster's
    /// nodes or namespaces yet, or their watch fails); `None` when it can.
    pub existence_unknown: Option<String>,
}

/// What the server knew of its feeds before a verdict's operations were read from the index.
///
/// The writers publish what a list brought before they say its target is current, so operations
/// read while a target was not yet current may be half of its list even if the target is current
/// by the time the verdict is judged: what went current in between counts as stale for that
/// verdict (for every scope, as which scopes a target feeds is known only of its present state).
/// The index's next `FeedsChanged` event brings the verdict up to date.
pub(crate) struct FeedsBefore {
    synced: bool,
    stale: Vec<Stale>,
}

/// What went current while the operations were read (see [`FeedsBefore`]).
pub(crate) struct Meanwhile {
    synced: bool,
    recovered: Vec<Stale>,
}

impl FeedsBefore {
    pub(crate) fn read(targets: &HealthReader, readiness: &Readiness) -> FeedsBefore {
        FeedsBefore {
            synced: readiness.is_synced(),
            stale: targets.stale(None),
        }
    }

    /// Once the operations are read.
    pub(crate) fn meanwhile(self, targets: &HealthReader) -> Meanwhile {
        // A target still stale, for whatever reason now, did not go current: a reason that
        // changes while it stays blind (one failed list, then another) is not a recovery.
        let recovered = if self.stale.is_empty() {
            Vec::new()
        } else {
            let now = targets.stale(None);
            self.stale
                .into_iter()
                .filter(|s| !now.iter().any(|n| n.target == s.target))
                .collect()
        };
        Meanwhile {
            synced: self.synced,
            recovered,
        }
    }
}

impl Feeds {
    /// The facts for `scope`: it depends on the targets whose rulesets can put operations in
    /// it (see [`HealthReader::stale_for_gate`]), and on what went current while its
    /// operations were read.
    pub(crate) fn of(
        scope: &GateScope,
        targets: &HealthReader,
        readiness: &Readiness,
        meanwhile: &Meanwhile,
    ) -> Feeds {
        let mut stale = targets.stale_for_gate(scope);
        stale.extend(
            meanwhile
                .recovered
                .iter()
                .filter(|s| !stale.contains(s))
                .cloned()
                .collect::<Vec<_>>(),
        );
        Feeds {
            synced: meanwhile.synced && readiness.is_synced(),
            stale,
            existence_unknown: None,
        }
    }

    /// Whether the server vouches for the scope: synced, every feed current, its existence
    /// known.
    pub(crate) fn is_current(&self) -> bool {
        self.synced && self.stale.is_empty() && self.existence_unknown.is_none()
    }
}
