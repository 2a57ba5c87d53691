//! [`Engine`]: the Lua 5.1 state of one simulated node, which compiles a
//! script's exact text as Redis 7.0 does (the body as one chunk named
//! `@user_script`) and runs it in Redis's environment
//! (`sandbox.lua`), its `redis.call` reaching the node's [`Core`].

mod bytecode;
mod call;
mod convert;
mod current;
mod spare;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{LazyLock, Mutex, PoisonError};

use mlua::chunk::ChunkMode;
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use super::core::{Shared, lock};
use super::reply::Reply;

/// The chunk name of the sandbox, whose frames an error's line skips.
const SANDBOX: &str = "=redquorum-sim";

/// One node's Lua state and its compiled scripts.
pub(super) struct Engine {
    lua: Lua,
    run: Function,
    env: Table,
    /// Compiled functions by sha. Unlike the node's script cache (what
    /// `EVALSHA` finds), this survives restarts and `SCRIPT FLUSH`: the
    /// same text compiles to the same function.
    compiled: BTreeMap<String, Function>,
    /// The scripts this node compiled (a state that served another
    /// node before may hold them already).
    seen: BTreeSet<String>,
    /// How many scripts this node compiled.
    pub(super) compilations: usize,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("compiled", &self.compiled.len())
            .field("compilations", &self.compilations)
            .finish_non_exhaustive()
    }
}

/// The sha1 of `body` in lower-case hex, as Redis names scripts.
///
/// Remembered for the first [`SHAS_KEPT`] texts of the process: every
/// schedule's nodes load the same few scripts again and again, and
/// hashing them was a tenth of a schedule's work.
pub(super) fn sha1_hex(body: &[u8]) -> String {
    static SHAS: LazyLock<Mutex<BTreeMap<Vec<u8>, String>>> =
        LazyLock::new(|| Mutex::new(BTreeMap::new()));
    let mut shas = SHAS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(sha) = shas.get(body) {
        return sha.clone();
    }
    let sha = sha1_smol::Sha1::from(body).digest().to_string();
    if shas.len() < SHAS_KEPT {
        shas.insert(body.to_vec(), sha.clone());
    }
    sha
}

/// How many script texts [`sha1_hex`] remembers.
const SHAS_KEPT: usize = 256;

impl Engine {
    /// A Lua state with Redis's environment for a new node: one that
    /// served a node before on this thread, or a fresh one.
    pub(super) fn get() -> mlua::Result<Engine> {
        spare::take().map_or_else(Engine::new, Ok)
    }

    /// Gives the state back for the next node of this thread.
    pub(super) fn give_back(mut self) {
        self.seen.clear();
        self.compilations = 0;
        spare::keep(self);
    }

