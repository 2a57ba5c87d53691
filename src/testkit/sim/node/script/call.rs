//! `redis.call` and `redis.pcall` as Lua C functions over the raw stack,
//! as Redis writes them: the arguments are read off the stack, the reply
//! is pushed onto it, and no value passes through mlua's handles. Every
//! guarded vote makes several calls, and going through mlua's conversions
//! (a registry reference per string) was a tenth of a schedule's work.
//! The same goes for a script's `KEYS` and `ARGV` ([`script`]).
//!
//! Each function is a closure with one upvalue, whether an error reply is
//! raised (`call`) or returned (`pcall`); the command runs on the node of
//! the running script ([`current`]).
//!
//! An error is raised with `lua_error`, which leaves the C function by a
//! long jump: it is called only from the outermost frame, after every
//! Rust value of the call has been dropped.
#![allow(unsafe_code)]

use std::ffi::c_int;

use mlua::ffi::{self, lua_State};
use mlua::{Function, Lua};

use super::super::core::lock;
use super::super::number::format_g17;
use super::super::reply::Reply;
use super::current;

/// Calls the sandbox's `run(f, KEYS, ARGV)`, the two tables made on the
/// stack at their size: what it returns (`true` and the script's value,
/// or `false` and the error table).
pub(super) fn script(
    lua: &Lua,
    run: &Function,
    f: &Function,
    keys: &[Vec<u8>],
    argv: &[Vec<u8>],
) -> mlua::Result<(bool, mlua::Value)> {
    // SAFETY: `exec_raw` runs the closure protected, with `run` and `f`
    // on its stack; it pushes two tables and a string at a time (within
    // LUA_MINSTACK) and calls `run`, which catches the script's errors. A
    // memory error would jump past the closure, which owns nothing.
    unsafe {
        lua.exec_raw((run, f), |state| {
            strings(state, keys);
            strings(state, argv);
            ffi::lua_call(state, 3, 2);
        })
    }
}

/// Pushes an array of `items`, as strings.
unsafe fn strings(state: *mut lua_State, items: &[Vec<u8>]) {
    // SAFETY: two slots, within LUA_MINSTACK.
    unsafe {
        ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
        for (i, item) in items.iter().enumerate() {
            push_bytes(state, item);
            ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
        }
    }
}

/// Makes `redis.call` (`raise`: an error reply is raised) or
/// `redis.pcall` (it is returned).
pub(super) fn function(lua: &Lua, raise: bool) -> mlua::Result<Function> {
    // SAFETY: the closure only pushes onto the stack of the state mlua
    // hands it (two slots, within LUA_MINSTACK); `exec_raw` runs it
    // protected, so a memory error is reported, not thrown past Rust.
    unsafe {
        lua.exec_raw((), move |state| {
            ffi::lua_pushboolean(state, c_int::from(raise));
            ffi::lua_pushcclosure(state, call, 1);
        })
    }
}

/// `redis.call(...)` / `redis.pcall(...)`.
unsafe extern "C-unwind" fn call(state: *mut lua_State) -> c_int {
    // SAFETY: `state` is the running state and the upvalues are the ones
    // `function` gave this closure. `run` drops every Rust value it
    // made before it returns, so the long jump of `lua_error` skips no
    // destructor.
    unsafe {
        let raise = ffi::lua_toboolean(state, ffi::lua_upvalueindex(1)) != 0;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(state)));
        match outcome {
            Ok(true) => {}
            Ok(false) if !raise => {}
            Ok(false) => ffi::lua_error(state),
            Err(payload) => {
                // A panic does not unwind through Lua's C frames: it is
                // kept, the script is stopped, and `Engine::run` resumes it.
                PANIC.set(Some(payload));
                ffi::lua_pushlstring(state, PANICKED.as_ptr().cast(), PANICKED.len());
                ffi::lua_error(state);
            }
        }
    }
    1
}

/// The error a script is stopped with when a command panicked.
const PANICKED: &str = "ERR the simulated node panicked";

thread_local! {
    /// The payload of a panic inside a command, for `Engine::run` to
    /// resume once the script has returned.
    static PANIC: std::cell::Cell<Option<Box<dyn std::any::Any + Send>>> =
        const { std::cell::Cell::new(None) };
}

