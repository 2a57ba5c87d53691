//! The extension scripts as they were before extensions stopped
//! shortening keys (a plain `PEXPIRE`), for the `RacingExtensions`
//! negative control: the race of extension rounds it brings back is
//! harmful only with them.

use std::sync::LazyLock;

use crate::node::restart_guard::announced;
use crate::node::script::Lua;
use crate::node::scripts::with_ours;

/// The body: compare, then `PEXPIRE` whatever the key has left.
const BODY: &str = r"
for i = 1, #KEYS do
  if not ours(redis.pcall('get', KEYS[i])) then return 0 end
end
for i = 1, #KEYS do
  redis.call('pexpire', KEYS[i], ARGV[2])
end
return 1
";

/// The plain extension that shortens.
pub(crate) static EXTEND: LazyLock<Lua> = LazyLock::new(|| with_ours(BODY));

/// The guarded extension that shortens.
pub(crate) static GUARDED_EXTEND: LazyLock<Lua> = LazyLock::new(|| announced(BODY));
