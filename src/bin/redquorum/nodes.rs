//! Where the node URLs come from (`--nodes`, `--nodes-file`,
//! `REDQUORUM_NODES_FILE`, `REDQUORUM_NODES`; the old `REDLOCK_*` names
//! with a deprecation warning) and the password that
//! `REDQUORUM_PASSWORD` gives to URLs without one. Nothing here ever
//! prints a URL: it may carry a password.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::{EX_CONFIG, EX_USAGE, Exit};

/// The variable holding a nodes file's path.
pub const NODES_FILE_VAR: &str = "REDQUORUM_NODES_FILE";
/// Its old name, read with a deprecation warning while it is unset.
const OLD_NODES_FILE_VAR: &str = "REDLOCK_NODES_FILE";
/// The variable holding comma-separated node URLs.
pub const NODES_VAR: &str = redquorum::NODES_ENV;
/// Its old name, read with a deprecation warning while it is unset.
const OLD_NODES_VAR: &str = redquorum::DEPRECATED_NODES_ENV;
/// The variable holding the password of URLs without one.
pub const PASSWORD_VAR: &str = "REDQUORUM_PASSWORD";

/// The environment variables this module reads, as a value (the tests of
/// the resolution do not touch the process's environment).
#[derive(Debug, Default)]
pub struct Env {
    /// `REDQUORUM_NODES_FILE` (or `REDLOCK_NODES_FILE`).
    pub nodes_file: Option<OsString>,
    /// `REDQUORUM_NODES` (or `REDLOCK_NODES`).
    pub nodes: Option<OsString>,
    /// `REDQUORUM_PASSWORD`.
    pub password: Option<OsString>,
}

impl Env {
    /// The process's environment; empty variables count as unset. An old
    /// `REDLOCK_*` name is read while its `REDQUORUM_*` name is unset, with
    /// a deprecation warning on stderr.
    pub fn read() -> Env {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        let renamed = |new, old| {
            var(new).or_else(|| {
                let value = var(old)?;
                eprintln!(
                    "redquorum: warning: {old} is deprecated: rename it to {new} (it is read \
                     only while {new} is unset)"
                );
                Some(value)
            })
        };
        Env {
            nodes_file: renamed(NODES_FILE_VAR, OLD_NODES_FILE_VAR),
            nodes: renamed(NODES_VAR, OLD_NODES_VAR),
            password: var(PASSWORD_VAR),
        }
    }
}

/// The node URLs to use: `--nodes`, else `--nodes-file`, else the file
/// named by `REDQUORUM_NODES_FILE`, else `REDQUORUM_NODES` (setting both
/// variables is an error), each given `REDQUORUM_PASSWORD` if it has no
/// password of its own.
///
/// # Errors
///
/// 64 when no nodes are given, or both flags or both variables are; 78 when the file
/// cannot be read or has a bad line, or the password is not UTF-8.
pub fn resolve(flag: &[String], file: Option<&Path>, env: &Env) -> Result<Vec<String>, Exit> {
    // clap does not see the conflict when one of the two global flags
    // comes after the subcommand.
    if !flag.is_empty() && file.is_some() {
        return Err(Exit::error(
            EX_USAGE,
            "--nodes and --nodes-file cannot be combined: pass one".to_owned(),
        ));
    }
    let urls = if !flag.is_empty() {
        split_list(flag.iter().map(String::as_str))
    } else if let Some(file) = file {
        read_file(file)?
    } else {
        match (&env.nodes_file, &env.nodes) {
            (Some(_), Some(_)) => {
                return Err(Exit::error(
                    EX_USAGE,
                    format!("both {NODES_FILE_VAR} and {NODES_VAR} are set: unset one"),
                ));
            }
            (Some(file), None) => read_file(&PathBuf::from(file))?,
            (None, Some(list)) => {
                let list = list.to_str().ok_or_else(|| {
                    Exit::error(EX_CONFIG, format!("{NODES_VAR} is not valid UTF-8"))
                })?;
                split_list(list.split(','))
            }
            (None, None) => Vec::new(),
        }
    };
    if urls.is_empty() {
        return Err(Exit::error(
            EX_USAGE,
            format!(
                "no nodes: pass --nodes redis://host:port,... or --nodes-file PATH, or set \
                 {NODES_VAR} or {NODES_FILE_VAR}"
            ),
        ));
    }
    let Some(password) = &env.password else {
        return Ok(urls);
    };
    let password = password
        .to_str()
        .ok_or_else(|| Exit::error(EX_CONFIG, format!("{PASSWORD_VAR} is not valid UTF-8")))?;
    Ok(urls
        .iter()
        .map(|url| with_password(url, password))
        .collect())
}

