//! Human durations on the command line: `500ms`, `30s`, `2m`, `1h`.

use std::time::Duration;

/// Parses a whole number followed by a unit: `ms`, `s`, `m` or `h`
/// (e.g. `500ms`, `30s`, `2m`). `0` alone is accepted as zero.
///
/// # Errors
///
/// A message naming the bad input and the accepted forms.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    let hint = "use a whole number and a unit: 500ms, 30s, 2m, 1h";
    if number.is_empty() {
        return Err(format!("{text:?} is not a duration: {hint}"));
    }
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is too large a duration"))?;
    let millis_per_unit: u64 = match unit {
        "" if n == 0 => 0,
        "" => return Err(format!("{text:?} has no unit: {hint}")),
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => return Err(format!("{text:?} has an unknown unit {other:?}: {hint}")),
    };
    n.checked_mul(millis_per_unit)
        .map(Duration::from_millis)
        .ok_or_else(|| format!("{text:?} is too large a duration"))
}

/// Shows a duration the way [`parse`] reads it, rounded to the millisecond:
/// `1.250s`, `80ms`.
pub fn show(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        format!("{ms}ms")
    } else {
        format!("{}.{:03}s", ms / 1_000, ms % 1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_is_understood() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3_600)));
        assert_eq!(parse(" 10s "), Ok(Duration::from_secs(10)));
    }

    #[test]
    fn a_bare_zero_is_zero_but_other_bare_numbers_need_a_unit() {
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        let err = parse("30").unwrap_err();
        assert!(err.contains("no unit"), "{err}");
    }

    #[test]
    fn junk_is_rejected_with_the_accepted_forms() {
        for bad in ["", "s", "-1s", "1.5s", "10 s", "3d", "ms10"] {
            let err = parse(bad).unwrap_err();
            assert!(err.contains("500ms, 30s, 2m"), "{bad}: {err}");
        }
    }

    #[test]
    fn overflow_is_an_error_not_a_wrap() {
        assert!(parse("99999999999999999999s").is_err());
        assert!(parse("18446744073709551615h").is_err());
    }

    #[test]
    fn show_prints_milliseconds_below_a_second_and_seconds_above() {
        assert_eq!(show(Duration::from_millis(80)), "80ms");
        assert_eq!(show(Duration::from_millis(1_250)), "1.250s");
    }
}
