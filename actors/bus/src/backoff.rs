//! The one exponential back-off every Shoal retry uses: reconnecting loops (the API client,
//! watches, informer lists), the work queue's per-key delays and the Job controller's pod
//! retries. The arithmetic is `backon`'s; this type only fixes the shape Shoal wants (no
//! jitter, no limit on attempts) and adds the n-th delay as a value, because two users count
//! failures rather than iterate: the work queue, which resets a key's count on success, and
//! the Job controller, whose count lives in the Job's status and so survives a restart.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// Delays of `base`, doubling on each failure, capped at `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(Duration::from_millis(50), Duration::from_secs(60))
    }
}

impl Backoff {
    pub const fn new(base: Duration, max: Duration) -> Self {
        Backoff { base, max }
    }

    /// The delays before each retry, endless: for a loop that retries until it succeeds.
    pub fn delays(&self) -> impl Iterator<Item = Duration> + Send {
        ExponentialBuilder::new()
            .with_min_delay(self.base)
            .with_max_delay(self.max)
            .without_max_times()
            .build()
    }

    /// The delay after `failures` earlier failures (0: the first retry waits `base`).
    pub fn delay(&self, failures: u32) -> Duration {
        // Past 64 doublings any base has reached any cap; no need to walk further.
        let n = usize::try_from(failures.min(64)).unwrap_or(64);
        self.delays().nth(n).unwrap_or(self.max).min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_from_base_up_to_max() {
        let b = Backoff::new(Duration::from_millis(20), Duration::from_millis(500));
        // backon multiplies in f32 seconds: a delay may be a few nanoseconds short.
        let ms = |d: Duration| (d.as_secs_f64() * 1e3).round() as u64;
        let first: Vec<u64> = b.delays().take(7).map(ms).collect();
        assert_eq!(first, vec![20, 40, 80, 160, 320, 500, 500]);
        assert_eq!(ms(b.delay(0)), 20);
        assert_eq!(ms(b.delay(3)), 160);
        assert_eq!(b.delay(u32::MAX), Duration::from_millis(500));
    }
}