    /// A fresh Lua state with Redis's environment, whose `redis.call`
    /// runs on the node of the running script ([`current`]).
    fn new() -> mlua::Result<Engine> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let sha1hex = lua.create_function(|lua, args: MultiValue| {
            if args.len() != 1 {
                return Err(raise("ERR wrong number of arguments"));
            }
            let text = match args.into_iter().next() {
                Some(value) => lua.coerce_string(value).ok().flatten(),
                None => None,
            };
            Ok(sha1_hex(
                &text.map(|s| s.as_bytes().to_vec()).unwrap_or_default(),
            ))
        })?;
        let log = lua.create_function(|_, args: MultiValue| {
            if args.len() < 2 {
                return Err(raise("ERR redis.log() requires two arguments or more."));
            }
            Ok(())
        })?;
        let setresp = lua.create_function(|_, args: MultiValue| match args.front() {
            Some(Value::Integer(2)) if args.len() == 1 => Ok(()),
            Some(Value::Integer(3)) if args.len() == 1 => {
                Err(raise("ERR the simulated node speaks RESP2 only"))
            }
            _ => Err(raise("ERR RESP version must be 2 or 3.")),
        })?;
        let where_ = lua.create_function(|lua, ()| Ok(script_position(lua)))?;
        let unwrap = lua.create_function(|lua, e: Value| {
            let text = match &e {
                Value::Error(error) => raised_text(error).unwrap_or_else(|| format!("ERR {error}")),
                other => format!("ERR {other:?}"),
            };
            convert::error_table(lua, &text)
        })?;
        let call = call::function(&lua, true)?;
        let pcall = call::function(&lua, false)?;
        let acl = lua.create_function(|_, args: MultiValue| {
            let args = convert::command_args(args).map_err(raise)?;
            let allowed = current::with(|core| match core {
                Some(core) => lock(core).acl_check(&args),
                None => Err(NOT_RUNNING.to_owned()),
            });
            allowed.map_err(|text| raise(&text))
        })?;
        let host = lua.create_function(|_, mut args: MultiValue| {
            let op = match args.pop_front() {
                Some(Value::Integer(op)) => op,
                _ => 0,
            };
            current::with(|core| match core {
                Some(core) => host(core, op, args),
                None => Err(raise(NOT_RUNNING)),
            })
        })?;
        let sandbox = match bytecode::cached(SANDBOX) {
            Some(bytecode) => lua
                .load(&bytecode[..])
                .set_mode(ChunkMode::Binary)
                .into_function()?,
            None => {
                let f = lua
                    .load(include_str!("sandbox.lua"))
                    .set_name(SANDBOX)
                    .into_function()?;
                bytecode::keep(SANDBOX, &f);
                f
            }
        };
        let (run, env): (Function, Table) = sandbox.call((
            sha1hex, log, setresp, where_, unwrap, call, pcall, acl, host,
        ))?;
        Ok(Engine {
            lua,
            run,
            env,
            compiled: BTreeMap::new(),
            seen: BTreeSet::new(),
            compilations: 0,
        })
    }

    /// The compiled function of script `sha`, if it was compiled before.
    pub(super) fn compiled(&self, sha: &str) -> Option<Function> {
        self.compiled.get(sha).cloned()
    }

    /// The function of script `sha` (text `body`), compiled on the node's
    /// first use. A syntax error is the reply Redis gives for it.
    pub(super) fn compile(&mut self, sha: &str, body: &[u8]) -> Result<Function, Reply> {
        let f = match self.compiled.get(sha) {
            Some(f) => f.clone(),
            None => {
                let f = self.load(sha, body)?;
                self.compiled.insert(sha.to_owned(), f.clone());
                f
            }
        };
        if !self.seen.contains(sha) {
            self.seen.insert(sha.to_owned());
            self.compilations += 1;
        }
        Ok(f)
    }

    /// Script `sha` (text `body`) compiled in this state.
    fn load(&self, sha: &str, body: &[u8]) -> Result<Function, Reply> {
        if let Some(bytecode) = bytecode::cached(sha) {
            // The same text compiled before, in another node's state: its
            // bytecode (debug information kept, so an error still names
            // `@user_script` and its line) loads without parsing.
            let loaded = self
                .lua
                .load(&bytecode[..])
                .set_mode(ChunkMode::Binary)
                .set_environment(self.env.clone())
                .into_function();
            if let Ok(f) = loaded {
                return Ok(f);
            }
        }
        let compiled = self
            .lua
            .load(body)
            .set_name("@user_script")
            .set_mode(ChunkMode::Text)
            .set_environment(self.env.clone())
            .into_function();
        let f = compiled.map_err(|e| match e {
            mlua::Error::SyntaxError { message, .. } => Reply::Error(format!(
                "ERR Error compiling script (new function): {message}"
            )),
            other => Reply::Error(format!(
                "ERR Error compiling script (new function): {other}"
            )),
        })?;
        bytecode::keep(sha, &f);
        Ok(f)
    }

    /// Runs compiled script `f` (hash `sha`) with `keys` and `argv` on the
    /// node `core`. Its `redis.call`s lock the node's state: the caller
    /// must not hold it.
    pub(super) fn run(
        &self,
        core: &Shared,
        (sha, f): (&str, &Function),
        keys: &[Vec<u8>],
        argv: &[Vec<u8>],
    ) -> Reply {
        let outcome = (|| {
            let called =
                current::running(core, || call::script(&self.lua, &self.run, f, keys, argv));
            call::resume_panic();
            let (ok, value) = called?;
            Ok::<Reply, mlua::Error>(if ok {
                convert::lua_to_reply(&value)
            } else {
                convert::raised_to_reply(&value, sha)
            })
        })();
        outcome.unwrap_or_else(|e| Reply::Error(format!("ERR Error running script: {e}")))
    }
}

/// What a sandbox function answers when no script is running (it is
/// only ever called by one).
const NOT_RUNNING: &str = "ERR no script is running on this node";

/// An error reply raised from a Rust function into the script (what
/// `redis.call` raises), carried as an mlua error.
#[derive(Debug)]
struct Raised(String);

impl std::fmt::Display for Raised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}

fn raise(text: &str) -> mlua::Error {
    mlua::Error::external(Raised(text.to_owned()))
}

/// The text of a [`Raised`] error, however mlua wrapped it.
fn raised_text(error: &mlua::Error) -> Option<String> {
    match error {
        mlua::Error::CallbackError { cause, .. } => raised_text(cause),
        mlua::Error::ExternalError(e) => e.downcast_ref::<Raised>().map(|r| r.0.clone()),
        _ => None,
    }
}

/// What the sandbox's `host(op, ...)` does for the running script.
fn host(core: &Shared, op: i64, args: MultiValue) -> mlua::Result<(bool, Value)> {
    let mut core = lock(core);
    match op {
        3 => Ok((true, Value::Number(core.lua_random()))),
        4 => {
            let seed = match args.front() {
                Some(Value::Integer(i)) => *i,
                Some(Value::Number(n)) => *n as i64,
                _ => 0,
            };
            // luaL_checkint: the C int of the number.
            core.lua_seed(seed as i32);
            Ok((true, Value::Nil))
        }
        _ => Ok((false, Value::Nil)),
    }
}

/// The script's source and line where an error happened: the first frame
/// above the error handler that is neither a C function nor the sandbox
/// (Redis's handler skips the C function that raised, such as
/// `redis.call` or `error`).
fn script_position(lua: &Lua) -> (Option<String>, Option<i64>) {
    for level in 1..64 {
        let frame = lua.inspect_stack(level, |debug| {
            let source = debug.source();
            let skip = source.what == "C" || source.source.as_deref() == Some(SANDBOX);
            (
                skip,
                source.source.map(|s| s.into_owned()),
                debug.current_line(),
            )
        });
        match frame {
            None => break,
            Some((true, ..)) => {}
            Some((false, source, line)) => {
                return (source, line.and_then(|l| i64::try_from(l).ok()));
            }
        }
    }
    (None, None)
}
