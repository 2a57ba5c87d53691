//! Compiled chunks shared by every simulated node of the process: the
//! bytecode of each script text compiled once, by sha (and of the
//! sandbox, by its chunk name), so that the next node's Lua state loads
//! it instead of parsing the text again (a simulation batch starts five
//! fresh states a schedule). What a script
//! does is the same either way: the bytecode is the text's, with its
//! debug information.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use mlua::Function;

/// Bytecode by script sha (the sandbox's by its chunk name).
static CACHE: LazyLock<Mutex<BTreeMap<String, Arc<[u8]>>>> =
    LazyLock::new(|| Mutex::new(BTreeMap::new()));

/// The bytecode of the chunk `sha`, if some node compiled it.
pub(super) fn cached(sha: &str) -> Option<Arc<[u8]>> {
    CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(sha)
        .cloned()
}

/// Keeps the bytecode of `f`, compiled from the text of chunk `sha`.
pub(super) fn keep(sha: &str, f: &Function) {
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if !cache.contains_key(sha) {
        cache.insert(sha.to_owned(), Arc::from(f.dump(false)));
    }
}
