//! `lua:PATH`: the team's own Lua script, loaded with SCRIPT LOAD and called with EVALSHA
//! the way client libraries do (so a SCRIPT FLUSH or a failover later has something to
//! break). How it is called and how its reply maps to a decision follow the harness's
//! convention unless a sidecar file (`PATH` with `.toml` for `.lua`) says otherwise:
//!
//! ```toml
//! keys = ["{key}"]                 # KEYS, in order
//! args = ["0", "{window_ms}"]      # ARGV, in order
//! algorithm = "fixed-window"       # what the checkers expect of it
//! # layout = ["app:{identity}:*"]  # the keys it keeps, when the script builds others than KEYS
//! # ttl_max_windows = 2            # how long its keys may live, in windows (default 1)…
//! # ttl_max_ms = 93600000          # …or in ms, whatever the window (a daily cap's 26 h)
//! # plant = ["SET {key} 99"]       # commands writing an identity's exhausted state, no TTL
//! [result]
//! count_index = 1                  # 1-based element of an array reply holding the count (0: the reply itself)
//! # allowed_index = 1              # or: the element that says admitted…
//! # allowed_value = 1              # …when it equals this (default 1)
//! ```
//!
//! Placeholders: see [`super::PLACEHOLDERS`]; `{{` and `}}` are literal braces.
//! Without a sidecar: KEYS = [key], ARGV = [requests_max, window_ms, cost, now_ms]; a reply
//! `{allowed, count}` (allowed 1/0) or a bare integer count (admitted while count ≤
//! requests_max). The script's keys are its KEYS templates (placeholders that vary per
//! request becoming `*`) unless `layout` says otherwise.

use std::path::{Path, PathBuf};

use crate::backend::Conn;
use async_trait::async_trait;
use redis::{ErrorKind, RedisError, RedisResult, Value};
use serde::Deserialize;

use super::builtin::lua::LuaScript;
use super::template::{Template, Values};
use super::{Algorithm, Decision, Limiter, LimiterError, Plant, Wire};
use crate::error::SetupError;
use crate::keys::{KeyLayout, KeyTemplate, LayoutSource};
use crate::scenario::{Limit, TtlMax};

/// How the harness calls the script and reads its reply.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptConvention {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default = "default_keys")]
    pub keys: Vec<String>,
    #[serde(default = "default_args")]
    pub args: Vec<String>,
    #[serde(default = "default_algorithm")]
    pub algorithm: Algorithm,
    /// The keys the script keeps per identity, as key templates, when they are not its KEYS.
    #[serde(default)]
    pub layout: Option<Vec<String>>,
    /// How long its keys may live, in windows (a bucket kept two refill periods: 2)…
    #[serde(default)]
    pub ttl_max_windows: Option<f64>,
    /// …or in ms, whatever the window (a daily cap: 93600000).
    #[serde(default)]
    pub ttl_max_ms: Option<u64>,
    /// Commands that write an identity's exhausted state without a TTL (templates).
    #[serde(default)]
    pub plant: Option<Vec<String>>,
    #[serde(default)]
    pub result: ResultMapping,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultMapping {
    /// 1-based index of the count in an array reply; 0 when the reply itself is the count.
    pub count_index: Option<usize>,
    /// 1-based index of the admitted flag in an array reply; 0 when the reply itself is it.
    pub allowed_index: Option<usize>,
    /// The value of the flag that means admitted (default 1).
    pub allowed_value: Option<i64>,
}

fn default_keys() -> Vec<String> {
    vec!["{key}".into()]
}

fn default_args() -> Vec<String> {
    ["{requests_max}", "{window_ms}", "{cost}", "{now_ms}"]
        .map(str::to_owned)
        .to_vec()
}

fn default_algorithm() -> Algorithm {
    Algorithm::FixedWindow
}

impl Default for ScriptConvention {
    fn default() -> Self {
        Self {
            name: None,
            keys: default_keys(),
            args: default_args(),
            algorithm: default_algorithm(),
            layout: None,
            ttl_max_windows: None,
            ttl_max_ms: None,
            plant: None,
            result: ResultMapping::default(),
        }
    }
}

