//! [`NodeClock`]: a simulated node's own wall clock.

use std::time::Duration;

/// A simulated node's own clock, in milliseconds since the Unix epoch:
/// `base + rate * t + offset`, where `t` is the virtual time since the
/// simulation began.
///
/// [`set_rate`](Self::set_rate) keeps the clock continuous (it changes how
/// fast the clock runs from then on); [`jump`](Self::jump) moves it at once.
/// Key expiry, `PTTL`, `TIME` and the uptime in `INFO` all read this clock,
/// as a real server reads its machine's clock: a node whose clock runs at
/// rate 2 lets a key live half as long in virtual time.
///
/// ```
/// use std::time::Duration;
/// use redquorum::testkit::sim::node::NodeClock;
///
/// let mut clock = NodeClock::new(1_000.0);
/// let second = Duration::from_secs(1);
/// assert_eq!(clock.now_ms(second), 2_000.0);
/// clock.set_rate(second, 2.0);
/// assert_eq!(clock.now_ms(2 * second), 4_000.0);
/// clock.jump(-500.0);
/// assert_eq!(clock.now_ms(2 * second), 3_500.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct NodeClock {
    /// The virtual time of the last rate change.
    anchor: Duration,
    /// The clock's reading at `anchor` (jumps included).
    anchor_ms: f64,
    rate: f64,
}

impl NodeClock {
    /// A clock that reads `base_ms` at virtual time zero and runs at rate 1.
    pub fn new(base_ms: f64) -> NodeClock {
        NodeClock {
            anchor: Duration::ZERO,
            anchor_ms: if base_ms.is_finite() { base_ms } else { 0.0 },
            rate: 1.0,
        }
    }

    /// The clock's reading, in ms, at virtual time `now`.
    pub fn now_ms(&self, now: Duration) -> f64 {
        let since = nanos(now) - nanos(self.anchor);
        self.anchor_ms + self.rate * since / 1e6
    }

    /// Moves the clock by `by_ms` at once (negative: back). A value that is
    /// not finite is ignored.
    pub fn jump(&mut self, by_ms: f64) {
        if by_ms.is_finite() {
            self.anchor_ms += by_ms;
        }
    }

    /// From virtual time `now` on, the clock runs at `rate` (1: real time,
    /// 2: twice as fast), continuing from its reading at `now`. A rate that
    /// is negative or not finite is ignored.
    pub fn set_rate(&mut self, now: Duration, rate: f64) {
        if !rate.is_finite() || rate < 0.0 {
            return;
        }
        self.anchor_ms = self.now_ms(now);
        self.anchor = now;
        self.rate = rate;
    }

    /// How fast the clock runs (1: real time).
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The reading at `now` in whole microseconds (what `TIME` answers).
    pub(super) fn now_us(&self, now: Duration) -> i64 {
        let us = (self.now_ms(now) * 1000.0).floor();
        if us.is_finite() { us as i64 } else { 0 }
    }
}

/// `d` in nanoseconds, as `d.as_nanos() as f64` but without 128-bit
/// arithmetic (the oracle reads every node's clock at every tick): the
/// same value, exactly, for any `d` under about 104 days, where both are
/// integers below 2^53.
fn nanos(d: Duration) -> f64 {
    d.as_secs() as f64 * 1e9 + f64::from(d.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nanos_is_as_nanos_as_a_float() {
        for d in [
            Duration::ZERO,
            Duration::from_nanos(1),
            Duration::from_nanos(123_456_789_012),
            Duration::new(86_400 * 100, 999_999_999),
            Duration::new(7, 1),
        ] {
            assert_eq!(nanos(d), d.as_nanos() as f64, "{d:?}");
        }
    }
}
