//! The matrix: every selected scenario × every selected limiter (× every server of
//! `--servers`), one fresh server per cell, with bounded parallelism; a table of verdicts
//! (`MATRIX.md`, one per server) checked against what each scenario expects.

mod cells;
mod plan;
mod table;

pub use cells::{
    Cell, CellError, Expectation, MatrixConfig, MatrixLimiter, MatrixServer, expected_ms, run_matrix, sanitize,
    server_dir_name,
};
pub use plan::{MatrixOutcome, default_jobs, jobs_for, outcome, select_scenarios, select_servers, table_context};
pub use table::{TableContext, grid, render_table, short_label};

/// Shell-style glob match (`*` any run, `?` one character) for scenario names.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    fn go(p: &[char], n: &[char]) -> bool {
        match (p.first(), n.first()) {
            (None, None) => true,
            (Some('*'), _) => go(&p[1..], n) || (!n.is_empty() && go(p, &n[1..])),
            (Some('?'), Some(_)) => go(&p[1..], &n[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &n[1..]),
            _ => false,
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    go(&p, &n)
}

#[cfg(test)]
mod tests {
    use super::{glob_match, server_dir_name};

    #[test]
    fn server_names_are_directory_names() {
        assert_eq!(server_dir_name("redis-6.2"), "redis-6.2");
        assert_eq!(server_dir_name("valkey-9.1.2"), "valkey-9.1.2");
        assert_eq!(server_dir_name(".."), "__");
        assert_eq!(server_dir_name("a/b"), "a_b");
    }

    #[test]
    fn globs() {
        assert!(glob_match("*", "immortal-counter"));
        assert!(glob_match("immortal-*", "immortal-counter"));
        assert!(glob_match("*-eviction", "shared-cache-eviction"));
        assert!(glob_match("st?ady-control", "steady-control"));
        assert!(!glob_match("immortal-*", "steady-control"));
        assert!(!glob_match("steady", "steady-control"));
    }
}
