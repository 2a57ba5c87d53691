//! Every random draw the library makes, in one place: lock values, the
//! first digit of a plain value, retry jitter and back-off. Normally the
//! thread-local CSPRNG (`rand::rng()`, seeded by the operating system);
//! under the simulator (feature `sim`) a thread may install a seeded
//! generator instead, so that a whole run replays from one seed.

/// Fills `bytes` with random bytes.
pub(crate) fn fill(bytes: &mut [u8]) {
    #[cfg(feature = "sim")]
    if seeded::fill(bytes) {
        return;
    }
    rand::fill(bytes);
}

/// A number in `[0, 1)`.
pub(crate) fn unit() -> f64 {
    #[cfg(feature = "sim")]
    if let Some(unit) = seeded::unit() {
        return unit;
    }
    rand::random::<f64>()
}

/// A number in `0..n` (`n` > 0).
pub(crate) fn below(n: usize) -> usize {
    #[cfg(feature = "sim")]
    if let Some(unit) = seeded::unit() {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        return ((unit * n as f64) as usize).min(n.saturating_sub(1));
    }
    rand::random_range(0..n)
}

/// A seeded generator for the current thread (feature `sim`): SplitMix64,
/// which is fast, has a full 2^64 period and needs no dependency. Not for
/// anything but simulation: its values are predictable by design.
#[cfg(feature = "sim")]
pub(crate) mod seeded {
    use std::cell::Cell;

    thread_local! {
        static STATE: Cell<Option<u64>> = const { Cell::new(None) };
    }

    /// Installs a generator seeded with `seed` on this thread until the
    /// returned value is dropped.
    pub(crate) fn install(seed: u64) -> Installed {
        STATE.with(|s| s.set(Some(seed)));
        Installed(())
    }

    /// Removes the generator of [`install`] when dropped.
    pub(crate) struct Installed(());

    impl Drop for Installed {
        fn drop(&mut self) {
            STATE.with(|s| s.set(None));
        }
    }

    /// The next 64 bits, if a generator is installed.
    pub(crate) fn next() -> Option<u64> {
        STATE.with(|s| {
            let state = s.get()?.wrapping_add(0x9e37_79b9_7f4a_7c15);
            s.set(Some(state));
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            Some(z ^ (z >> 31))
        })
    }

    pub(super) fn fill(bytes: &mut [u8]) -> bool {
        for chunk in bytes.chunks_mut(8) {
            let Some(word) = next() else {
                return false;
            };
            chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
        }
        true
    }

    pub(super) fn unit() -> Option<f64> {
        #[allow(clippy::cast_precision_loss)]
        next().map(|word| (word >> 11) as f64 / (1u64 << 53) as f64)
    }
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_thread_draws_the_same_values_again_and_the_os_generator_after() {
        let draw = || {
            let _seeded = seeded::install(7);
            let mut bytes = [0u8; 20];
            fill(&mut bytes);
            (bytes, unit(), below(6))
        };
        let first = draw();
        assert_eq!(first, draw());
        assert!((0.0..1.0).contains(&first.1));
        assert!(first.2 < 6);
        let mut a = [0u8; 20];
        let mut b = [0u8; 20];
        fill(&mut a);
        fill(&mut b);
        assert_ne!(
            a, b,
            "without a seeded generator the draws are the OS-seeded CSPRNG's"
        );
    }
}
