"""The Lua scripts of the Redis store (service/redis_store.py), each run whole on the series'
keys (one hash tag: one cluster slot): the writes compare the version first (compare-and-set),
trim what a series keeps and publish the new version on its feed."""

from __future__ import annotations

from typing import Any

# a hash of numbered fields holding more than `keep` (its window was lowered since they were
# written): drop the fields numbered `upto` or less
TRIM = """
local function trim(key, upto, keep)
  if redis.call('HLEN', key) <= keep then return end
  for _, field in ipairs(redis.call('HKEYS', key)) do
    if tonumber(field) <= upto then redis.call('HDEL', key, field) end
  end
end
"""

# a hash of writes' records under their last seq:
# keep the `keep` latest (one more than kept, as after each write: drop the oldest, found in
# one pass; more, as after a lowered window: sort)
KEEP_LATEST = """
local function keep_latest(key, keep)
  local n = redis.call('HLEN', key)
  if n <= keep then return end
  local fields = redis.call('HKEYS', key)
  if n == keep + 1 then
    local oldest = fields[1]
    for i = 2, n do
      if tonumber(fields[i]) < tonumber(oldest) then oldest = fields[i] end
    end
    redis.call('HDEL', key, oldest)
    return
  end
  table.sort(fields, function(a, b) return tonumber(a) < tonumber(b) end)
  for i = 1, n - keep do redis.call('HDEL', key, fields[i]) end
end
"""

# KEYS: state, applied, log, gone.
# ARGV: expected version, reset (1/0), writes remembered, events kept, event, state, meta,
# version, feed channel, then, for an update, its last seq and its applied record
COMMIT = TRIM + KEEP_LATEST + """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current ~= tonumber(ARGV[1]) then return 0 end
local version = tonumber(ARGV[8])
if current == 0 and tonumber(redis.call('GET', KEYS[4]) or '0') >= version then return 0 end
-- the first write is one that a full Redis refuses (HSET; DEL is not): once a script has
-- written, Redis lets its every later write through, maxmemory or not
redis.call('HSET', KEYS[1], 'state', ARGV[6], 'version', version, 'meta', ARGV[7])
if current == 0 then redis.call('DEL', KEYS[3]) end
if ARGV[2] == '1' then redis.call('DEL', KEYS[2]) end
if #ARGV >= 11 then
  redis.call('HSET', KEYS[2], ARGV[10], ARGV[11])
  keep_latest(KEYS[2], tonumber(ARGV[3]))
end
redis.call('HSET', KEYS[3], version, ARGV[5])
redis.call('HDEL', KEYS[3], tostring(version - tonumber(ARGV[4])))
trim(KEYS[3], version - tonumber(ARGV[4]), tonumber(ARGV[4]))
redis.call('PUBLISH', ARGV[9], version)
return 1
"""

# the state; the applied records that may hold the seqs from ARGV[1] on (those under a seq at
# or after it: a write's record is under its last seq) with their fields; and the events those
# records name
LOAD = """
local state = redis.call('HGETALL', KEYS[1])
if #state == 0 or #ARGV == 0 then return {state, {}, {}, {}, {}} end
local fields = {}
for _, field in ipairs(redis.call('HKEYS', KEYS[2])) do
  if tonumber(field) >= tonumber(ARGV[1]) then table.insert(fields, field) end
end
if #fields == 0 then return {state, {}, {}, {}, {}} end
local records = redis.call('HMGET', KEYS[2], unpack(fields))
local versions, seen = {}, {}
for _, raw in ipairs(records) do
  local version = raw and string.match(raw, '^[^\\n]*\\n(%d+)\\n')
  if version and not seen[version] then
    seen[version] = true
    table.insert(versions, version)
  end
end
if #versions == 0 then return {state, fields, records, {}, {}} end
return {state, fields, records, versions, redis.call('HMGET', KEYS[3], unpack(versions))}
"""

# KEYS: as _COMMIT's. ARGV: expected version, events kept, event, events TTL (ms), tombstone
# TTL (ms), feed channel
DELETE = TRIM + """
local current = tonumber(redis.call('HGET', KEYS[1], 'version') or '0')
if current == 0 or current ~= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[3], current + 1, ARGV[3])
redis.call('HDEL', KEYS[3], tostring(current + 1 - tonumber(ARGV[2])))
trim(KEYS[3], current + 1 - tonumber(ARGV[2]), tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[3], ARGV[4])
redis.call('SET', KEYS[4], current + 1, 'PX', ARGV[5])
redis.call('PUBLISH', ARGV[6], current + 1)
return 1
"""

LAST_VERSION = """
local current = redis.call('HGET', KEYS[1], 'version')
if current then return tonumber(current) end
return tonumber(redis.call('GET', KEYS[2]) or '0')
"""


class Script:
    """A Lua script sent whole (EVAL) at each call; Redis keeps it compiled by its hash. Not
    EVALSHA: a server that lost its scripts (a restart, a promoted replica) would answer
    NOSCRIPT to every call in flight, and redis-py's cluster client breaks connections when
    many calls load a script at once."""

    def __init__(self, text: str, client: Any) -> None:
        self.text = text
        self.client = client

    def __call__(self, keys: list[str], args: list[Any] | None = None, client: Any = None) -> Any:
        """The call's coroutine, or, on a pipeline `client`, the pipeline with it queued."""
        return (client or self.client).eval(self.text, len(keys), *keys, *(args or []))
