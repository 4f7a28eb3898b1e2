//! Text for XML documents the harness writes (`timeline.svg`, JUnit XML): one escaper, since
//! both carry user data (keys, adapter messages) that may hold any character.

/// `text` safe inside an element or a double-quoted attribute: markup escaped, and the
/// characters XML 1.0 cannot carry at all (control characters other than tab, newline and
/// carriage return, U+FFFE, U+FFFF) replaced by U+FFFD.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_forbidden_characters_do_not_reach_the_document() {
        assert_eq!(
            escape("a<b & \"c\" 'd'>\u{1b}[0m\n"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;\u{fffd}[0m\n"
        );
    }
}
