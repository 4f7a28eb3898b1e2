//! Templates of a Lua sidecar (`keys`, `args`, `plant`): `{name}` placeholders filled in per
//! request, `{{` and `}}` for literal braces (`bucket.{{{identity}}}` is `bucket.{7}`).

use super::{LimiterError, PLACEHOLDERS};
use crate::keys::{IDENTITY, escape_braces};
use crate::scenario::Limit;

/// Placeholders whose value changes from request to request: in a key they make a key per
/// window (or per request), which a layout describes with `*`.
const VARYING: [&str; 4] = ["now_ms", "now_s", "now_us", "request_id"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Field(&'static str),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pub text: String,
    pieces: Vec<Piece>,
}

impl Template {
    pub fn parse(text: &str) -> Result<Self, LimiterError> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            let mut take = c.len_utf8();
            if rest.starts_with("{{") || rest.starts_with("}}") {
                literal.push(c);
                take = 2;
            } else if c == '{' {
                let Some(close) = rest.find('}') else {
                    return Err(LimiterError::Unclosed { text: text.to_owned() });
                };
                let name = &rest[1..close];
                let Some(field) = PLACEHOLDERS.iter().find(|p| **p == name) else {
                    return Err(LimiterError::UnknownPlaceholder {
                        text: text.to_owned(),
                        name: name.to_owned(),
                    });
                };
                if !literal.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Field(field));
                take = close + 1;
            } else if c == '}' {
                return Err(LimiterError::Unopened { text: text.to_owned() });
            } else {
                literal.push(c);
            }
            rest = &rest[take..];
        }
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Self {
            text: text.to_owned(),
            pieces,
        })
    }

    /// The template with every placeholder's value.
    pub fn render(&self, values: &Values<'_>) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Field(name) => out.push_str(&values.get(name)),
            }
        }
        out
    }

    /// The keys this template makes, as a key-layout template: `{identity}` where the identity
    /// goes, `*` where a value varies per request, the limit's values filled in. `None` when
    /// the key is not per identity.
    pub fn as_key_template(&self, limit: &Limit) -> Option<String> {
        let values = Values::new("", 0, 0, limit);
        let mut out = String::new();
        let mut per_identity = false;
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(&escape_braces(t)),
                Piece::Field("identity") => {
                    per_identity = true;
                    out.push_str(IDENTITY);
                }
                Piece::Field("key") => {
                    per_identity = true;
                    out.push_str(&escape_braces(&limit.key_prefix));
                    out.push_str(IDENTITY);
                }
                Piece::Field(name) if VARYING.contains(name) => out.push('*'),
                Piece::Field(name) => out.push_str(&values.get(name)),
            }
        }
        per_identity.then_some(out)
    }
}

/// The values placeholders take for one request.
#[derive(Debug)]
pub struct Values<'a> {
    key: &'a str,
    identity: u32,
    request_id: u64,
    limit: &'a Limit,
    now: std::time::Duration,
}

impl<'a> Values<'a> {
    pub fn new(key: &'a str, identity: u32, request_id: u64, limit: &'a Limit) -> Self {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Self {
            key,
            identity,
            request_id,
            limit,
            now,
        }
    }

    fn get(&self, name: &str) -> String {
        let limit = self.limit;
        match name {
            "key" => self.key.to_owned(),
            "identity" => self.identity.to_string(),
            "requests_max" => limit.requests_max.to_string(),
            "window_ms" => limit.window_ms.to_string(),
            "window_s" => limit.window_ms.div_ceil(1000).to_string(),
            "rate_per_s" => format!("{}", limit.requests_max as f64 * 1000.0 / limit.window_ms as f64),
            "cost" => "1".to_owned(),
            "now_ms" => self.now.as_millis().to_string(),
            "now_s" => self.now.as_secs().to_string(),
            "now_us" => self.now.as_micros().to_string(),
            "request_id" => self.request_id.to_string(),
            other => unreachable!("placeholder {other} is validated at parse time"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit() -> Limit {
        Limit {
            requests_max: 5,
            window_ms: 1000,
            identities: 1,
            instances: 1,
            key_prefix: "rl:".into(),
            keys: None,
        }
    }

    #[test]
    fn placeholders_expand_and_braces_escape() {
        let limit = limit();
        let t = Template::parse("{key}/{requests_max}/{window_s}/{request_id}/{rate_per_s}").unwrap();
        assert_eq!(t.render(&Values::new("rl:3", 3, 42, &limit)), "rl:3/5/1/42/5");
        let tagged = Template::parse("bucket.{{{identity}}}.tokens").unwrap();
        assert_eq!(tagged.render(&Values::new("rl:7", 7, 0, &limit)), "bucket.{7}.tokens");
        assert!(
            Template::parse("{windw_ms}")
                .unwrap_err()
                .to_string()
                .contains("unknown placeholder {windw_ms}")
        );
        assert!(Template::parse("a{b").is_err());
        assert!(Template::parse("a}b").is_err());
    }

    #[test]
    fn keys_become_layout_templates() {
        let limit = limit();
        let t = |s: &str| Template::parse(s).unwrap().as_key_template(&limit);
        assert_eq!(t("{key}").as_deref(), Some("rl:{identity}"));
        assert_eq!(
            t("bucket.{{{identity}}}.tokens").as_deref(),
            Some("bucket.{{{identity}}}.tokens")
        );
        assert_eq!(t("day:{identity}:{now_s}").as_deref(), Some("day:{identity}:*"));
        assert_eq!(t("rl:{identity}:{requests_max}").as_deref(), Some("rl:{identity}:5"));
        assert_eq!(t("global"), None, "not per identity");
    }
}
