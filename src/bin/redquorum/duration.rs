//! Human durations on the command line, read by `humantime`: `500ms`,
//! `30s`, `1m30s`, `2h`, `1.5s`.

use std::time::Duration;

/// What every duration error ends with.
const HINT: &str = "use a number and a unit: 500ms, 30s, 2m, 1m30s, 1h";

/// Parses a number with a unit, or several (`500ms`, `30s`, `1m30s`,
/// `2h`, `1.5s`; see `humantime::parse_duration`). `0` alone is zero; any
/// other bare number is refused, since `30` could mean seconds or
/// milliseconds.
///
/// # Errors
///
/// A message naming the bad input and the accepted forms.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?} has no unit: {HINT}"));
    }
    humantime::parse_duration(text).map_err(|e| format!("{text:?} is not a duration ({e}): {HINT}"))
}

/// Shows a duration rounded to the millisecond: `1.250s`, `80ms`.
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
    fn units_and_their_combinations_are_understood() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3_600)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7_200)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1_500)));
        assert_eq!(parse(" 10s "), Ok(Duration::from_secs(10)));
    }

    #[test]
    fn a_bare_zero_is_zero_but_other_bare_numbers_need_a_unit() {
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        let err = parse("30").unwrap_err();
        assert!(err.contains("\"30\" has no unit"), "{err}");
        assert!(err.contains("500ms, 30s, 2m"), "{err}");
    }

    #[test]
    fn junk_is_rejected_with_the_accepted_forms() {
        for bad in ["", "s", "-1s", "3 parsecs", "ms10", "forever"] {
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
