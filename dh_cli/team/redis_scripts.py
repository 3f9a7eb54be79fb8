"""The Lua scripts of the Redis world: every write to a session and every lease change is one
script, which Redis runs atomically, with the server's clock (TIME), so that no client can
interleave a stale write with a takeover.

Fencing, as PostgreSQL's trigger does it (postgres_fencing.py): a write names the (session,
epoch) it carries (ARGV[1], '' for none); while the session has a lease, a write that does not
carry its current epoch is refused with an error starting protocol.FENCED; a released lease
still refuses an older epoch, and lets a write that carries none (a plain `dh world push`)
through.

Keys (all under `dh:`): sessions (hash id -> row), session_updated (hash id -> updated_at),
sources:SID (hash relpath -> row), source_ids:SID (hash relpath -> id), source_session (hash
id -> SID), source_seq (counter), rk:SRC (sorted set of record keys, score = position),
rd:SRC (hash key -> record), events:SID (hash seq -> event), lease:SID (hash), leases (set of
SIDs), takeovers:SID (sorted set of claims, score = server ms). Lease changes are published
on protocol.LEASE_CHANNEL."""

from __future__ import annotations

from .protocol import FENCED, LEASE_CHANNEL

_PRELUDE = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function fence(sid, mine)
  local l = redis.call('HMGET', 'dh:lease:' .. sid, 'epoch', 'released')
  if l[1] and mine ~= sid .. ':' .. l[1] and (l[2] ~= '1' or mine ~= '') then
    return redis.error_reply('%s session ' .. sid .. ' is held at epoch ' .. l[1] ..
      '; this write carries ' .. (mine == '' and 'no epoch' or mine))
  end
  return nil
end
local function changed(sid)
  redis.call('PUBLISH', '%s', sid)
end
""" % (FENCED, LEASE_CHANNEL)

# ARGV: fence, id, updated_at, row -> 'added' | 'updated' | false
PUT_SESSION = _PRELUDE + """
local refused = fence(ARGV[2], ARGV[1])
if refused then return refused end
local old = redis.call('HGET', 'dh:session_updated', ARGV[2])
if old and old >= ARGV[3] then return false end
redis.call('HSET', 'dh:sessions', ARGV[2], ARGV[4])
redis.call('HSET', 'dh:session_updated', ARGV[2], ARGV[3])
return old and 'updated' or 'added'
"""

# ARGV: fence, session id, relpath, row (columns after id), update ('1'/'0') -> the source id
PUT_SOURCE = _PRELUDE + """
local refused = fence(ARGV[2], ARGV[1])
if refused then return refused end
local ids = 'dh:source_ids:' .. ARGV[2]
local id = redis.call('HGET', ids, ARGV[3])
if not id then
  id = redis.call('INCR', 'dh:source_seq')
  redis.call('HSET', ids, ARGV[3], id)
  redis.call('HSET', 'dh:source_session', id, ARGV[2])
  redis.call('HSET', 'dh:sources:' .. ARGV[2], ARGV[3], ARGV[4])
elseif ARGV[5] == '1' then
  redis.call('HSET', 'dh:sources:' .. ARGV[2], ARGV[3], ARGV[4])
end
return tonumber(id)
"""

# ARGV: fence, source id, then (key, score, record) triples -> records added
APPEND_RECORDS = _PRELUDE + """
local sid = redis.call('HGET', 'dh:source_session', ARGV[2])
if not sid then return redis.error_reply('DHNOSRC no source ' .. ARGV[2]) end
local refused = fence(sid, ARGV[1])
if refused then return refused end
local added = 0
for i = 3, #ARGV, 3 do
  if redis.call('HSETNX', 'dh:rd:' .. ARGV[2], ARGV[i], ARGV[i + 2]) == 1 then
    redis.call('ZADD', 'dh:rk:' .. ARGV[2], ARGV[i + 1], ARGV[i])
    added = added + 1
  end
end
return added
"""

# ARGV: fence, session id, then (seq, event) pairs -> events added
APPEND_EVENTS = _PRELUDE + """
local refused = fence(ARGV[2], ARGV[1])
if refused then return refused end
local added = 0
for i = 3, #ARGV, 2 do
  added = added + redis.call('HSETNX', 'dh:events:' .. ARGV[2], ARGV[i], ARGV[i + 1])
end
return added
"""

# leases: KEYS none; ARGV[1] the session id, then per script. A lease is the hash
# dh:lease:SID with host, boot, pid, epoch, hb (ms, server clock), ttl (s), released, refused,
# prev_host, prev_epoch.
_LEASE = _PRELUDE + """
local sid = ARGV[1]
local key = 'dh:lease:' .. sid
local l = redis.call('HMGET', key, 'epoch', 'hb', 'ttl', 'released', 'refused', 'host', 'boot', 'pid')
local now = now_ms()
local function lapsed() return tonumber(l[2]) + tonumber(l[3]) * 1000 < now end
local function move(host, boot, pid, ttl)
  local epoch = tonumber(l[1]) + 1
  redis.call('HSET', key, 'host', host, 'boot', boot, 'pid', pid, 'epoch', epoch, 'hb', now,
             'ttl', ttl, 'prev_host', l[6], 'prev_epoch', l[1])
  redis.call('HDEL', key, 'released', 'refused', 'passed')
  changed(sid)
  return epoch
