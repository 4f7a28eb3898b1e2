//! A limiter's key layout: the templates of every key it keeps per identity, and where the
//! description came from.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::KeyError;
use super::template::KeyTemplate;
use super::{IDENTITY, TEMPLATES_MAX};

/// Who described the layout a run used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", content = "detail", rename_all = "kebab-case")]
pub enum LayoutSource {
    /// Nobody: the harness's own key, `key_prefix` + identity.
    Default,
    /// `[limit] keys` in the scenario file.
    Scenario,
    /// `--keys` on the command line.
    CommandLine,
    /// The limiter itself (an exec adapter's hello, a Lua sidecar), named.
    Limiter(String),
}

impl fmt::Display for LayoutSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Default => f.write_str("the default: key_prefix + identity"),
            Self::Scenario => f.write_str("the scenario's [limit] keys"),
            Self::CommandLine => f.write_str("--keys on the command line"),
            Self::Limiter(what) => write!(f, "declared by the limiter ({what})"),
        }
    }
}

/// Every key a limiter keeps for an identity, as templates: one place that says which keys
/// are the limiter's, used by the fault proxy (which request a command belongs to), the
/// observer (what to sample and listen to), the planted setup and the checkers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyLayout {
    pub templates: Vec<KeyTemplate>,
    /// Identities are numbered 0 to `identities - 1`; a key naming another number is not one
    /// of the run's.
    pub identities: u32,
    pub source: LayoutSource,
}

impl KeyLayout {
    /// The harness's own layout: one key per identity, `key_prefix` + identity.
    pub fn default_for(key_prefix: &str, identities: u32) -> Self {
        let template = KeyTemplate::parse(&format!("{}{IDENTITY}", escape_braces(key_prefix)))
            .expect("a validated key_prefix makes a valid template");
        Self {
            templates: vec![template],
            identities,
            source: LayoutSource::Default,
        }
    }

    /// A layout from templates as written (at least one, at most [`TEMPLATES_MAX`]).
    pub fn parse(texts: &[String], identities: u32, source: LayoutSource) -> Result<Self, KeyError> {
        if texts.is_empty() {
            return Err(KeyError::NoTemplates);
        }
        if texts.len() > TEMPLATES_MAX {
            return Err(KeyError::TooManyTemplates { count: texts.len() });
        }
        let templates = texts
            .iter()
            .map(|t| KeyTemplate::parse(t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            templates,
            identities,
            source,
        })
    }

    /// The identity whose key this is, if it is one of the run's limiter keys.
    pub fn identity_of(&self, key: &[u8]) -> Option<u32> {
        self.templates
            .iter()
            .find_map(|t| t.identity_of(key))
            .filter(|&id| id < self.identities)
    }

    /// Whether `key` is a limiter key of `identity`.
    pub fn is_key_of(&self, key: &str, identity: u32) -> bool {
        self.identity_of(key.as_bytes()) == Some(identity)
    }

    /// The index of the first template `key` matches (to count each key once when several
    /// templates' globs overlap).
    pub fn template_of(&self, key: &[u8]) -> Option<usize> {
        self.templates.iter().position(|t| t.identity_of(key).is_some())
    }

    /// One Redis glob per template, for SCAN MATCH and PSUBSCRIBE (duplicates removed).
    pub fn patterns(&self) -> Vec<String> {
        let mut patterns: Vec<String> = Vec::new();
        for pattern in self.templates.iter().map(KeyTemplate::pattern) {
            if !patterns.contains(&pattern) {
                patterns.push(pattern);
            }
        }
        patterns
    }

    /// The globs of one identity's keys.
    pub fn patterns_for(&self, identity: u32) -> Vec<String> {
        let mut patterns: Vec<String> = Vec::new();
        for pattern in self.templates.iter().map(|t| t.pattern_for(identity)) {
            if !patterns.contains(&pattern) {
                patterns.push(pattern);
            }
        }
        patterns
    }

    /// `key` as a reviewed snapshot may hold it: whatever the clock decides in it written as
    /// [`CLOCK_MARK`], so that the same limiter gives the same snapshot today and tomorrow. In
    /// a key of the layout, the clock's part is a wildcard's match that holds digits (a date,
    /// epoch seconds, a window's number: from its first digit to its last); in any other key,
    /// a run of 8 or more digits or a date (`2026-12-04`).
    pub fn stable_name(&self, key: &str) -> String {
        let spans = self
            .templates
            .iter()
            .find_map(|t| t.identity_of(key.as_bytes()).and(t.wildcard_spans(key.as_bytes())));
        match spans {
            Some(spans) => mark_spans(key, &spans),
            None => stable_text(key),
        }
    }

