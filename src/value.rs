//! Lock values: one fresh random value per attempt, and the hold ids of
//! reentrant holds.

use crate::error::{Error, Result};

/// Bytes of randomness in a lock value (160 bits).
const VALUE_BYTES: usize = 20;

/// A fresh value for one attempt: 160 bits from the thread-local CSPRNG
/// (`rand::rng()`: ChaCha, seeded from the operating system once per
/// thread and reseeded as it goes), hex-encoded. A value must be unique
/// (a late reply to one attempt never counts for the next) and
/// unguessable (nobody else can release or extend our lock); 160 bits of
/// a CSPRNG give both, without a `getrandom` system call per attempt.
pub(crate) fn fresh() -> String {
    let mut bytes = [0u8; VALUE_BYTES];
    crate::rng::fill(&mut bytes);
    let mut hex = String::with_capacity(VALUE_BYTES * 2);
    for byte in bytes {
        hex.push(char::from(HEX[usize::from(byte >> 4)]));
        hex.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    hex
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// The first characters of every reentrant hold id. Plain lock values are
/// lowercase hex and never contain it.
pub(crate) const HOLD_ID_MARK: &str = "r:";

/// A fresh hold id: the mark, then a fresh random value.
pub(crate) fn hold_id() -> String {
    format!("{HOLD_ID_MARK}{}", fresh())
}

/// True when `value` is a reentrant hold id rather than a plain lock value.
pub(crate) fn is_hold_id(value: &str) -> bool {
    value.starts_with(HOLD_ID_MARK)
}

/// Separates a plain value's random part from the holder label.
pub(crate) const LABEL_MARK: char = '.';

/// Longest holder label, in bytes.
pub(crate) const MAX_LABEL: usize = 200;

/// The first digit of a plain lock value: an uppercase hex letter, which
/// no value of an earlier version starts with (theirs are lowercase). With
/// the rest of the grammar ([`MARKABLE_LUA`]) it tells a waiter that the
/// holder reads the [`AWAITED`] mark.
const FIRST_DIGITS: &[u8; 6] = b"ABCDEF";

/// A fresh plain lock value, 40 hex digits (the first an uppercase letter,
/// see [`FIRST_DIGITS`]: 158.6 bits of randomness), carrying `label` after
/// the random part, for [`Redlock::inspect`](crate::Redlock::inspect) to
/// show.
pub(crate) fn fresh_labelled(label: Option<&str>) -> String {
    let mut value = fresh();
    let first = FIRST_DIGITS[crate::rng::below(FIRST_DIGITS.len())];
    value.replace_range(..1, char::from(first).encode_utf8(&mut [0; 4]));
    if let Some(label) = label {
        value.push(LABEL_MARK);
        value.push_str(label);
    }
    value
}

/// Appended to a plain lock value by a waiter: its release announces
/// itself (see `node::scripts::RELEASE`).
pub(crate) const AWAITED: char = '+';

/// Lua: `markable(v)`, true when the stored value `v` is a plain lock
/// value of this version by its whole grammar, and so may get the
/// [`AWAITED`] mark: one of [`FIRST_DIGITS`], then 39 lowercase hex
/// digits, then nothing, or [`LABEL_MARK`] and a label of 1 to
/// [`MAX_LABEL`] bytes without control characters, not ending with the
/// mark (so a marked value is not markable again). A value of an earlier
/// version (lowercase hex) or of other software sharing the prefix (an
/// uppercase UUID, a base64 token, uppercase hex: anything else) is never
/// changed, so its holder can still release and extend it.
///
/// The digits are checked by a search for the first byte that is not one
/// (a pattern of 39 classes, built and parsed in every call, was most of
/// a marking clean-up's work).
pub(crate) const MARKABLE_LUA: &str = r"
local function markable(v)
  if type(v) ~= 'string' or #v < 40 then return false end
  local first = string.byte(v)
  if first < 65 or first > 70 then return false end
  local other = string.find(v, '[^0-9a-f]', 2)
  if other and other <= 40 then return false end
  local label = string.sub(v, 41)
  if label == '' then return true end
  return string.sub(label, 1, 1) == '.' and #label >= 2 and #label <= 201
    and not string.find(label, '%c') and string.sub(label, -1) ~= '+'
end
";

/// The holder label in a stored plain value, if it carries one (without a
/// waiter's [`AWAITED`] mark).
pub(crate) fn label_of(value: &str) -> Option<&str> {
    let value = value.strip_suffix(AWAITED).unwrap_or(value);
    value.split_once(LABEL_MARK).map(|(_, label)| label)
}

/// Checks a holder label: not empty, at most [`MAX_LABEL`] bytes, no
/// control characters.
pub(crate) fn check_label(label: &str) -> Result<()> {
    if label.is_empty()
        || label.len() > MAX_LABEL
        || label.chars().any(char::is_control)
        || label.ends_with(AWAITED)
    {
        return Err(Error::Config(format!(
            "holder label {label:?} is unusable: use 1 to {MAX_LABEL} bytes without control \
             characters, not ending with '{AWAITED}', e.g. \"host:pid\""
        )));
    }
    Ok(())
}

/// Checks an owner identity: not empty.
pub(crate) fn check_owner(owner: &str) -> Result<()> {
    if owner.is_empty() {
        return Err(Error::InvalidArgument(
            "owner is empty: name the caller that holds the lock (e.g. a task or request id)"
                .to_owned(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_value_is_40_hex_digits_led_by_an_uppercase_letter() {
        for _ in 0..100 {
            let value = fresh_labelled(None);
            assert_eq!(value.len(), 40, "{value}");
            assert!(value.chars().all(|c| c.is_ascii_hexdigit()), "{value}");
            assert!(matches!(value.as_bytes()[0], b'A'..=b'F'), "{value}");
            assert!(
                value[1..].bytes().all(|b| !b.is_ascii_uppercase()),
                "{value}"
            );
        }
    }

    #[test]
    fn the_markable_grammar_follows_the_value_and_label_sizes() {
        // One of FIRST_DIGITS (bytes 65 to 70), then the other hex digits
        // of VALUE_BYTES.
        let size = VALUE_BYTES * 2;
        assert!(
            MARKABLE_LUA.contains(&format!("#v < {size}")),
            "{MARKABLE_LUA}"
        );
        assert!(MARKABLE_LUA.contains(&format!("other <= {size}")));
        assert!(MARKABLE_LUA.contains("first < 65 or first > 70"));
        assert_eq!((FIRST_DIGITS[0], FIRST_DIGITS[5]), (65, 70));
        assert!(MARKABLE_LUA.contains(&format!("string.sub(v, {})", VALUE_BYTES * 2 + 1)));
        // The label mark, then at most MAX_LABEL bytes.
        assert!(MARKABLE_LUA.contains(&format!("#label <= {}", MAX_LABEL + 1)));
        assert!(MARKABLE_LUA.contains(&format!("'{LABEL_MARK}'")));
        assert!(MARKABLE_LUA.contains(&format!("'{AWAITED}'")));
        assert_eq!(String::from_utf8_lossy(FIRST_DIGITS), "ABCDEF");
    }

    #[test]
    fn a_labelled_value_keeps_its_label_apart_from_the_random_part() {
        let value = fresh_labelled(Some("web-3:4242"));
        assert_eq!(label_of(&value), Some("web-3:4242"));
        assert!(!is_hold_id(&value));
        assert_eq!(label_of(&fresh()), None);
        assert!(check_label("").is_err());
        assert!(check_label("a\nb").is_err());
        assert!(check_label("a+").is_err());
        assert_eq!(label_of(&format!("{}.web-3+", fresh())), Some("web-3"));
        assert!(check_label(&"x".repeat(MAX_LABEL + 1)).is_err());
        assert!(check_label("web-3:4242 nightly-export").is_ok());
    }

    #[test]
    fn values_are_160_bit_hex_and_distinct() {
        let a = fresh();
        let b = fresh();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn hold_ids_are_marked_and_plain_values_are_not() {
        assert!(is_hold_id(&hold_id()));
        assert!(!is_hold_id(&fresh()));
    }

    #[test]
    fn empty_owner_is_rejected() {
        assert!(matches!(check_owner(""), Err(Error::InvalidArgument(_))));
        assert!(check_owner("worker-1").is_ok());
    }
}
