//! The built-ins that keep several keys per identity, each with and without a Redis Cluster
//! hash tag: a two-key token bucket (Spring Cloud Gateway's layout) and a sliding window
//! counter (the current window's counter and the previous one's, rotated by `RENAME`, as
//! Python `limits` does). On one server the two variants behave alike; on a cluster the
//! untagged keys of one identity hash to different slots, and every request meets
//! `CROSSSLOT` (spring-cloud-gateway #248, PyrateLimiter #126). Each is a Lua script with its
//! convention, run as a `lua:` script is: its keys are its KEYS, templated per identity.

use crate::limiter::script::ScriptLimiter;

/// Refills `requests_max` tokens per window (server TIME); both keys written with PSETEX for
/// two windows, so an idle bucket is forgotten once it would be full.
const TOKEN_BUCKET: &str = r"
-- KEYS[1] = tokens, KEYS[2] = timestamp (ms); ARGV[1] = capacity, ARGV[2] = window (ms)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local capacity = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local tokens = tonumber(redis.call('GET', KEYS[1])) or capacity
local last = tonumber(redis.call('GET', KEYS[2])) or 0
local filled = math.min(capacity, tokens + math.max(0, now - last) * capacity / window)
local allowed = 0
if filled >= 1 then
  filled = filled - 1
  allowed = 1
end
redis.call('PSETEX', KEYS[1], 2 * window, string.format('%.6f', filled))
redis.call('PSETEX', KEYS[2], 2 * window, now)
return {allowed, capacity - math.floor(filled)}
";

/// Python `limits`' sliding window counter in milliseconds, with one change: a current
/// counter found without a TTL gets one (limits' script would keep it forever).
const SLIDING_WINDOW_COUNTER: &str = r"
-- KEYS[1] = the previous window's counter, KEYS[2] = the current one's
-- ARGV[1] = limit, ARGV[2] = window (ms); returns {allowed}
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local current_ttl = tonumber(redis.call('PTTL', KEYS[2]))
if current_ttl == -1 then
  redis.call('PEXPIRE', KEYS[2], 2 * window)
  current_ttl = 2 * window
end
if current_ttl > 0 and current_ttl < window then
  redis.call('RENAME', KEYS[2], KEYS[1])
  redis.call('SET', KEYS[2], 0, 'PX', current_ttl + window)
end
local previous = tonumber(redis.call('GET', KEYS[1])) or 0
local previous_ttl = math.max(0, tonumber(redis.call('PTTL', KEYS[1])))
local current = tonumber(redis.call('GET', KEYS[2])) or 0
local weighted = math.floor(previous * previous_ttl / window) + current
if weighted + 1 > limit then
  return {0}
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('INCRBY', KEYS[2], 1)
else
  redis.call('SET', KEYS[2], 1, 'PX', 2 * window)
end
return {1}
";

/// The conventions, with `TAG_OPEN`/`TAG_CLOSE` around `{key}` in each key: `{{`/`}}` (a
/// hash tag: both keys in one slot) or nothing.
const TOKEN_BUCKET_CONVENTION: &str = r#"
name = "two-key token bucket (Spring Cloud Gateway's layout)"
algorithm = "token-bucket"
keys = ["TAG_OPEN{key}TAG_CLOSE.tokens", "TAG_OPEN{key}TAG_CLOSE.ts"]
args = ["{requests_max}", "{window_ms}"]
ttl_max_windows = 2
plant = ["SET TAG_OPEN{key}TAG_CLOSE.tokens 0", "SET TAG_OPEN{key}TAG_CLOSE.ts {now_ms}"]

[result]
allowed_index = 1
count_index = 2
"#;

const SLIDING_WINDOW_COUNTER_CONVENTION: &str = r#"
name = "sliding window counter (Python limits' layout)"
algorithm = "sliding-window-counter"
keys = ["TAG_OPEN{key}TAG_CLOSE:prev", "TAG_OPEN{key}TAG_CLOSE:cur"]
args = ["{requests_max}", "{window_ms}"]
plant = ["SET TAG_OPEN{key}TAG_CLOSE:cur {requests_max}"]

[result]
allowed_index = 1
"#;

fn convention(template: &str, tagged: bool) -> String {
    let (open, close) = if tagged { ("{{", "}}") } else { ("", "") };
    template.replace("TAG_OPEN", open).replace("TAG_CLOSE", close)
}

pub fn two_key_token_bucket(tagged: bool) -> ScriptLimiter {
    let name = if tagged {
        "two-key-token-bucket"
    } else {
        "two-key-token-bucket-untagged"
    };
    ScriptLimiter::builtin(name, TOKEN_BUCKET, &convention(TOKEN_BUCKET_CONVENTION, tagged))
}

pub fn sliding_window_counter(tagged: bool) -> ScriptLimiter {
    let name = if tagged {
        "sliding-window-counter-lua"
    } else {
        "sliding-window-counter-lua-untagged"
    };
    ScriptLimiter::builtin(
        name,
        SLIDING_WINDOW_COUNTER,
        &convention(SLIDING_WINDOW_COUNTER_CONVENTION, tagged),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limiter::Limiter;
    use crate::scenario::Limit;

    fn limit() -> Limit {
        Limit {
            requests_max: 10,
            window_ms: 510,
            identities: 2,
            instances: 1,
            key_prefix: "rl:".into(),
            keys: None,
        }
    }

    /// The keys each variant declares: both in one slot with the tag, two slots without.
    #[test]
    fn the_tagged_variants_keep_an_identitys_keys_in_one_slot() {
        for (limiter, keys) in [
            (two_key_token_bucket(true), ["{rl:1}.tokens", "{rl:1}.ts"]),
            (two_key_token_bucket(false), ["rl:1.tokens", "rl:1.ts"]),
            (sliding_window_counter(true), ["{rl:1}:prev", "{rl:1}:cur"]),
            (sliding_window_counter(false), ["rl:1:prev", "rl:1:cur"]),
        ] {
            let layout = limiter.declared_keys(&limit()).expect("declares its keys");
            for key in keys {
                assert_eq!(layout.identity_of(key.as_bytes()), Some(1), "{}: {key}", limiter.name());
            }
            let slots: std::collections::BTreeSet<u16> =
                keys.iter().map(|k| crate::backend::key_slot(k.as_bytes())).collect();
            let untagged = limiter.name().ends_with("-untagged");
            assert_eq!(slots.len(), if untagged { 2 } else { 1 }, "{}", limiter.name());
        }
    }
}
