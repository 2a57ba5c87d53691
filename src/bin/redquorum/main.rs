//! `redquorum`: run a command under a Redlock lock held on a quorum of
//! independent Redis masters (flock(1) for a fleet), check the nodes, and
//! show a lock's state.

mod acquire;
mod args;
mod check;
mod duration;
mod group;
mod help;
mod init;
mod json;
mod nodes;
mod quarantine;
mod run;
mod signals;
mod status;
mod table;
mod tls;
mod words;

use std::process::ExitCode;

use clap::Parser;
use redquorum::{Config, Redlock};

use args::{Cli, Command};

/// Bad command line (sysexits `EX_USAGE`).
pub const EX_USAGE: i32 = 64;
/// Nodes unreachable (sysexits `EX_UNAVAILABLE`).
pub const EX_UNAVAILABLE: i32 = 69;
/// Internal error (sysexits `EX_SOFTWARE`).
pub const EX_SOFTWARE: i32 = 70;
/// The lock could not be had; try later (sysexits `EX_TEMPFAIL`).
pub const EX_TEMPFAIL: i32 = 75;
/// Bad nodes or settings, or a misconfigured node (sysexits `EX_CONFIG`).
pub const EX_CONFIG: i32 = 78;
/// The lock was lost while the command ran.
pub const LOCK_LOST: i32 = 79;
/// `check`: some nodes are unreachable, but a quorum is fine.
pub const DEGRADED: i32 = 80;
/// The command exists but cannot be executed (as in shells).
pub const NOT_EXECUTABLE: i32 = 126;
/// The command was not found (as in shells).
pub const NOT_FOUND: i32 = 127;

/// How the tool ends: an exit code and maybe a one-line message for stderr.
#[derive(Debug)]
pub struct Exit {
    code: i32,
    message: Option<String>,
}

impl Exit {
    /// Ends with `code`, saying nothing.
    pub fn code(code: i32) -> Exit {
        Exit {
            code,
            message: None,
        }
    }

    /// Ends with `code` after printing `redquorum: {message}` on stderr.
    pub fn error(code: i32, message: String) -> Exit {
        Exit {
            code,
            message: Some(words::cli_words(&message)),
        }
    }
}

async fn dispatch(cli: Cli) -> Exit {
    let nodes = match nodes::resolve(&cli.nodes, cli.nodes_file.as_deref(), &nodes::Env::read()) {
        Ok(nodes) => nodes,
        Err(exit) => return exit,
    };
    let mut config = Config::default()
        .with_node_timeout(cli.node_timeout)
        .with_key_prefix(&cli.key_prefix);
    if let Some(max_ttl) = cli.restart_guard {
        config = config.with_restart_guard(max_ttl);
    }
    let config = match tls::certificates(&cli, config) {
        Ok(config) => config,
        Err(exit) => return exit,
    };
    let redlock = match Redlock::with_config(nodes.iter().map(String::as_str), config.clone()) {
        Ok(r) => r,
        Err(e) => return Exit::error(EX_CONFIG, e.to_string()),
    };
    match &cli.command {
        Command::Run(args) => run::run(&nodes, config, args).await,
        Command::Check(args) => check::check(&redlock, args.json).await,
        Command::Status(args) => status::status(&redlock, &args.resource, args.json).await,
        Command::Init(args) => init::init(&redlock, args.no_lock_is_live).await,
        Command::SetQuarantine(args) => {
            quarantine::set(&redlock, args.no_longer_lock_is_live).await
        }
        Command::VouchCounters(args) => quarantine::vouch(&redlock, args).await,
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EX_USAGE } else { 0 };
            let _ = e.print();
            return exit_code(code);
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("redquorum: cannot start the async runtime: {e}");
            return exit_code(EX_SOFTWARE);
        }
    };
    let exit = runtime.block_on(dispatch(cli));
    if let Some(message) = &exit.message {
        eprintln!("redquorum: {message}");
    }
    exit_code(exit.code)
}

fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX))
}