impl ScriptConvention {
    fn validate(&self) -> Result<(), LimiterError> {
        for template in self.keys.iter().chain(&self.args).chain(self.plant.iter().flatten()) {
            Template::parse(template)?;
        }
        for key in self.layout.iter().flatten() {
            KeyTemplate::parse(key).map_err(LimiterError::Layout)?;
        }
        if self.layout.as_ref().is_some_and(Vec::is_empty) {
            return Err(LimiterError::EmptyLayout);
        }
        TtlMax::declared(self.ttl_max_windows, self.ttl_max_ms)?;
        if self.layout.is_none() {
            self.key_templates_checked()?;
        }
        if self.result.allowed_index.is_none()
            && self.result.count_index.is_none()
            && self.result.allowed_value.is_some()
        {
            return Err(LimiterError::AllowedValueAlone);
        }
        Ok(())
    }

    /// Each KEYS template that names the identity must make a key template (else the sidecar
    /// must say its keys with `layout`).
    fn key_templates_checked(&self) -> Result<(), LimiterError> {
        let probe = Limit {
            requests_max: 1,
            window_ms: 1000,
            identities: 1,
            instances: 1,
            key_prefix: "rl:".into(),
            keys: None,
        };
        for key in &self.keys {
            if let Some(template) = Template::parse(key)?.as_key_template(&probe) {
                KeyTemplate::parse(&template).map_err(|source| LimiterError::KeysTemplate {
                    key: key.clone(),
                    source,
                })?;
            }
        }
        Ok(())
    }

    /// The keys the script keeps: `layout`, else its KEYS templates; `None` when that is the
    /// harness's own key (`{key}` alone).
    fn key_templates(&self, limit: &Limit) -> Option<Vec<String>> {
        if let Some(layout) = &self.layout {
            return Some(layout.clone());
        }
        if self.keys == default_keys() {
            return None;
        }
        let derived: Vec<String> = self
            .keys
            .iter()
            .filter_map(|k| Template::parse(k).ok()?.as_key_template(limit))
            .collect();
        (!derived.is_empty()).then_some(derived)
    }
}

/// A Lua script from a file.
#[derive(Debug)]
pub struct ScriptLimiter {
    name: String,
    path: PathBuf,
    /// Who says its keys, for the report: "the Lua sidecar PATH", "the built-in NAME".
    keys_from: String,
    convention: ScriptConvention,
    keys: Vec<Template>,
    args: Vec<Template>,
    plant: Vec<Template>,
    commands: String,
    script: LuaScript,
}

impl ScriptLimiter {
    /// `lua:PATH`: read the script and its sidecar convention, if any.
    pub fn load(spec: &str) -> Result<Self, SetupError> {
        let path = PathBuf::from(spec.strip_prefix("lua:").unwrap_or(spec));
        let source = read_capped(&path, "Lua script")?;
        let sidecar = Some(path.with_extension("toml")).filter(|s| s.is_file() && *s != path);
        let convention = match &sidecar {
            Some(sidecar) => parse_convention(sidecar, &read_capped(sidecar, "Lua convention")?)?,
            None => ScriptConvention::default(),
        };
        let name = format!("lua:{}", path.display());
        let from = sidecar.as_ref().map(|s| s.display().to_string());
        let keys_from = from.as_ref().map_or_else(
            || "the Lua script's KEYS".to_owned(),
            |s| format!("the Lua sidecar {s}"),
        );
        Ok(Self::new(name, path, &source, convention, from.as_deref(), keys_from))
    }

    /// A built-in kept as a script and its convention (the sidecar's text, which must be
    /// valid: a built-in's is checked by its tests): `name` is the built-in's name.
    pub fn builtin(name: &str, source: &str, convention: &str) -> Self {
        let origin = format!("the built-in {name}");
        let convention = parse_convention(Path::new(&origin), convention).expect("a built-in's convention is valid");
        Self::new(
            name.to_owned(),
            PathBuf::from(&origin),
            source,
            convention,
            Some(&origin),
            origin.clone(),
        )
    }