/// Trimmed, non-empty entries.
fn split_list<'a>(items: impl Iterator<Item = &'a str>) -> Vec<String> {
    items
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Reads a nodes file: one URL a line; blank lines, and `#` at the start
/// of a line or after a blank up to its end, are skipped. Warns on stderr
/// when the file holds a password and others may read it.
fn read_file(path: &Path) -> Result<Vec<String>, Exit> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Exit::error(
            EX_CONFIG,
            format!("cannot read the nodes file {shown}: {e}"),
        )
    })?;
    let urls = parse_file(&text)
        .map_err(|why| Exit::error(EX_CONFIG, format!("nodes file {shown}: {why}")))?;
    if urls.is_empty() {
        return Err(Exit::error(
            EX_CONFIG,
            format!("the nodes file {shown} lists no node URL"),
        ));
    }
    let readable_by_others = std::fs::metadata(path)
        .map(|m| m.permissions().mode() & 0o004 != 0)
        .unwrap_or(false);
    if readable_by_others && urls.iter().any(|u| has_password(u)) {
        eprintln!(
            "redquorum: warning: the nodes file {shown} holds passwords and every user can read \
             it: chmod o-r it, or leave passwords out and set {PASSWORD_VAR}"
        );
    }
    Ok(urls)
}

/// The URLs of a nodes file's text. A bad line is named by its number
/// only: its text may hold a password.
fn parse_file(text: &str) -> Result<Vec<String>, String> {
    let mut urls = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = without_comment(line).trim();
        if line.is_empty() {
            continue;
        }
        if line.split_whitespace().nth(1).is_some() {
            return Err(format!(
                "line {} has more than one word: put one node URL on each line",
                n + 1
            ));
        }
        urls.push(line.to_owned());
    }
    Ok(urls)
}

/// `line` up to a `#` that starts it or follows a blank (a `#` inside a
/// URL, which would start its fragment, is kept).
fn without_comment(line: &str) -> &str {
    let mut previous_blank = true;
    for (i, c) in line.char_indices() {
        if c == '#' && previous_blank {
            return &line[..i];
        }
        previous_blank = c.is_whitespace();
    }
    line
}

/// The URL's `user:password@` part, if it has one: the text between
/// `://` and the last `@` before the path.
fn userinfo(url: &str) -> Option<(usize, &str)> {
    let start = url.find("://")? + 3;
    let rest = &url[start..];
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    authority.rfind('@').map(|at| (start, &authority[..at]))
}

fn is_unix(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    lower.starts_with("unix:") || lower.starts_with("redis+unix:")
}

/// True when `url` names a password: `user:password@` (or `:password@`),
/// or `pass=` in a Unix socket URL's query.
fn has_password(url: &str) -> bool {
    if is_unix(url) {
        return url
            .split_once('?')
            .is_some_and(|(_, query)| query.split('&').any(|kv| kv.starts_with("pass=")));
    }
    userinfo(url).is_some_and(|(_, info)| info.contains(':'))
}

