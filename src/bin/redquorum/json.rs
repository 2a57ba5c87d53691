//! The JSON that `check --json` and `status --json` print: a small value
//! type written out by hand, on one line, fields in the order given (the
//! tool writes JSON and never reads it, so a serialisation framework would
//! buy nothing but dependencies). Strings are escaped per RFC 8259.

/// A JSON value.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A whole number.
    Int(u64),
    /// A string.
    Str(String),
    /// An array.
    Array(Vec<Json>),
    /// An object, fields in this order.
    Object(Vec<(&'static str, Json)>),
}

impl Json {
    /// A string value.
    pub fn str(text: impl Into<String>) -> Json {
        Json::Str(text.into())
    }

    /// `text` as a string, or `null`.
    pub fn opt_str(text: Option<impl Into<String>>) -> Json {
        text.map_or(Json::Null, |t| Json::Str(t.into()))
    }

    /// `n` as a number, or `null`.
    pub fn opt_int(n: Option<u64>) -> Json {
        n.map_or(Json::Null, Json::Int)
    }

    /// A count or an index (these fit in a `u64` on every platform).
    pub fn count(n: usize) -> Json {
        Json::Int(u64::try_from(n).unwrap_or(u64::MAX))
    }

    /// The value as one line of JSON text.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut String) {
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(n) => out.push_str(&n.to_string()),
            Json::Str(s) => quote(s, out),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write(out);
                }
                out.push(']');
            }
            Json::Object(fields) => {
                out.push('{');
                for (i, (name, value)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    quote(name, out);
                    out.push(':');
                    value.write(out);
                }
                out.push('}');
            }
        }
    }
}

/// Writes `s` as a JSON string: `"` and `\` escaped, control characters
/// as `\n`, `\t`... or `\u00XX`; everything else as it is (UTF-8).
fn quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn values_are_written_compactly_in_field_order() {
        let v = Json::Object(vec![
            ("b", Json::Bool(true)),
            ("a", Json::Array(vec![Json::Int(1), Json::Null])),
            ("s", Json::str("x\"y\\z\n\u{1}é")),
        ]);
        assert_eq!(
            v.render(),
            r#"{"b":true,"a":[1,null],"s":"x\"y\\z\n\u0001é"}"#
        );
    }

    proptest! {
        #[test]
        fn any_string_reads_back_unchanged(s in any::<String>()) {
            let text = Json::Object(vec![("k", Json::str(s.clone()))]).render();
            let back: serde_json::Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(back["k"].as_str(), Some(s.as_str()));
        }
    }
}