end
"""

# ARGV: sid, host, boot, pid, ttl -> epoch | false (held elsewhere)
TAKE = _LEASE + """
if not l[1] then
  redis.call('HSET', key, 'host', ARGV[2], 'boot', ARGV[3], 'pid', ARGV[4], 'epoch', 1,
             'hb', now, 'ttl', ARGV[5])
  redis.call('SADD', 'dh:leases', sid)
  changed(sid)
  return 1
end
local mine = l[6] == ARGV[2] and l[7] == ARGV[3] and l[8] == ARGV[4]
if lapsed() or l[4] == '1' or mine then return move(ARGV[2], ARGV[3], ARGV[4], ARGV[5]) end
return false
"""

# ARGV: sid, epoch, host, boot, pid, ttl -> 1 | false
ADOPT = _LEASE + """
if l[1] ~= ARGV[2] or l[6] ~= ARGV[3] or l[7] ~= ARGV[4] then return false end
redis.call('HSET', key, 'pid', ARGV[5], 'hb', now, 'ttl', ARGV[6])
return 1
"""

# ARGV: sid, epoch, pid ('' for any) -> 1 | false
RENEW = _LEASE + """
if l[1] ~= ARGV[2] or (ARGV[3] ~= '' and l[8] ~= ARGV[3]) then return false end
redis.call('HSET', key, 'hb', now)
return 1
"""

# ARGV: sid, epoch -> 1 | false. Kept, epoch and all: an older epoch's writes stay refused.
RELEASE = _LEASE + """
if l[1] ~= ARGV[2] then return false end
redis.call('HSET', key, 'released', '1')
changed(sid)
return 1
"""

# ARGV: sid, epoch, refused ('' for none) -> 1 | false. Lapsed now: claimable at once.
LAPSE = _LEASE + """
if l[1] ~= ARGV[2] then return false end
redis.call('HSET', key, 'hb', now - (tonumber(l[3]) + 1) * 1000)
if ARGV[3] == '' then redis.call('HDEL', key, 'refused') else redis.call('HSET', key, 'refused', ARGV[3]) end
changed(sid)
return 1
"""

# ARGV: sid, host, boot, pid, ttl, only_held ('1'/'0') -> epoch | false
MOVE = _LEASE + """
if not l[1] or (ARGV[6] == '1' and l[4] == '1') then return false end
return move(ARGV[2], ARGV[3], ARGV[4], ARGV[5])
"""

# ARGV: sid, epoch seen, host, boot, pid, ttl, budget, window (s), reason, the session's row
# as FATAL ('' for none), its updated_at -> epoch | false: only a lapsed, unreleased,
# unrefused lease still at the epoch the claimer saw moves (of two claimers, one wins).
# dh:takeovers:SID holds the session's claims (score: server ms); with `budget` of them in
# the window, the lease is refused with `reason` and the FATAL row written instead.
CLAIM = _LEASE + """
if l[1] ~= ARGV[2] or not lapsed() or l[4] == '1' or l[5] then return false end
local taken_key = 'dh:takeovers:' .. sid
local window = tonumber(ARGV[8]) * 1000
redis.call('ZREMRANGEBYSCORE', taken_key, '-inf', now - window)
if redis.call('ZCARD', taken_key) >= tonumber(ARGV[7]) then
  redis.call('HSET', key, 'refused', ARGV[9])
  if ARGV[10] ~= '' then
    redis.call('HSET', 'dh:sessions', sid, ARGV[10])
    redis.call('HSET', 'dh:session_updated', sid, ARGV[11])
  end
  changed(sid)
  return false
end
local epoch = move(ARGV[3], ARGV[4], ARGV[5], ARGV[6])
redis.call('ZADD', taken_key, now, epoch)
redis.call('PEXPIRE', taken_key, window)
return epoch
"""

# ARGV: sid, epoch, reason -> 1 | false
REFUSE = _LEASE + """
if l[1] ~= ARGV[2] then return false end
redis.call('HSET', key, 'refused', ARGV[3])
changed(sid)
return 1
"""

# ARGV: sid, epoch, reason -> 1 | false; unpublished: nobody need wake for a note
PASS = _LEASE + """
if l[1] ~= ARGV[2] then return false end
redis.call('HSET', key, 'passed', ARGV[3])
return 1
"""

# KEYS: none; ARGV: the SIDs (none: every lease) -> {now, {sid, fields...}...}
LEASES = _PRELUDE + """
local sids = ARGV
if #sids == 0 then sids = redis.call('SMEMBERS', 'dh:leases') end
local out = {}
for _, sid in ipairs(sids) do
  local fields = redis.call('HGETALL', 'dh:lease:' .. sid)
  if #fields > 0 then table.insert(out, {sid, fields}) end
end
return {now_ms(), out}
"""

# ARGV: key, token, ms -> 1 | false: the session lock (SET NX PX), renewed and released
# only by its token's holder
LOCK_RENEW = """
if redis.call('GET', ARGV[1]) ~= ARGV[2] then return false end
return redis.call('PEXPIRE', ARGV[1], ARGV[3])
"""
LOCK_RELEASE = """
if redis.call('GET', ARGV[1]) ~= ARGV[2] then return false end
return redis.call('DEL', ARGV[1])
"""

SCRIPTS = {name: text for name, text in globals().items() if name.isupper()
           and name not in ("SCRIPTS",) and isinstance(text, str) and "redis.call" in text
           and not name.startswith("_")}
