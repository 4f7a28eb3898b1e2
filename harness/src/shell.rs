//! Command lines for people to paste: quoting for a POSIX shell.

/// Quote an argument for a POSIX shell when it needs it.
pub fn quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@".contains(c)) {
        arg.to_owned()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_what_needs_it() {
        assert_eq!(quote("get-then-incr"), "get-then-incr");
        assert_eq!(quote("exec:python3 a.py"), "'exec:python3 a.py'");
        assert_eq!(quote("it's"), "'it'\\''s'");
        assert_eq!(quote("app:{identity}:*"), "'app:{identity}:*'");
        assert_eq!(quote(""), "''");
    }
}
