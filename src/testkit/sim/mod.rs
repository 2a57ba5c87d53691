//! Deterministic simulation (feature `sim`): the real coordinator on a
//! paused single-thread tokio runtime, against simulated Redis nodes that
//! run the library's own Lua scripts, over simulated links with seeded
//! faults.
//!
//! - [`node`]: one simulated Redis server (keyspace with expiry on the
//!   node's own clock, the commands the library sends, Lua 5.1 scripts,
//!   restarts, ACL refusals).

pub mod node;
