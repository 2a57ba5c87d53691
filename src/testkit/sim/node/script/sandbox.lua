-- The environment of every script on a simulated node, as redis-server
-- 7.0 builds it: the allowed builtins and libraries, read-only; `redis.*`;
-- reading a missing global or writing any global is an error, in Redis's
-- words. Runs once per Lua state.
--
-- Its arguments are Rust functions: `redis.sha1hex`, `redis.log`,
-- `redis.setresp`, `where()` (the script's source and line at an error),
-- `unwrap(e)` (an error a Rust function raised, as the table Redis
-- raises), `redis.call` and `redis.pcall` (C functions on the raw stack:
-- `call` raises an error reply as `{err = ...}`, `pcall` returns it),
-- `redis.acl_check_cmd`, and `host(op, ...)` for the rest of the node
-- (op 3: a math.random draw; 4: math.randomseed). It returns
-- `run(f, keys, argv)`, which runs a compiled script with those tables as
-- its KEYS and ARGV, and the environment scripts are compiled into.
--
-- Every `redis.*` function that can raise is a Rust (C) function, as in
-- Redis: a C function called in tail position (`return redis.call(...)`)
-- keeps the script's frame, so an error still names the script's line.
local sha1hex, log, setresp, where, unwrap, call, call_or_error, acl, host = ...

local real_G = _G
local rawset, setfenv, getfenv, setmetatable = rawset, setfenv, getfenv, setmetatable
local loadstring, load, select, type, tostring, error = loadstring, load, select, type, tostring, error
local real_pcall, real_xpcall = pcall, xpcall
local sub, find = string.sub, string.find
local floor, ceil = math.floor, math.ceil

local protected = setmetatable({}, { __mode = 'k' })

local function readonly_error()
  error('Attempt to modify a readonly table', 2)
end

local function readonly(t)
  local proxy = setmetatable({}, { __index = t, __newindex = readonly_error, __metatable = false })
  protected[proxy] = true
  return proxy
end

-- The globals scripts see; `env` is the read-only face of it.
local G = {}
setmetatable(G, {
  __index = function(_, name)
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
})
local env = setmetatable({}, { __index = G, __newindex = readonly_error, __metatable = false })
protected[env] = true

for _, name in ipairs({ 'assert', 'collectgarbage', 'error', 'gcinfo', 'getmetatable', 'ipairs',
  'next', 'pairs', 'rawequal', 'rawget', 'select', 'setmetatable', 'tonumber', 'tostring',
  'type', 'unpack', '_VERSION' }) do
  G[name] = real_G[name]
end
G._G = env

-- An error a Rust function raised, as the table Redis raises.
local function fix(e)
  if type(e) == 'userdata' then return unwrap(e) end
  return e
end
local function caught(ok, ...)
  if ok then return true, ... end
  return false, fix((...))
end
G.pcall = function(f, ...)
  return caught(real_pcall(f, ...))
end
G.xpcall = function(f, h)
  return real_xpcall(f, function(e) return h(fix(e)) end)
end

G.rawset = function(t, k, v)
  if protected[t] then error('Attempt to modify a readonly table', 0) end
  return rawset(t, k, v)
end
G.loadstring = function(s, name)
  local f, e = loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
G.load = function(fn, name)
  local f, e = load(fn, name)
  if f then setfenv(f, env) end
  return f, e
end
G.getfenv = function(f)
  if f == nil then f = 1 end
  if type(f) == 'number' then
    if f == 0 then return env end
    f = f + 1
  end
  local e = getfenv(f)
  if e == real_G then return env end
  return e
end

-- math.random and math.randomseed as Redis's (rand48, per node).
local function checkint(v, n, fname)
  local x = tonumber(v)
  if x == nil then
    error("bad argument #" .. n .. " to '" .. fname .. "' (number expected, got " ..
      (v == nil and 'no value' or type(v)) .. ")", 3)
  end
  if x >= 0 then return floor(x) end
  return ceil(x)
end
local math_copy = {}
for k, v in pairs(math) do math_copy[k] = v end
math_copy.random = function(...)
  local _, r = host(3)
  local n = select('#', ...)
  if n == 0 then return r end
  local a, b = ...
  if n == 1 then
    local u = checkint(a, 1, 'random')
    if u < 1 then error("bad argument #1 to 'random' (interval is empty)", 2) end
    return floor(r * u) + 1
  end
  if n == 2 then
    local l, u = checkint(a, 1, 'random'), checkint(b, 2, 'random')
    if l > u then error("bad argument #2 to 'random' (interval is empty)", 2) end
    return floor(r * (u - l + 1)) + l
  end
  error('wrong number of arguments', 2)
end
math_copy.randomseed = function(seed)
  host(4, checkint(seed, 1, 'randomseed'))
end

G.string = readonly(string)
G.table = readonly(table)
G.math = readonly(math_copy)
G.coroutine = readonly(coroutine)

-- An error table as Redis's luaPushErrorBuff makes it from "-CODE msg"
-- (or "-msg": code ERR), the message trimmed of line breaks.
local function error_table(s)
  local code, msg
  local space = find(s, ' ', 1, true)
  if space then
    code, msg = sub(s, 2, space - 1), sub(s, space + 1)
  else
    code, msg = 'ERR', sub(s, 2)
  end
  msg = msg:gsub('^[\r\n]+', ''):gsub('[\r\n]+$', '')
  return { err = code .. ' ' .. msg }
end

local redis = {}
redis.error_reply = function(...)
  local e = ...
  if select('#', ...) ~= 1 or type(e) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  if sub(e, 1, 1) ~= '-' then e = '-' .. e end
  return error_table(e)
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return { err = 'ERR wrong number or type of arguments' }
  end
  return { ok = s }
end
redis.call = call
redis.pcall = call_or_error
redis.acl_check_cmd = acl
redis.sha1hex = sha1hex
redis.log = log
redis.setresp = setresp
redis.set_repl = function() end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION = '7.0.15'
redis.REDIS_VERSION_NUM = 458767
G.redis = readonly(redis)

-- Redis's error handler: any error becomes {err = ...}, and the script's
-- source and line where it happened are added.
local function handler(e)
  e = fix(e)
  if type(e) ~= 'table' then e = { err = 'ERR ' .. tostring(e) } end
  local source, line = where()
  if source then
    e.source = source
    e.line = line
  end
  return e
end

local function run(f, keys, argv)
  G.KEYS = keys
  G.ARGV = argv
  return real_xpcall(f, handler)
end

return run, env