    /// `from`: where the convention came from (a sidecar's path), when not the default.
    fn new(
        name: String,
        path: PathBuf,
        source: &str,
        convention: ScriptConvention,
        from: Option<&str>,
        keys_from: String,
    ) -> Self {
        let commands = format!(
            "EVALSHA <sha of {}> {} {} {}   (one round trip; SCRIPT LOAD + retry after NOSCRIPT)\n\
             result: {}{}",
            path.display(),
            convention.keys.len(),
            convention.keys.join(" "),
            convention.args.join(" "),
            describe_result(&convention.result),
            match (&convention.name, &from) {
                (Some(n), Some(from)) => format!("\nconvention: {n} (from {from})"),
                _ => String::new(),
            }
        );
        let parse = |templates: &[String]| {
            templates
                .iter()
                .map(|t| Template::parse(t).expect("validated with the convention"))
                .collect::<Vec<_>>()
        };
        Self {
            name,
            path,
            keys: parse(&convention.keys),
            args: parse(&convention.args),
            plant: parse(convention.plant.as_deref().unwrap_or_default()),
            keys_from,
            script: LuaScript::new(source),
            convention,
            commands,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Parse a sidecar convention; errors name file:line:column.
pub fn parse_convention(path: &Path, text: &str) -> Result<ScriptConvention, SetupError> {
    let convention: ScriptConvention = toml::from_str(text).map_err(|e| {
        let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((1, 1));
        SetupError::Usage(format!(
            "{}:{line}:{column}: {}\n  help: see the sidecar's fields in docs/limiters.md (\"Another library's convention: a sidecar file\")",
            path.display(),
            e.message()
        ))
    })?;
    convention
        .validate()
        .map_err(|e| SetupError::Usage(format!("{}: {e}", path.display())))?;
    Ok(convention)
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

fn describe_result(r: &ResultMapping) -> String {
    match (r.allowed_index, r.count_index) {
        (Some(a), count) => format!(
            "admitted when {} == {}{}",
            element(a),
            r.allowed_value.unwrap_or(1),
            count.map(|c| format!("; count = {}", element(c))).unwrap_or_default()
        ),
        (None, Some(c)) => format!("count = {}; admitted while count <= requests_max", element(c)),
        (None, None) => "{allowed, count} (allowed 1/0), or an integer count admitted while <= requests_max".into(),
    }
}

fn element(index: usize) -> String {
    if index == 0 {
        "the reply".into()
    } else {
        format!("reply[{index}]")
    }
}

/// The longest script or sidecar file read: a limiter's script is kilobytes; a path such as
/// `/dev/zero` must not fill the memory.
pub const SCRIPT_BYTES_MAX: u64 = 1 << 20;

/// A text file of at most [`SCRIPT_BYTES_MAX`] bytes.
fn read_capped(path: &Path, what: &str) -> Result<String, SetupError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| SetupError::io("cannot read", path, e))?;
    let mut bytes = Vec::new();
    file.take(SCRIPT_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| SetupError::io("cannot read", path, e))?;
    if bytes.len() as u64 > SCRIPT_BYTES_MAX {
        return Err(SetupError::Usage(format!(
            "{} is longer than 1 MiB: not a {what} (is the path right?)",
            path.display()
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| SetupError::Usage(format!("{} is not UTF-8 text: not a {what}", path.display())))
}

/// Map a script's reply to a decision by the convention.
pub fn decide(reply: &Value, mapping: &ResultMapping, limit: &Limit) -> Result<Decision, LimiterError> {
    let pick = |index: usize| -> Result<&Value, LimiterError> {
        if index == 0 {
            return Ok(reply);
        }
        match reply {
            Value::Array(items) => items.get(index - 1).ok_or(LimiterError::NoElement {
                len: items.len(),
                index,
            }),
            other => Err(LimiterError::NotAnArray { reply: other.clone() }),
        }
    };
    let count = match mapping.count_index {
        Some(i) => Some(integer(pick(i)?)?),
        None => None,
    };
    match (mapping.allowed_index, count) {
        (Some(i), count) => Ok(Decision {
            allowed: flag(pick(i)?)?.is_some_and(|f| f == mapping.allowed_value.unwrap_or(1)),
            count,
        }),
        (None, Some(count)) => Ok(Decision {
            allowed: count <= limit.requests_max as i64,
            count: Some(count),
        }),
        (None, None) => match reply {
            Value::Array(items) if !items.is_empty() => Ok(Decision {
                allowed: flag(&items[0])? == Some(1),
                count: items.get(1).map(integer).transpose()?,
            }),
            other => {
                let count = integer(other)?;
                Ok(Decision {
                    allowed: count <= limit.requests_max as i64,
                    count: Some(count),
                })
            }
        },
    }
}

/// An allowed flag: a number, or a Lua boolean (`true` arrives as 1, `false` as nil). Nil
/// (`false`) is a denial whatever number means "allowed": None never matches.
fn flag(v: &Value) -> Result<Option<i64>, LimiterError> {
    match v {
        Value::Nil => Ok(None),
        other => number(other).map(Some),
    }
}

/// A count: a number of requests, so never negative; a nil or empty reply carries no decision.
fn integer(v: &Value) -> Result<i64, LimiterError> {
    match v {
        Value::Nil => Err(LimiterError::NilCount),
        other => match number(other)? {
            count if count < 0 => Err(LimiterError::NegativeCount { count }),
            n => Ok(n),
        },
    }
}

/// A number the decision can rest on: an integer, a boolean, or a string holding an integer
/// (`"5"`). A fraction (`"1.5"`) or a number past what a count can hold is an error, never
/// rounded or clamped into a decision.
fn number(v: &Value) -> Result<i64, LimiterError> {
    let text = |s: &str| {
        s.trim()
            .parse::<i64>()
            .map_err(|_| LimiterError::NotAnInteger { text: cut(s) })
    };
    match v {
        Value::Int(n) => Ok(*n),
        Value::Boolean(b) => Ok(i64::from(*b)),
        Value::BulkString(bytes) => match std::str::from_utf8(bytes) {
            Ok(s) => text(s),
            Err(_) => Err(LimiterError::NotText { len: bytes.len() }),
        },
        Value::SimpleString(s) => text(s),
        other => Err(LimiterError::NotANumber { reply: other.clone() }),
    }
}

/// At most 40 characters of a reply, for an error message.
fn cut(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[async_trait]
impl Limiter for ScriptLimiter {
    fn name(&self) -> &str {
        &self.name
    }

    fn commands(&self) -> &str {
        &self.commands
    }

    fn round_trips_max(&self) -> u32 {
        1
    }

    fn algorithm(&self) -> Algorithm {
        self.convention.algorithm
    }

    fn declared_keys(&self, limit: &Limit) -> Option<KeyLayout> {
        let templates = self.convention.key_templates(limit)?;
        KeyLayout::parse(
            &templates,
            limit.identities,
            LayoutSource::Limiter(self.keys_from.clone()),
        )
        .ok()
    }

    fn ttl_max(&self) -> Option<TtlMax> {
        TtlMax::declared(self.convention.ttl_max_windows, self.convention.ttl_max_ms)
            .ok()
            .flatten()
    }

    /// A counter at the harness's key when the script keeps one there (KEYS = [key], fixed
    /// window) and the sidecar gives no `plant` commands.
    fn count_at_key(&self) -> bool {
        self.convention.keys == default_keys() && self.convention.algorithm == Algorithm::FixedWindow
    }

    async fn plant_exhausted(&self, conn: &mut Conn, identity: u32, key: &str, limit: &Limit) -> RedisResult<Plant> {
        if self.plant.is_empty() {
            if self.count_at_key() {
                return super::plant_counter(conn, key, limit).await;
            }
            return Ok(Plant::Unsupported(format!(
                "the Lua sidecar of `{}` gives no `plant` commands",
                self.name
            )));
        }
        let values = Values::new(key, identity, 0, limit);
        let mut sent = Vec::new();
        for template in &self.plant {
            let line = template.render(&values);
            let args: Vec<&str> = line.split_whitespace().collect();
            let Some((name, rest)) = args.split_first() else {
                continue;
            };
            let _: Value = redis::cmd(name).arg(rest).query_async(conn).await?;
            sent.push(line.clone());
        }
        Ok(Plant::Planted(sent.join("; ")))
    }

    async fn prepare(&self, conn: &mut Conn, _limit: &Limit) -> RedisResult<()> {
        self.script.load(conn).await
    }

    async fn acquire(&self, wire: &mut Wire<'_>, key: &str, limit: &Limit) -> RedisResult<Decision> {
        let req = wire.request().clone();
        let values = Values::new(key, req.identity, req.id, limit);
        let keys: Vec<String> = self.keys.iter().map(|t| t.render(&values)).collect();
        let args: Vec<String> = self.args.iter().map(|t| t.render(&values)).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let reply: Value = self.script.eval(wire, &keys, args).await?;
        decide(&reply, &self.convention.result, limit).map_err(|e| {
            RedisError::from((
                ErrorKind::Client,
                "the script's reply does not fit its convention",
                format!("{e} (script {})", self.path.display()),
            ))
        })
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
    fn default_convention_reads_pairs_and_bare_counts() {
        let m = ResultMapping::default();
        let pair = Value::Array(vec![Value::Int(0), Value::Int(6)]);
        assert_eq!(
            decide(&pair, &m, &limit()).unwrap(),
            Decision {
                allowed: false,
                count: Some(6)
            }
        );
        assert!(decide(&Value::Int(5), &m, &limit()).unwrap().allowed);
        assert!(!decide(&Value::Int(6), &m, &limit()).unwrap().allowed);
        assert!(decide(&Value::SimpleString("OK".into()), &m, &limit()).is_err());
    }

    #[test]
    fn a_count_is_an_integer_never_rounded_nor_clamped() {
        let m = ResultMapping::default();
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert!(
            decide(&bulk("5"), &m, &limit()).unwrap().allowed,
            "an integer-valued string"
        );
        let half = decide(&bulk("1.5"), &m, &limit()).unwrap_err().to_string();
        assert!(half.contains("expected an integer") && half.contains("1.5"), "{half}");
        let huge = Value::Array(vec![Value::Int(1), bulk(&"9".repeat(30))]);
        assert!(decide(&huge, &m, &limit()).is_err(), "a count past i64 is no count");
        assert!(decide(&Value::SimpleString("2.0e0".into()), &m, &limit()).is_err());
        assert!(decide(&bulk("\u{ff}"), &m, &limit()).is_err());
    }

    #[test]
    fn a_script_file_is_capped() {
        let err = match ScriptLimiter::load("lua:/dev/zero") {
            Err(e) => e.to_string(),
            Ok(_) => panic!("/dev/zero is no script"),
        };
        assert!(err.contains("longer than 1 MiB"), "{err}");
    }

    #[test]
    fn replies_that_carry_no_decision_are_errors() {
        let m = ResultMapping::default();
        let nil = decide(&Value::Nil, &m, &limit()).unwrap_err().to_string();
        assert!(nil.contains("nil"), "{nil}");
        assert!(
            decide(&Value::BulkString(Vec::new()), &m, &limit()).is_err(),
            "an empty reply"
        );
        assert!(decide(&Value::Array(vec![]), &m, &limit()).is_err(), "an empty array");
        let negative = decide(&Value::Int(-1), &m, &limit()).unwrap_err().to_string();
        assert!(negative.contains("negative"), "{negative}");
        assert!(
            decide(&Value::Array(vec![Value::Int(1), Value::Int(-3)]), &m, &limit()).is_err(),
            "a negative count beside the flag"
        );
        assert!(
            !decide(&Value::Array(vec![Value::Nil, Value::Int(3)]), &m, &limit())
                .unwrap()
                .allowed,
            "Lua false as the flag is a denial"
        );
        let zero_allows = ResultMapping {
            count_index: None,
            allowed_index: Some(1),
            allowed_value: Some(0),
        };
        assert!(
            !decide(&Value::Array(vec![Value::Nil]), &zero_allows, &limit())
                .unwrap()
                .allowed,
            "nil is a denial even where 0 means allowed"
        );
    }

    #[test]
    fn configured_indices_pick_elements() {
        let m = ResultMapping {
            count_index: Some(1),
            allowed_index: None,
            allowed_value: None,
        };
        let reply = Value::Array(vec![Value::Int(7), Value::Int(900)]);
        assert_eq!(decide(&reply, &m, &limit()).unwrap().count, Some(7));
        assert!(!decide(&reply, &m, &limit()).unwrap().allowed);
        let cell = ResultMapping {
            count_index: None,
            allowed_index: Some(1),
            allowed_value: Some(0),
        };
        assert!(
            decide(&Value::Array(vec![Value::Int(0), Value::Int(3)]), &cell, &limit())
                .unwrap()
                .allowed
        );
        assert!(decide(&Value::Array(vec![]), &cell, &limit()).is_err());
    }

    #[test]
    fn sidecar_errors_name_line_and_column() {
        let err = parse_convention(Path::new("x.toml"), "keys = [\"{key}\"]\nargz = []\n").unwrap_err();
        assert!(err.to_string().starts_with("x.toml:2:1:"), "{err}");
        let err = parse_convention(Path::new("x.toml"), "args = [\"{windw_ms}\"]\n").unwrap_err();
        assert!(err.to_string().contains("unknown placeholder {windw_ms}"), "{err}");
        let ok = parse_convention(
            Path::new("x.toml"),
            "args = [\"0\", \"{window_ms}\"]\n[result]\ncount_index = 1\n",
        );
        assert_eq!(ok.unwrap().args, vec!["0", "{window_ms}"]);
    }

    #[test]
    fn a_sidecar_declares_keys_from_its_keys_or_its_layout() {
        let limit = limit();
        let convention = |text: &str| parse_convention(Path::new("x.toml"), text).unwrap();
        assert_eq!(
            ScriptConvention::default().key_templates(&limit),
            None,
            "the harness's key"
        );
        let two = convention("keys = [\"b.{{{identity}}}.tokens\", \"b.{{{identity}}}.ts\"]\n");
        assert_eq!(
            two.key_templates(&limit),
            Some(vec!["b.{{{identity}}}.tokens".into(), "b.{{{identity}}}.ts".into()])
        );
        let inside = convention("layout = [\"{identity}:log\"]\n");
        assert_eq!(inside.key_templates(&limit), Some(vec!["{identity}:log".into()]));
        let err = parse_convention(Path::new("x.toml"), "layout = [\"log\"]\n").unwrap_err();
        assert!(err.to_string().contains("exactly once"), "{err}");
        let err = parse_convention(Path::new("x.toml"), "keys = [\"{key}:{identity}\"]\n").unwrap_err();
        assert!(err.to_string().contains("give them with `layout`"), "{err}");
        // A daily cap on a 50 ms window declares 1,872,000 windows, or 26 h in ms: no cap.
        assert!(parse_convention(Path::new("x.toml"), "ttl_max_windows = 1872000\n").is_ok());
        assert!(parse_convention(Path::new("x.toml"), "ttl_max_ms = 93600000\n").is_ok());
        let err = parse_convention(Path::new("x.toml"), "ttl_max_windows = 0\n").unwrap_err();
        assert!(err.to_string().contains("positive"), "{err}");
        let err = parse_convention(Path::new("x.toml"), "ttl_max_windows = 2\nttl_max_ms = 5\n").unwrap_err();
        assert!(err.to_string().contains("both"), "{err}");
    }
}
