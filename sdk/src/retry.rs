//! When to try again: exponential backoff with jitter, and the server's `Retry-After` when it
//! gives one.

use std::time::Duration;

use rand::Rng;

/// How failed requests are retried: 429 (honouring `Retry-After`), 5xx on reads and token
/// requests, failures to connect, and timeouts of reads. Never any other 4xx.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first (default 3).
    pub max_retries: u32,
    /// Backoff before the first retry (default 250 ms), doubled each time.
    pub initial_backoff: Duration,
    /// Largest backoff (default 8 s).
    pub max_backoff: Duration,
    /// A `Retry-After` longer than this is not waited for: the error comes back with it
    /// (default 60 s).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `attempt + 1`, or `None` when no retry is left (or the
    /// server asks for longer than `max_retry_after`).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        if attempt >= self.max_retries {
            return None;
        }
        if let Some(wait) = retry_after {
            return (wait <= self.max_retry_after).then_some(wait);
        }
        let backoff = self
            .initial_backoff
            .saturating_mul(1u32.checked_shl(attempt).unwrap_or(u32::MAX))
            .min(self.max_backoff);
        // "Equal jitter": half fixed, half random, so clients that failed together spread out
        // and no retry comes sooner than half the backoff.
        let half = backoff / 2;
        let jitter = rand::thread_rng().gen_range(0..=half.as_millis() as u64);
        Some(half + Duration::from_millis(jitter))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_its_jitter_and_stops_after_the_last_retry() {
        let policy = RetryPolicy::default();
        for (attempt, full) in [(0, 250), (1, 500), (2, 1000)] {
            for _ in 0..50 {
                let delay = policy.delay(attempt, None).unwrap().as_millis() as u64;
                assert!((full / 2..=full).contains(&delay), "{attempt}: {delay}");
            }
        }
        assert_eq!(policy.delay(3, None), None);
        let long = RetryPolicy {
            max_retries: 40,
            ..policy
        };
        assert!(long.delay(39, None).unwrap() <= Duration::from_secs(8));
    }

    #[test]
    fn retry_after_is_honoured_up_to_its_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.delay(0, Some(Duration::from_secs(2))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(policy.delay(0, Some(Duration::from_secs(61))), None);
        assert_eq!(RetryPolicy::none().delay(0, Some(Duration::ZERO)), None);
    }
}
