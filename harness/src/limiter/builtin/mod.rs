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
mod multi_key;
mod pipeline_incr_expire;
mod set_nx_then_incr;
mod sliding_log_zset;
mod token_bucket_lua;

use std::sync::Arc;

use super::Limiter;

/// A built-in limiter in the registry: the name `--limiter` takes, and how to make one. What
/// it is and what it sends (`list` shows it) are the limiter's own ([`Limiter::commands`],
/// [`Limiter::algorithm`]).
#[derive(Clone, Copy)]
pub struct Builtin {
    pub name: &'static str,
    pub make: fn() -> Arc<dyn Limiter>,
}

impl std::fmt::Debug for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builtin")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Every built-in, in the order `list`, the matrix and the harness's suite show them: the one
/// table that parsing (`--limiter NAME`), `list` and the matrix read.
pub const BUILTINS: [Builtin; 16] = [
    Builtin {
        name: "get-then-incr",
        make: || Arc::new(get_then_incr::GetThenIncr),
    },
    Builtin {
        name: "incr-then-expire",
        make: || Arc::new(incr_then_expire::IncrThenExpire),
    },
    Builtin {
        name: "multi-incr-expire-nx",
        make: || Arc::new(multi_incr_expire_nx::MultiIncrExpireNx),
    },
    Builtin {
        name: "lua-fixed-window",
        make: || Arc::new(lua_fixed_window::LuaFixedWindow::new()),
    },
    Builtin {
        name: "exists-then-incr",
        make: || Arc::new(exists_then_incr::ExistsThenIncr),
    },
    Builtin {
        name: "set-nx-then-incr",
        make: || Arc::new(set_nx_then_incr::SetNxThenIncr),
    },
    Builtin {
        name: "pipeline-incr-expire",
        make: || Arc::new(pipeline_incr_expire::PipelineIncrExpire),
    },
    Builtin {
        name: "lua-incr-expire-if-first",
        make: || Arc::new(lua_incr_expire_if_first::LuaIncrExpireIfFirst::new()),
    },
    Builtin {
        name: "sliding-log-zset",
        make: || Arc::new(sliding_log_zset::SlidingLogZset::new()),
    },
    Builtin {
        name: "token-bucket-lua",
        make: || Arc::new(token_bucket_lua::TokenBucketLua::new()),
    },
    Builtin {
        name: "gcra-lua",
        make: || Arc::new(gcra_lua::GcraLua::new()),
    },
    Builtin {
        name: "incr-pexpireat-client-clock",
        make: || Arc::new(incr_pexpireat_client_clock::IncrPexpireatClientClock),
    },
    Builtin {
        name: "two-key-token-bucket",
        make: || Arc::new(multi_key::two_key_token_bucket(true)),
    },
    Builtin {
        name: "two-key-token-bucket-untagged",
        make: || Arc::new(multi_key::two_key_token_bucket(false)),
    },
    Builtin {
        name: "sliding-window-counter-lua",
        make: || Arc::new(multi_key::sliding_window_counter(true)),
    },
    Builtin {
        name: "sliding-window-counter-lua-untagged",
        make: || Arc::new(multi_key::sliding_window_counter(false)),
    },
];

/// The names `--limiter` accepts for built-ins, in the order of [`BUILTINS`].
pub const BUILTIN_NAMES: [&str; BUILTINS.len()] = {
    let mut names = [""; BUILTINS.len()];
    let mut i = 0;
    while i < BUILTINS.len() {
        names[i] = BUILTINS[i].name;
        i += 1;
    }
    names
};

/// A built-in limiter by name.
pub fn builtin(name: &str) -> Option<Arc<dyn Limiter>> {
    BUILTINS.iter().find(|b| b.name == name).map(|b| (b.make)())
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
        let mut names = BUILTIN_NAMES.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), BUILTINS.len(), "every built-in has a name of its own");
    }
}