/// Resumes a panic a command raised during the script that just returned.
pub(super) fn resume_panic() {
    if let Some(payload) = PANIC.take() {
        std::panic::resume_unwind(payload);
    }
}

/// Runs the command on the stack on the running script's node and
/// pushes its reply (an error as `{err = ...}`); false for an error.
unsafe fn run(state: *mut lua_State) -> bool {
    // SAFETY (whole body): reads and pushes on the running state's stack,
    // within the slots `lua_checkstack` granted.
    unsafe {
        // The buffers of the last command's arguments, filled again: a
        // command's arguments cost no allocation once a script has run.
        let mut buffers = ARGS.take();
        let reply = match args(state, &mut buffers) {
            Ok(()) => current::with(|core| match core {
                Some(core) => lock(core).run_from_script(&buffers),
                None => Reply::error(super::NOT_RUNNING),
            }),
            Err(text) => Reply::error(text),
        };
        ARGS.set(buffers);
        push(state, &reply);
        !matches!(reply, Reply::Error(_))
    }
}

thread_local! {
    /// Argument buffers kept from one `redis.call` to the next.
    static ARGS: std::cell::Cell<Vec<Vec<u8>>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The arguments on the stack as a command, into `args`: strings as they
/// are, numbers as `%.17g`; anything else is Redis's error.
unsafe fn args(state: *mut lua_State, args: &mut Vec<Vec<u8>>) -> Result<(), &'static str> {
    // SAFETY: indexes 1..=top are valid; a string's bytes are copied while
    // it is on the stack.
    unsafe {
        let top = ffi::lua_gettop(state);
        if top == 0 {
            return Err("ERR Please specify at least one argument for this redis lib call");
        }
        let count = usize::try_from(top).unwrap_or(0);
        args.truncate(count);
        args.resize_with(count, Vec::new);
        for (arg, index) in args.iter_mut().zip(1..=top) {
            arg.clear();
            match ffi::lua_type(state, index) {
                ffi::LUA_TSTRING => {
                    let mut len = 0;
                    let text = ffi::lua_tolstring(state, index, &mut len).cast::<u8>();
                    arg.extend_from_slice(std::slice::from_raw_parts(text, len));
                }
                ffi::LUA_TNUMBER => {
                    arg.extend_from_slice(format_g17(ffi::lua_tonumber(state, index)).as_bytes());
                }
                _ => return Err("ERR Lua redis lib command arguments must be strings or integers"),
            }
        }
        Ok(())
    }
}

/// Pushes `reply` as the Lua value `redis.call` returns: integer →
/// number, bulk → string, nil → false, array → table, status →
/// `{ok=...}`, error → `{err=...}`.
unsafe fn push(state: *mut lua_State, reply: &Reply) {
    // SAFETY: each level asks for the three slots it uses.
    unsafe {
        ffi::lua_checkstack(state, 3);
        match reply {
            Reply::Status(text) => field_table(state, c"ok", text.as_bytes()),
            Reply::Error(text) => field_table(state, c"err", text.as_bytes()),
            Reply::Int(n) => ffi::lua_pushnumber(state, *n as f64),
            Reply::Bulk(bytes) => push_bytes(state, bytes),
            Reply::Nil => ffi::lua_pushboolean(state, 0),
            Reply::Array(items) => {
                ffi::lua_createtable(state, c_int::try_from(items.len()).unwrap_or(0), 0);
                for (i, item) in items.iter().enumerate() {
                    push(state, item);
                    ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                }
            }
        }
    }
}

/// Pushes `{name = text}`.
unsafe fn field_table(state: *mut lua_State, name: &std::ffi::CStr, text: &[u8]) {
    // SAFETY: two slots, granted by the caller.
    unsafe {
        ffi::lua_createtable(state, 0, 1);
        push_bytes(state, text);
        ffi::lua_setfield(state, -2, name.as_ptr());
    }
}

unsafe fn push_bytes(state: *mut lua_State, bytes: &[u8]) {
    // SAFETY: one slot, granted by the caller; Lua copies the bytes.
    unsafe {
        ffi::lua_pushlstring(state, bytes.as_ptr().cast(), bytes.len());
    }
}
