//! One key template: how the keys of one kind look, with `{identity}` where the identity's
//! number goes and Redis glob wildcards (`*`, `?`) where anything may go.

use std::fmt;

use serde::{Serialize, Serializer};

use super::{IDENTITY, KeyError};

/// Longest identity number a key may carry (identities are `u32`).
const IDENTITY_DIGITS_MAX: usize = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(Vec<u8>),
    /// `*`: any run of bytes, possibly empty.
    Any,
    /// `?`: exactly one byte.
    One,
    /// `{identity}`: the identity's number in decimal.
    Identity,
}

/// A parsed key template, e.g. `geocode:calls:{identity}:*`. `{{` and `}}` stand for literal
/// braces (`request_rate_limiter.{{{identity}}}.tokens` is `request_rate_limiter.{7}.tokens`
/// for identity 7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    text: String,
    parts: Vec<Part>,
}

impl KeyTemplate {
    /// Parse a template; the error says what is wrong in one line.
    pub fn parse(text: &str) -> Result<Self, KeyError> {
        // Long: a parser of the template syntax, one arm per token, each error pointing at its column.
        if text.is_empty() {
            return Err(KeyError::Empty);
        }
        let text_owned = || text.to_owned();
        let mut parts = Vec::new();
        let mut literal = Vec::new();
        let mut rest = text;
        let mut identities = 0;
        while let Some(c) = rest.chars().next() {
            let mut take = c.len_utf8();
            match c {
                '{' if rest.starts_with("{{") => {
                    literal.push(b'{');
                    take = 2;
                }
                '}' if rest.starts_with("}}") => {
                    literal.push(b'}');
                    take = 2;
                }
                '{' => {
                    let Some(close) = rest.find('}') else {
                        return Err(KeyError::Unclosed { text: text_owned() });
                    };
                    let name = &rest[..=close];
                    if name != IDENTITY {
                        return Err(KeyError::UnknownPlaceholder {
                            text: text_owned(),
                            name: name.to_owned(),
                        });
                    }
                    identities += 1;
                    flush(&mut literal, &mut parts);
                    parts.push(Part::Identity);
                    take = name.len();
                }
                '}' => return Err(KeyError::Unopened { text: text_owned() }),
                '*' | '?' => {
                    flush(&mut literal, &mut parts);
                    // `**` matches what `*` does: keep one.
                    if !(c == '*' && parts.last() == Some(&Part::Any)) {
                        parts.push(if c == '*' { Part::Any } else { Part::One });
                    }
                }
                '[' | ']' | '\\' => {
                    return Err(KeyError::Unsupported {
                        text: text_owned(),
                        character: c,
                    });
                }
                c if c.is_whitespace() || c.is_control() => return Err(KeyError::Whitespace { text: text_owned() }),
                _ => literal.extend_from_slice(&rest.as_bytes()[..take]),
            }
            rest = &rest[take..];
        }
        flush(&mut literal, &mut parts);
        if identities != 1 {
            return Err(KeyError::IdentityCount { text: text_owned() });
        }
        Ok(Self {
            text: text.to_owned(),
            parts,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The identity number a key of this template carries, if the whole key matches.
    pub fn identity_of(&self, key: &[u8]) -> Option<u32> {
        matches(&self.parts, key)
    }

    /// Where in `key` this template's wildcards (`*`, `?`) matched, as byte ranges, when the
    /// whole key matches (the same choices as [`Self::identity_of`]).
    pub fn wildcard_spans(&self, key: &[u8]) -> Option<Vec<std::ops::Range<usize>>> {
        if key.len() > KEY_LEN_MAX {
            return None;
        }
        let mut memo = Memo {
            parts: &self.parts,
            key,
            seen: vec![None; (self.parts.len() + 1) * (key.len() + 1)],
            computed: 0,
        };
        memo.at(0, 0)?;
        let mut spans = Vec::new();
        let mut pos = 0;
        for (i, part) in self.parts.iter().enumerate() {
            let next = match part {
                Part::Literal(lit) => pos + lit.len(),
                Part::One => pos + 1,
                Part::Any => (pos..=key.len()).find(|&n| memo.at(i + 1, n).is_some())?,
                Part::Identity => {
                    let digits = key[pos..].iter().take_while(|b| b.is_ascii_digit()).count();
                    (1..=digits.min(IDENTITY_DIGITS_MAX))
                        .rev()
                        .map(|len| pos + len)
                        .find(|&n| memo.at(i + 1, n).is_some())?
                }
            };
            if matches!(part, Part::Any | Part::One) {
                spans.push(pos..next);
            }
            pos = next;
        }
        Some(spans)
    }

    /// The Redis glob (SCAN MATCH, PSUBSCRIBE) of every key of this template.
    pub fn pattern(&self) -> String {
        self.render("*")
    }

    /// The Redis glob of the keys of one identity.
    pub fn pattern_for(&self, identity: u32) -> String {
        self.render(&identity.to_string())
    }

    /// The one key of `identity`, when the template has no wildcard.
    pub fn key_for(&self, identity: u32) -> Option<String> {
        let concrete = self
            .parts
            .iter()
            .all(|p| matches!(p, Part::Literal(_) | Part::Identity));
        concrete.then(|| self.render(&identity.to_string()))
    }

    fn render(&self, identity: &str) -> String {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(bytes) => out.push_str(&String::from_utf8_lossy(bytes)),
                Part::Any => out.push('*'),
                Part::One => out.push('?'),
                Part::Identity => out.push_str(identity),
            }
        }
        out
    }
}

fn flush(literal: &mut Vec<u8>, parts: &mut Vec<Part>) {
    if !literal.is_empty() {
        parts.push(Part::Literal(std::mem::take(literal)));
    }
}

/// Keys longer than this are never taken for a limiter's (matching stays cheap whatever a
/// client sends).
const KEY_LEN_MAX: usize = 4096;

/// Match `key` against `parts` as a whole; on success, the identity's number. `*` tries the
/// shortest run first, `{identity}` the longest run of digits first; each (part, position)
/// is tried once, so a template full of `*` costs O(parts × key length²), never more.
fn matches(parts: &[Part], key: &[u8]) -> Option<u32> {
    matches_counting(parts, key).0
}

/// [`matches`], and how many (part, position) states it computed.
fn matches_counting(parts: &[Part], key: &[u8]) -> (Option<u32>, usize) {
    if key.len() > KEY_LEN_MAX {
        return (None, 0);
    }
    let mut memo = Memo {
        parts,
        key,
        seen: vec![None; (parts.len() + 1) * (key.len() + 1)],
        computed: 0,
    };
    (memo.at(0, 0), memo.computed)
}

/// `u32::MAX` stands for "matched, past the identity" in results of the parts after it.
struct Memo<'a> {
    parts: &'a [Part],
    key: &'a [u8],
    seen: Vec<Option<Option<u32>>>,
    computed: usize,
}

