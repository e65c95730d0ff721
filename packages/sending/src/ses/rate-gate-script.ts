/**
 * The send-rate gate's Redis script ({@link TAKE_SCRIPT}): confirmations and the decision, in one atomic call on the
 * Redis clock. Why it decides as it does: `rate-gate.ts`.
 *
 * @module
 */
import { RedisScript } from '@mailroom/queues/redis-script';

/**
 * How late (µs) the decisions may run behind their schedule and still catch up: while the slot after the last
 * decision is at most this far past, the next one is taken from that slot, not from now, so a grant asked late (its
 * caller's timer or Redis reply late on a busy host) does not push every later slot back by its lateness. Measured
 * before (`npm run bench -- campaign-delivery`, 100/s, a loaded host): with sends waiting at the gate it granted
 * 0.65–0.87× its rate. A gate idle for longer starts afresh from now. The window's count bounds every second as
 * before: catching up only moves sends closer together inside it.
 */
export const CATCH_UP_US = 100_000;

/**
 * KEYS: last, pending, sent. ARGV: interval µs, window µs, limit, pending TTL µs, burst µs, `together` (1 or 0),
 * confirmations `c`, `c` tokens to confirm, then the tokens asking.
 * First moves the tokens to confirm to `sent` at the Redis clock's now (the confirmations of this process due in
 * the turn an ask goes out ride on that call; with none going out they go alone). Then, with no token asking,
 * answers `{0, 0}`; else grants the first `m` tokens (they are pending) and answers `{m, 0}`, or `{0, µs to wait before asking again}`.
 * `m` is at most the tokens given, the room left in the window, and the intervals elapsed: counted from the last
 * decision while the slot after it is at most {@link CATCH_UP_US} past (the slots the decisions fell behind are
 * caught up), else from no further back than `burst` (≥ interval): with `burst` = interval, one grant per
 * interval; with more, the asks of one turn take the intervals that passed while they were being prepared. The last
 * decision moves on by `m` intervals (never past now), so the decisions stay spaced on average.
 * `together` (the asks include a bulk call's entries, which leave in one request): all of them (at most `limit`) or
 * none, so no grant of the call waits pending for the rest; the last decision moves on by `m` intervals even past
 * now, so the decisions after wait out the intervals the call took ahead. The window's count bounds every second
 * as before.
 */
const TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, window, limit, ttl, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local together = tonumber(ARGV[6]) == 1
local c = tonumber(ARGV[7])
local keep = math.ceil(math.max(window, ttl) / 1000) + 1000
if c > 0 then
  local stamp = string.format('%.0f', now)
  for i = 8, 7 + c do
    redis.call('ZREM', KEYS[2], ARGV[i])
    redis.call('ZADD', KEYS[3], stamp, ARGV[i])
  end
  redis.call('PEXPIRE', KEYS[3], keep)
end
local first = 8 + c
local asking = #ARGV - first + 1
if asking < 1 then
  return {0, 0}
end
local last = tonumber(redis.call('GET', KEYS[1]) or '0')
if now < last + interval then
  return {0, last + interval - now}
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', string.format('%.0f', now - window))
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now - ttl))
local sent = redis.call('ZCARD', KEYS[3])
local held = sent + redis.call('ZCARD', KEYS[2])
local need = 1
if together then need = math.min(asking, limit) end
if held + need > limit then
  local k = held + need - 1 - limit
  if k < sent then
    local s = redis.call('ZRANGE', KEYS[3], k, k, 'WITHSCORES')
    return {0, math.max(1000, tonumber(s[2]) + window - now + 1)}
  end
  return {0, 2000}
end
local from = last
if now - last - interval > ${CATCH_UP_US} then from = now - math.max(burst, interval) end
local m
local next
if together then
  m = need
  next = from + m * interval
else
  m = math.max(1, math.min(asking, limit - held, math.floor((now - from) / interval)))
  next = math.min(now, from + m * interval)
end
local stamp = string.format('%.0f', now)
redis.call('SET', KEYS[1], string.format('%.0f', next), 'PX', keep)
for i = 1, m do
  redis.call('ZADD', KEYS[2], stamp, ARGV[first - 1 + i])
end
redis.call('PEXPIRE', KEYS[2], keep)
return {m, 0}
`;

/** {@link TAKE} as a script run by its SHA. */
export const TAKE_SCRIPT = new RedisScript(TAKE);