/// `url` with `password` (percent-encoded) when it has none: `redis://h`
/// becomes `redis://:pw@h`, `redis://alice@h` becomes `redis://alice:pw@h`;
/// a Unix socket URL gets `pass=pw` in its query.
pub fn with_password(url: &str, password: &str) -> String {
    if has_password(url) {
        return url.to_owned();
    }
    let encoded = percent_encode(password);
    if is_unix(url) {
        let join = if url.contains('?') { '&' } else { '?' };
        return format!("{url}{join}pass={encoded}");
    }
    match (userinfo(url), url.find("://")) {
        (Some((start, user)), _) => {
            let end = start + user.len();
            format!("{}:{encoded}{}", &url[..end], &url[end..])
        }
        (None, Some(scheme_end)) => {
            let start = scheme_end + 3;
            format!("{}:{encoded}@{}", &url[..start], &url[start..])
        }
        // Not a URL: the library names the node as unusable.
        (None, None) => url.to_owned(),
    }
}

/// Every byte but the unreserved ones (`A-Z a-z 0-9 - . _ ~`) as `%XX`.
fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_goes_where_none_is_and_nowhere_else() {
        let pw = "p@ss:w/rd #%";
        let enc = "p%40ss%3Aw%2Frd%20%23%25";
        assert_eq!(
            with_password("redis://10.0.0.1:6379/2", pw),
            format!("redis://:{enc}@10.0.0.1:6379/2")
        );
        assert_eq!(
            with_password("rediss://alice@h:6380", pw),
            format!("rediss://alice:{enc}@h:6380")
        );
        assert_eq!(with_password("redis://:own@h:1", pw), "redis://:own@h:1");
        assert_eq!(
            with_password("redis://bob:own@h:1", pw),
            "redis://bob:own@h:1"
        );
        assert_eq!(
            with_password("redis://[::1]:6379", "x"),
            "redis://:x@[::1]:6379"
        );
        assert_eq!(
            with_password("redis+unix:///run/redis.sock?db=1", "x y"),
            "redis+unix:///run/redis.sock?db=1&pass=x%20y"
        );
        assert_eq!(
            with_password("unix:///run/redis.sock", "x"),
            "unix:///run/redis.sock?pass=x"
        );
    }

    #[test]
    fn the_encoded_password_reads_back_through_the_redis_crate() {
        use redquorum::redis::IntoConnectionInfo;
        let pw = "p@ss:w/rd #%é";
        let Ok(info) = with_password("redis://alice@127.0.0.1:6379/", pw).into_connection_info()
        else {
            panic!("not a URL");
        };
        assert_eq!(info.redis_settings().password(), Some(pw));
        assert_eq!(info.redis_settings().username(), Some("alice"));
    }

    #[test]
    fn a_nodes_file_skips_comments_and_blank_lines() {
        let text =
            "# the fleet\n\n  redis://a:6379  \nredis://b:6379 # rack 2\n\t\nredis://c:6379#x\n";
        assert_eq!(
            parse_file(text).unwrap(),
            ["redis://a:6379", "redis://b:6379", "redis://c:6379#x"]
        );
        let err = parse_file("redis://a\nredis://:secret@b redis://c\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }

    #[test]
    fn the_flag_wins_over_the_environment_and_two_variables_are_an_error() {
        let env = Env {
            nodes_file: Some("/nonexistent".into()),
            nodes: Some("redis://x".into()),
            password: None,
        };
        let urls = resolve(&["redis://a".to_owned(), " ".to_owned()], None, &env).unwrap();
        assert_eq!(urls, ["redis://a"]);
        let both = resolve(&["redis://a".to_owned()], Some(Path::new("/f")), &env).unwrap_err();
        assert_eq!(both.code, EX_USAGE);
        let err = resolve(&[], None, &env).unwrap_err();
        assert_eq!(err.code, EX_USAGE);
        let only_list = Env {
            nodes: Some(" redis://x , redis://y,".into()),
            password: Some("pw".into()),
            ..Env::default()
        };
        assert_eq!(
            resolve(&[], None, &only_list).unwrap(),
            ["redis://:pw@x", "redis://:pw@y"]
        );
        let none = resolve(&[], None, &Env::default()).unwrap_err();
        assert_eq!(none.code, EX_USAGE);
    }
}
