"""The Lua scripts behind `RedisStore`'s writes: each runs atomically inside Redis, so a record,
its order and its index entries never disagree, even with several instances writing.

Layout under a key prefix `p` (one kind per record type: room, task, delivery):

    p:<kind>            hash   id -> record JSON
    p:<kind>:all        zset   id scored by listing order (first insertion; deliveries: created_at,
                               and equal scores sort by member, which gives (created_at, id))
    p:<kind>:ix         hash   id -> JSON list of the index keys the record is in now
    p:<kind>:<field>:<value>   zset of ids, same scores (parent, room and status indexes)
    p:<kind>:fence      hash   id -> the record's fence (deliveries, tasks), read by SWAP
                               without decoding JSON
    p:instance          hash   instance id -> heartbeat JSON (written by plain HSET)
    p:token             hash   access token id -> record JSON (digests, never a secret)
    p:call              hash   room id -> call record JSON (`SWAP_CALL`)
    p:call:fence        hash   room id -> the call record's fence
    p:call:owner:<id>   set    room ids of the open calls instance <id> serves
    p:events:<room>     zset   event JSON scored by its seq
    p:order             counter for first-insertion order

Index keys are computed by the caller and passed as ARGV, which is fine on one Redis server or
a replicated one; Redis Cluster would need every key of a script in one hash slot.
"""

from __future__ import annotations

# KEYS: records hash, order zset, index hash, order counter, the kind's fence hash
# ARGV: id, json, score ('' = keep first insertion order), mode, fence, expected fence,
#       channel to publish the id on ('' = none), message, index keys...
# mode: 'upsert' writes; 'insert' writes only a new id; 'swap' writes only when the stored
# fence equals the expected fence. Returns 1 when written, 0 otherwise.
WRITE_RECORD = """
local id, json, score, mode = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local exists = redis.call('HEXISTS', KEYS[1], id) == 1
if mode == 'insert' and exists then return 0 end
if mode == 'swap' then
  if not exists or redis.call('HGET', KEYS[5], id) ~= ARGV[6] then return 0 end
end
if score == '' then
  score = redis.call('ZSCORE', KEYS[2], id)
  if not score then score = redis.call('INCR', KEYS[4]) end
end
local wanted, keys = {}, {}
for i = 9, #ARGV do
  wanted[ARGV[i]] = true
  keys[#keys + 1] = ARGV[i]
end
local previous = redis.call('HGET', KEYS[3], id)
if previous then
  for _, key in ipairs(cjson.decode(previous)) do
    if not wanted[key] then redis.call('ZREM', key, id) end
  end
end
for _, key in ipairs(keys) do redis.call('ZADD', key, score, id) end
redis.call('ZADD', KEYS[2], score, id)
redis.call('HSET', KEYS[1], id, json)
if #keys == 0 then
  redis.call('HSET', KEYS[3], id, '[]')
else
  redis.call('HSET', KEYS[3], id, cjson.encode(keys))
end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[5], id, ARGV[5]) end
if ARGV[7] ~= '' then redis.call('PUBLISH', ARGV[7], ARGV[8]) end
return 1
"""

# KEYS: the room's event zset. ARGV: seq, event JSON, event id. Returns 1 when the event
# is stored (now, or already: a retried write whose answer was lost), 0 if another event
# holds the seq.
APPEND_EVENT = """
local held = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1])
if #held > 0 then
  if cjson.decode(held[1])['id'] == ARGV[3] then return 1 end
  return 0
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[2])
return 1
"""

# KEYS: the call hash, the call fence hash. ARGV: room id, record JSON, expected fence
# ('0' = none stored yet), new fence, owner set prefix, the owner whose set it goes in
# ('' = none: the call ended), channel ('' = none), message. Returns 1 when written.
SWAP_CALL = """
local id = ARGV[1]
local stored = redis.call('HGET', KEYS[2], id) or '0'
if stored ~= ARGV[3] then return 0 end
local previous = redis.call('HGET', KEYS[1], id)
if previous then
  redis.call('SREM', ARGV[5] .. cjson.decode(previous)['owner'], id)
end
redis.call('HSET', KEYS[1], id, ARGV[2])
redis.call('HSET', KEYS[2], id, ARGV[4])
if ARGV[6] ~= '' then redis.call('SADD', ARGV[5] .. ARGV[6], id) end
if ARGV[7] ~= '' then redis.call('PUBLISH', ARGV[7], ARGV[8]) end
return 1
"""

# ARGV: the key prefix, then a JSON object {"room": [ids], "task": [ids], "delivery": [ids]}
# of the records to delete. Each record leaves its hash, listing order, index entries and
# fence; each room also its events and call record (and its owner's set). Returns the counts
# deleted: rooms, tasks, deliveries, events, calls.
ERASE = """
local p = ARGV[1]
local ids = cjson.decode(ARGV[2])
local counts = {}
for _, kind in ipairs({'room', 'task', 'delivery'}) do
  local base, n = p .. ':' .. kind, 0
  for _, id in ipairs(ids[kind]) do
    local ix = redis.call('HGET', base .. ':ix', id)
    if ix then
      for _, key in ipairs(cjson.decode(ix)) do redis.call('ZREM', key, id) end
    end
    redis.call('ZREM', base .. ':all', id)
    redis.call('HDEL', base .. ':ix', id)
    redis.call('HDEL', base .. ':fence', id)
    n = n + redis.call('HDEL', base, id)
  end
  counts[#counts + 1] = n
end
local events, calls = 0, 0
for _, id in ipairs(ids['room']) do
  local key = p .. ':events:' .. id
  events = events + redis.call('ZCARD', key)
  redis.call('DEL', key)
  local call = redis.call('HGET', p .. ':call', id)
  if call then
    redis.call('SREM', p .. ':call:owner:' .. cjson.decode(call)['owner'], id)
    calls = calls + redis.call('HDEL', p .. ':call', id)
  end
  redis.call('HDEL', p .. ':call:fence', id)
end
counts[#counts + 1] = events
counts[#counts + 1] = calls
return counts
"""
