//! The matrix: every selected scenario × every selected limiter, one fresh server per
//! cell, with bounded parallelism; a table of verdicts (`MATRIX.md`) checked against what
//! each scenario expects.

mod cells;
mod table;

pub use cells::{Cell, MatrixConfig, MatrixLimiter, run_matrix, sanitize};
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
    use super::glob_match;

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