    /// The templates, quoted and joined: "`a`, `b`".
    pub fn describe(&self) -> String {
        self.templates
            .iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn texts(&self) -> Vec<String> {
        self.templates.iter().map(|t| t.as_str().to_owned()).collect()
    }
}

/// What stands for the part of a key the clock decides, in reviewed snapshots and baselines.
pub const CLOCK_MARK: &str = "<window>";

/// `key` with each span's digits (its first digit to its last) replaced by [`CLOCK_MARK`].
fn mark_spans(key: &str, spans: &[std::ops::Range<usize>]) -> String {
    let bytes = key.as_bytes();
    let mut out = String::new();
    let mut done = 0;
    for span in spans {
        let digits: Vec<usize> = span.clone().filter(|&i| bytes[i].is_ascii_digit()).collect();
        let (Some(&first), Some(&last)) = (digits.first(), digits.last()) else {
            continue;
        };
        out.push_str(&key[done..first]);
        out.push_str(CLOCK_MARK);
        done = last + 1;
    }
    out.push_str(&key[done..]);
    out
}

/// `text` with every run of 8 or more digits, and every date written `YYYY-MM-DD`, replaced
/// by [`CLOCK_MARK`] (an identity's number has fewer digits than a date or an epoch).
pub fn stable_text(text: &str) -> String {
    let key = text;
    let bytes = key.as_bytes();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let run = |from: usize| bytes[from..].iter().take_while(|b| b.is_ascii_digit()).count();
        let len = run(i);
        let is_date = len == 4
            && bytes.get(i + 4) == Some(&b'-')
            && run(i + 5) == 2
            && bytes.get(i + 7) == Some(&b'-')
            && run(i + 8) == 2;
        if is_date {
            spans.push(i..i + 10);
            i += 10;
        } else {
            if len >= 8 {
                spans.push(i..i + len);
            }
            i += len;
        }
    }
    mark_spans(key, &spans)
}

/// A literal for a template: braces doubled.
pub fn escape_braces(literal: &str) -> String {
    literal.replace('{', "{{").replace('}', "}}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_prefix_and_identity() {
        let layout = KeyLayout::default_for("rl:", 4);
        assert_eq!(layout.identity_of(b"rl:3"), Some(3));
        assert_eq!(layout.identity_of(b"rl:4"), None, "no such identity");
        assert_eq!(layout.identity_of(b"lh-cache:3"), None);
        assert_eq!(layout.patterns(), vec!["rl:*"]);
        let braces = KeyLayout::default_for("app{x}:", 1);
        assert_eq!(braces.identity_of(b"app{x}:0"), Some(0));
    }

    #[test]
    fn stable_names_hold_nothing_the_clock_decides() {
        let layout = KeyLayout::parse(
            &["geocode:calls:{identity}:*".into(), "api:rl:{identity}:*:count".into()],
            200_000,
            LayoutSource::Scenario,
        )
        .unwrap();
        assert_eq!(
            layout.stable_name("geocode:calls:0:3522377186"),
            "geocode:calls:0:<window>"
        );
        assert_eq!(
            layout.stable_name("geocode:calls:17:2026-12-04"),
            "geocode:calls:17:<window>"
        );
        assert_eq!(
            layout.stable_name("api:rl:199999:w1796412344:count"),
            "api:rl:199999:w<window>:count"
        );
        assert_eq!(
            layout.stable_name("geocode:calls:3:today"),
            "geocode:calls:3:today",
            "no digits: not the clock's"
        );
        // Keys outside the layout: dates and long numbers only; an identity stays.
        assert_eq!(layout.stable_name("other:12:20261204"), "other:12:<window>");
        assert_eq!(layout.stable_name("other:12:2026-12-04:x"), "other:12:<window>:x");
        assert_eq!(layout.stable_name("rl:199999"), "rl:199999");
        let plain = KeyLayout::default_for("rl:", 4);
        assert_eq!(plain.stable_name("rl:3"), "rl:3");
    }

    #[test]
    fn several_templates() {
        let layout = KeyLayout::parse(
            &["bucket.{{{identity}}}.tokens".into(), "bucket.{{{identity}}}.ts".into()],
            2,
            LayoutSource::Scenario,
        )
        .unwrap();
        assert_eq!(layout.identity_of(b"bucket.{1}.ts"), Some(1));
        assert_eq!(layout.template_of(b"bucket.{1}.ts"), Some(1));
        assert!(layout.is_key_of("bucket.{0}.tokens", 0));
        assert!(!layout.is_key_of("bucket.{0}.tokens", 1));
        assert_eq!(layout.patterns_for(1), vec!["bucket.{1}.tokens", "bucket.{1}.ts"]);
        assert_eq!(
            layout.describe(),
            "`bucket.{{{identity}}}.tokens`, `bucket.{{{identity}}}.ts`"
        );
        assert!(KeyLayout::parse(&[], 1, LayoutSource::Scenario).is_err());
    }
}
