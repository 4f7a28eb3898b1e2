//! The built-in limiters: the two incidents' code, their fixes, and the patterns real
//! projects ship (see each file for the project it stands for).

mod exists_then_incr;
mod gcra_lua;
mod get_then_incr;
mod incr_pexpireat_client_clock;
mod incr_then_expire;
pub(crate) mod lua;
mod lua_fixed_window;
mod lua_incr_expire_if_first;
mod multi_incr_expire_nx;
mod pipeline_incr_expire;
mod set_nx_then_incr;
mod sliding_log_zset;
mod token_bucket_lua;

use std::sync::Arc;

use super::Limiter;

/// The names `--limiter` accepts for built-ins, in the order `list` shows them.
pub const BUILTIN_NAMES: [&str; 12] = [
    "get-then-incr",
    "incr-then-expire",
    "multi-incr-expire-nx",
    "lua-fixed-window",
    "exists-then-incr",
    "set-nx-then-incr",
    "pipeline-incr-expire",
    "lua-incr-expire-if-first",
    "sliding-log-zset",
    "token-bucket-lua",
    "gcra-lua",
    "incr-pexpireat-client-clock",
];

/// A built-in limiter by name.
pub fn builtin(name: &str) -> Option<Arc<dyn Limiter>> {
    Some(match name {
        "get-then-incr" => Arc::new(get_then_incr::GetThenIncr),
        "incr-then-expire" => Arc::new(incr_then_expire::IncrThenExpire),
        "multi-incr-expire-nx" => Arc::new(multi_incr_expire_nx::MultiIncrExpireNx),
        "lua-fixed-window" => Arc::new(lua_fixed_window::LuaFixedWindow::new()),
        "exists-then-incr" => Arc::new(exists_then_incr::ExistsThenIncr),
        "set-nx-then-incr" => Arc::new(set_nx_then_incr::SetNxThenIncr),
        "pipeline-incr-expire" => Arc::new(pipeline_incr_expire::PipelineIncrExpire),
        "lua-incr-expire-if-first" => Arc::new(lua_incr_expire_if_first::LuaIncrExpireIfFirst::new()),
        "sliding-log-zset" => Arc::new(sliding_log_zset::SlidingLogZset::new()),
        "token-bucket-lua" => Arc::new(token_bucket_lua::TokenBucketLua::new()),
        "gcra-lua" => Arc::new(gcra_lua::GcraLua::new()),
        "incr-pexpireat-client-clock" => Arc::new(incr_pexpireat_client_clock::IncrPexpireatClientClock),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_resolves_to_itself() {
        for name in BUILTIN_NAMES {
            let limiter = builtin(name).unwrap();
            assert_eq!(limiter.name(), name);
            assert!(!limiter.commands().is_empty());
        }
        assert!(builtin("nope").is_none());
    }
}