impl Memo<'_> {
    fn at(&mut self, part: usize, pos: usize) -> Option<u32> {
        let slot = part * (self.key.len() + 1) + pos;
        if let Some(known) = self.seen[slot] {
            return known;
        }
        self.computed += 1;
        let found = self.compute(part, pos);
        self.seen[slot] = Some(found);
        found
    }

    fn compute(&mut self, part: usize, pos: usize) -> Option<u32> {
        let rest = &self.key[pos..];
        match self.parts.get(part) {
            None => rest.is_empty().then_some(u32::MAX),
            Some(Part::Literal(lit)) => {
                let len = lit.len();
                rest.starts_with(lit).then_some(())?;
                self.at(part + 1, pos + len)
            }
            Some(Part::One) => (!rest.is_empty())
                .then_some(())
                .and_then(|()| self.at(part + 1, pos + 1)),
            Some(Part::Any) => (pos..=self.key.len()).find_map(|next| self.at(part + 1, next)),
            Some(Part::Identity) => {
                let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                (1..=digits.min(IDENTITY_DIGITS_MAX)).rev().find_map(|len| {
                    self.at(part + 1, pos + len)?;
                    std::str::from_utf8(&rest[..len]).ok()?.parse::<u32>().ok()
                })
            }
        }
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for KeyTemplate {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> KeyTemplate {
        KeyTemplate::parse(text).unwrap()
    }

    #[test]
    fn plain_prefix_and_identity() {
        let tpl = t("rl:{identity}");
        assert_eq!(tpl.identity_of(b"rl:7"), Some(7));
        assert_eq!(tpl.identity_of(b"rl:12"), Some(12));
        assert_eq!(tpl.identity_of(b"rl:7:log"), None, "the whole key must match");
        assert_eq!(tpl.identity_of(b"rl:"), None);
        assert_eq!(tpl.identity_of(b"rl:x"), None);
        assert_eq!(tpl.pattern(), "rl:*");
        assert_eq!(tpl.pattern_for(3), "rl:3");
        assert_eq!(tpl.key_for(3).as_deref(), Some("rl:3"));
    }

    #[test]
    fn real_layouts() {
        let limits = t("LIMITS:LIMITER/api/{identity}/10/1/second");
        assert_eq!(limits.identity_of(b"LIMITS:LIMITER/api/0/10/1/second"), Some(0));
        assert_eq!(limits.identity_of(b"LIMITS:LIMITER/api/0/10/1/minute"), None);

        let per_day = t("geocode:calls:{identity}:*");
        assert_eq!(per_day.identity_of(b"geocode:calls:3:2026-09-27"), Some(3));
        assert_eq!(per_day.identity_of(b"geocode:calls:3:"), Some(3));
        assert_eq!(per_day.pattern(), "geocode:calls:*:*");
        assert_eq!(per_day.pattern_for(3), "geocode:calls:3:*");
        assert_eq!(per_day.key_for(3), None, "a wildcard: no single key");

        let tagged = t("request_rate_limiter.{{{identity}}}.tokens");
        assert_eq!(tagged.identity_of(b"request_rate_limiter.{5}.tokens"), Some(5));
        assert_eq!(tagged.pattern(), "request_rate_limiter.{*}.tokens");
        assert_eq!(tagged.key_for(5).as_deref(), Some("request_rate_limiter.{5}.tokens"));
    }

    #[test]
    fn wildcards_backtrack() {
        let tpl = t("*:{identity}");
        assert_eq!(tpl.identity_of(b"a:b:42"), Some(42));
        let tpl = t("rl:{identity}?");
        assert_eq!(tpl.identity_of(b"rl:123"), Some(12), "`?` takes the last digit");
        let tpl = t("rl:{identity}*");
        assert_eq!(
            tpl.identity_of(b"rl:123"),
            Some(123),
            "the identity takes the longest run"
        );
        assert_eq!(
            t("rl:{identity}").identity_of(b"rl:99999999999"),
            None,
            "more digits than a u32 holds"
        );
    }

    #[test]
    fn many_wildcards_compute_each_state_once() {
        let tpl = t("*a*a*a*a*a*a*a*a*{identity}b");
        let key = "a".repeat(2000);
        let (found, computed) = matches_counting(&tpl.parts, key.as_bytes());
        assert_eq!(found, None);
        assert!(
            computed <= (tpl.parts.len() + 1) * (key.len() + 1),
            "{computed} states: each (part, position) once, not a backtracking explosion"
        );
        assert_eq!(tpl.identity_of(format!("{key}7b").as_bytes()), Some(7));
        assert_eq!(
            tpl.identity_of("a".repeat(5000).as_bytes()),
            None,
            "too long to be a key"
        );
    }

    #[test]
    fn wildcard_spans_say_what_each_wildcard_matched() {
        let per_day = t("geocode:calls:{identity}:*");
        let key = b"geocode:calls:3:20426";
        let spans = per_day.wildcard_spans(key).unwrap();
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0], 16..21);
        assert_eq!(per_day.wildcard_spans(b"other:3:1"), None);
        let two = t("*:{identity}:?x");
        assert_eq!(two.wildcard_spans(b"a:b:42:7x"), Some(vec![0..3, 7..8]));
        assert_eq!(t("rl:{identity}").wildcard_spans(b"rl:4"), Some(vec![]));
    }

    #[test]
    fn bad_templates_say_why() {
        for (bad, why) in [
            ("rl:", "exactly once"),
            ("rl:{identity}:{identity}", "exactly once"),
            ("rl:{id}", "unknown placeholder {id}"),
            ("rl:{identity", "without its"),
            ("rl:}{identity}", "without its"),
            ("rl:[ab]{identity}", "not supported"),
            ("rl: {identity}", "spaces"),
            ("", "empty"),
        ] {
            let err = KeyTemplate::parse(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}
