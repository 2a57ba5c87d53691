//! Every script stays valid in Lua 5.1 (Redis, Valkey) and Lua 5.4
//! (Dragonfly): no name that one of them lacks, and no number formatted
//! with `%d` that 5.4 could hold as a non-integral float (`string.format`
//! raises "number has no integer representation" there).

use super::acl::DIAGNOSE_LUA;
use super::registry::SCRIPTS;

/// The source of every script the library sends, by the name of its
/// static.
fn every_script() -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = SCRIPTS
        .iter()
        .map(|s| (s.name.to_ascii_uppercase(), s.script.source().to_owned()))
        .collect();
    all.push(("DIAGNOSE".to_owned(), DIAGNOSE_LUA.to_owned()));
    all
}

/// The text of `source` without comments and string literals (each
/// literal becomes `''`), so that words inside strings are not read as code.
fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                let mut escaped = false;
                for d in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if d == '\\' {
                        escaped = true;
                    } else if d == c {
                        break;
                    }
                }
                out.push_str("''");
            }
            '-' if chars.peek() == Some(&'-') => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// True when `code` uses `name` as a whole word (`a.b` names as written).
fn uses(code: &str, name: &str) -> bool {
    code.match_indices(name).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + name.len()..].chars().next();
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.');
        !word(before) && !word(after)
    })
}

/// The names of the scripts (`static NAME: LazyLock<Lua>` or
/// `LazyLock<Script>`) the library's source defines, outside the testkit.
fn defined_scripts() -> Vec<String> {
    fn walk(dir: &std::path::Path, found: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                if !path.ends_with("testkit") {
                    walk(&path, found);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let source = std::fs::read_to_string(&path).unwrap();
                for line in source.lines() {
                    let Some((name, ty)) = line
                        .trim_start()
                        .strip_prefix("pub(crate) static ")
                        .and_then(|rest| rest.split_once(':'))
                    else {
                        continue;
                    };
                    if ty.contains("LazyLock<Lua>") || ty.contains("LazyLock<Script>") {
                        found.push(name.to_owned());
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    walk(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut found,
    );
    found.sort();
    found
}

#[test]
fn every_script_the_library_defines_is_listed() {
    let defined = defined_scripts();
    assert!(defined.len() > 10, "{defined:?}");
    let mut listed: Vec<String> = every_script()
        .iter()
        .map(|(n, _)| (*n).to_owned())
        .collect();
    listed.sort();
    assert_eq!(listed, defined);
}

#[test]
fn every_script_is_found_and_has_code() {
    let all = every_script();
    assert_eq!(all.len(), SCRIPTS.len() + 1);
    for (name, source) in &all {
        assert!(source.contains("return"), "{name}");
    }
}

#[test]
fn no_script_uses_a_name_that_lua_5_1_or_5_4_lacks() {
    // Gone in 5.2+ (Dragonfly runs 5.4): `unpack` only as the fallback of
    // `table.unpack or unpack`.
    let only_51 = [
        "loadstring",
        "setfenv",
        "getfenv",
        "module",
        "table.getn",
        "table.setn",
        "table.maxn",
        "table.foreach",
        "table.foreachi",
        "math.pow",
        "math.mod",
        "math.ldexp",
        "math.frexp",
        "string.gfind",
        "gcinfo",
        "newproxy",
    ];
    // New in 5.2+ (Redis and Valkey run 5.1).
    let only_54 = [
        "goto",
        "math.tointeger",
        "math.type",
        "math.ult",
        "table.move",
        "table.pack",
        "string.pack",
        "string.unpack",
        "utf8",
        "coroutine.isyieldable",
    ];
    for (name, source) in every_script() {
        let code = code_only(&source);
        for word in only_51.iter().chain(&only_54) {
            assert!(!uses(&code, word), "{name} uses `{word}`");
        }
        // `unpack` is gone in 5.2+: only behind `local unpack = table.unpack or unpack`.
        let fallback = "local unpack = table.unpack or unpack";
        let rest = code.replace(fallback, "");
        if uses(&rest, "unpack") {
            assert!(code.contains(fallback), "{name}: write `{fallback}`");
        }
        assert!(
            !rest.contains("table.unpack"),
            "{name}: `table.unpack` is not Lua 5.1"
        );
        for op in ["//", "::", "<<", ">>", " & ", " | ", " ~ "] {
            assert!(!code.contains(op), "{name}: `{op}` is not Lua 5.1");
        }
    }
}

#[test]
fn numbers_formatted_with_percent_d_come_from_no_division_that_is_not_floored() {
    // In 5.4 `/` always makes a float, and `string.format('%d', 1.5)`
    // raises an error (5.1 truncates). So every `/` is floored, or halves
    // the even count of KEYS (integral, and only used as an index).
    for (name, source) in every_script() {
        let code = code_only(&source);
        for (at, _) in code.match_indices('/') {
            let before = &code[..at];
            // Inside an open `math.floor(`: more `(` than `)` after it.
            let floored = before.rfind("math.floor(").is_some_and(|open| {
                let inside = &before[open..];
                inside.matches('(').count() > inside.matches(')').count()
            });
            let halves_keys = before.trim_end().ends_with("#KEYS");
            assert!(
                floored || halves_keys,
                "{name}: a `/` that is not floored: ...{}",
                &code[at.saturating_sub(40)..at + 1]
            );
        }
        assert!(
            !code.contains("%d") || source.contains("string.format('%d'"),
            "{name}"
        );
    }
}

/// Every script compiles in the Lua 5.1 the simulator runs (mlua, vendored).
#[cfg(feature = "sim")]
#[test]
fn every_script_compiles_in_lua_5_1() {
    let lua = mlua::Lua::new();
    for (name, source) in every_script() {
        if let Err(e) = lua
            .load(source.as_str())
            .set_name(name.as_str())
            .into_function()
        {
            panic!("{name} does not compile in Lua 5.1: {e}");
        }
    }
}
