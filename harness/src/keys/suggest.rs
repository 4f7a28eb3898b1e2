//! Proposing a layout from keys seen on the wire: when a run's layout matched nothing, the
//! hint can say which templates would have.

use std::collections::BTreeMap;

use super::IDENTITY;
use super::layout::escape_braces;

/// A key the limiter named, and the identity of the request that named it when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sighting {
    pub key: String,
    pub identity: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Digits(String),
    Text(String),
}

/// A key's text between its runs of digits (`None` where a run of digits stands).
type Shape = Vec<Option<String>>;

fn tokens(key: &str) -> Vec<Token> {
    let mut out: Vec<Token> = Vec::new();
    for c in key.chars() {
        let digit = c.is_ascii_digit();
        match out.last_mut() {
            Some(Token::Digits(s)) if digit => s.push(c),
            Some(Token::Text(s)) if !digit => s.push(c),
            _ => out.push(if digit {
                Token::Digits(c.to_string())
            } else {
                Token::Text(c.to_string())
            }),
        }
    }
    out
}

/// Templates that describe the sighted keys: keys are grouped by their text between runs of
/// digits; in each group, the run of digits that always equals the requester's identity
/// becomes `{identity}`, runs that vary otherwise become `*`, and the rest stays as it is.
/// Groups with no such run (keys not per identity) give nothing. Largest groups first.
pub fn suggest_templates(sightings: &[Sighting]) -> Vec<String> {
    let mut groups: BTreeMap<Shape, Vec<(Vec<Token>, u32)>> = BTreeMap::new();
    for s in sightings {
        let Some(identity) = s.identity else { continue };
        if s.key.contains(['*', '?', '[', ']', '\\']) || s.key.contains(|c: char| c.is_whitespace() || c.is_control()) {
            continue;
        }
        let toks = tokens(&s.key);
        let shape = toks
            .iter()
            .map(|t| match t {
                Token::Text(s) => Some(s.clone()),
                Token::Digits(_) => None,
            })
            .collect();
        groups.entry(shape).or_default().push((toks, identity));
    }
    let mut found: Vec<(usize, String)> = groups
        .values()
        .filter_map(|keys| Some((keys.len(), template_of(keys)?)))
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut templates: Vec<String> = Vec::new();
    for (_, t) in found {
        if !templates.contains(&t) {
            templates.push(t);
        }
    }
    templates
}

fn template_of(keys: &[(Vec<Token>, u32)]) -> Option<String> {
    let (first, _) = keys.first()?;
    let digit_at = |i: usize, key: &[Token]| match &key[i] {
        Token::Digits(d) => d.clone(),
        Token::Text(_) => String::new(),
    };
    let is_identity = |i: usize| {
        keys.iter()
            .all(|(k, id)| digit_at(i, k).parse::<u64>().ok() == Some(u64::from(*id)))
    };
    let position = (0..first.len()).find(|&i| matches!(first[i], Token::Digits(_)) && is_identity(i))?;
    let mut out = String::new();
    for (i, token) in first.iter().enumerate() {
        match token {
            Token::Text(t) => out.push_str(&escape_braces(t)),
            Token::Digits(_) if i == position => out.push_str(IDENTITY),
            Token::Digits(d) if keys.iter().all(|(k, _)| digit_at(i, k) == *d) => out.push_str(d),
            Token::Digits(_) => out.push('*'),
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(key: &str, identity: u32) -> Sighting {
        Sighting {
            key: key.into(),
            identity: Some(identity),
        }
    }

    #[test]
    fn finds_the_identity_among_other_numbers() {
        let s = [
            seen("LIMITS:LIMITER/api/0/10/1/second", 0),
            seen("LIMITS:LIMITER/api/1/10/1/second", 1),
            seen("LIMITS:LIMITER/api/3/10/1/second", 3),
        ];
        assert_eq!(suggest_templates(&s), vec!["LIMITS:LIMITER/api/{identity}/10/1/second"]);
        // One identity only: the first run equal to it.
        assert_eq!(
            suggest_templates(&[seen("LIMITS:LIMITER/api/1/10/1/second", 1)]),
            vec!["LIMITS:LIMITER/api/{identity}/10/1/second"]
        );
    }

    #[test]
    fn varying_numbers_become_wildcards_and_kinds_stay_apart() {
        let s = [
            seen("geocode:calls:0:5891", 0),
            seen("geocode:calls:0:5892", 0),
            seen("geocode:calls:1:5892", 1),
            seen("bucket.{0}.tokens", 0),
            seen("bucket.{1}.tokens", 1),
            seen("bucket.{1}.timestamp", 1),
            Sighting {
                key: "lonely".into(),
                identity: None,
            },
        ];
        assert_eq!(
            suggest_templates(&s),
            vec![
                "geocode:calls:{identity}:*",
                "bucket.{{{identity}}}.tokens",
                "bucket.{{{identity}}}.timestamp"
            ]
        );
    }

    #[test]
    fn keys_without_the_identity_give_nothing() {
        assert!(suggest_templates(&[seen("global:counter", 0), seen("global:7", 3)]).is_empty());
    }
}
