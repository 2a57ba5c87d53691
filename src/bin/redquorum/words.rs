//! The library's messages in the command line's words: where a message
//! names a library call, the user of `redquorum` needs the flag or the
//! subcommand that does it.

/// Library calls and what the command line offers for each.
const CALLS: [(&str, &str); 4] = [
    ("Config::with_restart_guard", "--restart-guard MAX_TTL"),
    ("Redlock::init_nodes", "redquorum init --no-lock-is-live"),
    ("Config::with_fencing", "--fencing"),
    ("LockOptions::fencing", "--fencing"),
];

/// `message` with every library call named by its flag or subcommand.
pub fn cli_words(message: &str) -> String {
    let mut out = message.to_owned();
    for (call, flag) in CALLS {
        out = out.replace(call, flag);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_calls_become_flags() {
        let said = cli_words("turn on the restart guard (Config::with_restart_guard), or not");
        assert_eq!(
            said,
            "turn on the restart guard (--restart-guard MAX_TTL), or not"
        );
        assert_eq!(cli_words("no call here"), "no call here");
    }
}
