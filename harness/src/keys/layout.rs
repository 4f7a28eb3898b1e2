//! A limiter's key layout: the templates of every key it keeps per identity, and where the
//! description came from.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::template::{IDENTITY, KeyTemplate};

/// The most templates a layout may have.
pub const TEMPLATES_MAX: usize = 32;

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
    pub fn parse(texts: &[String], identities: u32, source: LayoutSource) -> Result<Self, String> {
        if texts.is_empty() {
            return Err("a key layout needs at least one template, e.g. [\"rl:{identity}\"]".into());
        }
        if texts.len() > TEMPLATES_MAX {
            return Err(format!(
                "a key layout of {} templates: at most {TEMPLATES_MAX} (each is scanned and subscribed to)",
                texts.len()
            ));
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
