//! The quantiles of durations: what a rule operation's (or a subject's own) last successes say
//! its next operation takes.

use jiff::SignedDuration;

/// The quantiles of a rule operation's or a subject's successful durations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quantiles {
    /// How many durations they are read from: at most a rule operation's last
    /// [`super::WINDOW`] that succeeded, a subject's last [`super::own::OWN_WINDOW`].
    pub count: u64,
    /// Median.
    pub p50: SignedDuration,
    /// 90th percentile.
    pub p90: SignedDuration,
    /// 99th percentile.
    pub p99: SignedDuration,
}

/// The quantiles of durations (ms). The median is the nearest rank (the ⌈n/2⌉-th shortest).
/// The 90th and 99th percentiles are bounds a next duration falls under with at least their
/// probability: the ⌈q·(n+1)⌉-th shortest (the longest when that is past `n`). A next duration
/// from the same distribution is at most the k-th shortest of `n` with probability k/(n+1),
/// whatever the distribution, so the 90th percentile holds at least 90 % of the next ends from 9
/// durations on; with fewer it is the longest, which holds n/(n+1) of them (5 of 6 with 5). The
/// nearest rank (⌈0.9n⌉-th) held ⌈0.9n⌉/(n+1): 83 % with 5 durations, 82 % with 10, 86 % with 20.
pub(crate) fn quantiles_of(ms: impl Iterator<Item = u64>) -> Quantiles {
    let mut sorted: Vec<u64> = ms.collect();
    sorted.sort_unstable();
    let n = sorted.len();
    let nth = |rank: f64| {
        if n == 0 {
            return SignedDuration::ZERO;
        }
        // A rank within 1..=n: in range once clamped.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rank = (rank.ceil() as usize).clamp(1, n);
        SignedDuration::from_millis(i64::try_from(sorted[rank - 1]).unwrap_or(i64::MAX))
    };
    let count = n as f64;
    Quantiles {
        count: n as u64,
        p50: nth(0.5 * count),
        p90: nth(0.9 * (count + 1.0)),
        p99: nth(0.99 * (count + 1.0)),
    }
}
