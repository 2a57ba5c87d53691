//! Numbers as redis-server reads and writes them: `string2ll` (strict
//! decimal integers), `%.17g` (a Lua number passed to `redis.call`), and
//! the C cast of a Lua number to a reply integer.

/// A decimal integer exactly as Redis's `string2ll` accepts it: an
/// optional `-`, no `+`, no spaces, no leading zeros, within `i64`.
pub(super) fn parse_i64(bytes: &[u8]) -> Option<i64> {
    if bytes == b"0" {
        return Some(0);
    }
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if negative {
        if value > i64::MIN.unsigned_abs() {
            return None;
        }
        Some(0i64.wrapping_sub_unsigned(value))
    } else {
        i64::try_from(value).ok()
    }
}

/// A Lua number as a reply integer: C's `(long long)` cast on x86-64
/// (truncation toward zero; NaN and out-of-range values give `i64::MIN`).
pub(super) fn lua_to_i64(n: f64) -> i64 {
    // 2^63 as an f64: values at or above it do not fit.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if n.is_nan() || !(-LIMIT..LIMIT).contains(&n) {
        i64::MIN
    } else {
        // In range: `as` truncates toward zero, as the C cast does.
        n as i64
    }
}

/// `n` formatted as C's `printf("%.17g", n)`, which Redis 7.0 uses for a
/// Lua number given to `redis.call`.
pub(super) fn format_g17(n: f64) -> String {
    if n.is_nan() {
        return if n.is_sign_negative() { "-nan" } else { "nan" }.to_owned();
    }
    if n.is_infinite() {
        return if n < 0.0 { "-inf" } else { "inf" }.to_owned();
    }
    if n == 0.0 {
        return if n.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    if n.fract() == 0.0 && n.abs() < 1e17 {
        // Exact: an integral f64 below 1e17 fits in i64.
        return format!("{}", n as i64);
    }
    // 17 significant digits, correctly rounded: d.dddddddddddddddde<exp>.
    let scientific = format!("{:.16e}", n.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if n < 0.0 { "-" } else { "" };
    if (-4..17).contains(&exponent) {
        let fixed = if exponent >= 0 {
            let split = usize::try_from(exponent + 1).unwrap_or(0).min(digits.len());
            format!("{}.{}", &digits[..split], &digits[split..])
        } else {
            let zeros = "0".repeat(usize::try_from(-exponent - 1).unwrap_or(0));
            format!("0.{zeros}{digits}")
        };
        format!("{sign}{}", trim_fraction(&fixed))
    } else {
        let mantissa = format!("{}.{}", &digits[..1], &digits[1..]);
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{sign}{}e{exp_sign}{:02}",
            trim_fraction(&mantissa),
            exponent.unsigned_abs()
        )
    }
}

/// `1.500` → `1.5`, `2.000` → `2` (what `%g` does to its fraction).
fn trim_fraction(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_parse_as_string2ll_does() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-5"), Some(-5));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b"01"[..],
            b"+1",
            b" 1",
            b"-0",
            b"-",
            b"",
            b"1.5",
            b"9223372036854775808",
            b"1a",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn numbers_format_as_printf_g17() {
        // Each pair as redis-server 7.0.15 stored it from `redis.call('set', k, n)`.
        let cases = [
            (1.5, "1.5"),
            (0.1, "0.10000000000000001"),
            (1e20, "1e+20"),
            (1_700_000_000_123.0, "1700000000123"),
            (-0.0, "-0"),
            (f64::INFINITY, "inf"),
            (123_456_789_012_345_678.0, "1.2345678901234568e+17"),
            (3.0, "3"),
            (0.0001, "0.0001"),
            (1e-5, "1.0000000000000001e-05"),
            (-2.5, "-2.5"),
        ];
        for (n, text) in cases {
            assert_eq!(format_g17(n), text, "{n}");
        }
    }

    #[test]
    fn lua_numbers_truncate_like_the_c_cast() {
        assert_eq!(lua_to_i64(3.99), 3);
        assert_eq!(lua_to_i64(-3.99), -3);
        assert_eq!(lua_to_i64(1.5e20), i64::MIN);
        assert_eq!(lua_to_i64(f64::NAN), i64::MIN);
        assert_eq!(lua_to_i64(f64::INFINITY), i64::MIN);
    }
}
