//! The built-in limiters: the two incidents' code and their fixes.

mod get_then_incr;
mod incr_then_expire;
mod lua_fixed_window;
mod multi_incr_expire_nx;

use std::sync::Arc;

use super::Limiter;

/// The names `--limiter` accepts for built-ins, in the order `list` shows them.
pub const BUILTIN_NAMES: [&str; 4] = [
    "get-then-incr",
    "incr-then-expire",
    "multi-incr-expire-nx",
    "lua-fixed-window",
];

/// A built-in limiter by name.
pub fn builtin(name: &str) -> Option<Arc<dyn Limiter>> {
    Some(match name {
        "get-then-incr" => Arc::new(get_then_incr::GetThenIncr),
        "incr-then-expire" => Arc::new(incr_then_expire::IncrThenExpire),
        "multi-incr-expire-nx" => Arc::new(multi_incr_expire_nx::MultiIncrExpireNx),
        "lua-fixed-window" => Arc::new(lua_fixed_window::LuaFixedWindow::new()),
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
