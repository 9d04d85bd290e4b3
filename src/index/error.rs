//! Why a watch can't start at the requested resourceVersion.

/// Both map to an in-stream `410 Expired` for watch requests (clients then relist).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WatchError {
    /// Events after `requested` are no longer in the ring; `oldest` is the oldest RV a watch
    /// can still resume from.
    #[error("too old resource version: {requested} ({oldest})")]
    Expired {
        /// The resourceVersion the client asked to resume from.
        requested: u64,
        /// The oldest resourceVersion a watch can resume from now.
        oldest: u64,
    },
    /// `requested` is newer than anything this server has produced (e.g. an RV from another
    /// replica or a clock that went back).
    #[error("too large resource version: {requested}, current: {current}")]
    TooLarge {
        /// The resourceVersion the client asked to resume from.
        requested: u64,
        /// The newest resourceVersion this server has produced.
        current: u64,
    },
}
