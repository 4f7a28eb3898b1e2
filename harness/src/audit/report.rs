//! What the audit found, as a verdict, a text summary and one JSON document.

use std::collections::BTreeMap;

use serde::Serialize;

use super::risk::{Risk, human_bytes};
use super::scan::{Completion, Examples, KeyTally};
use super::server::{KeyspaceEvents, ServerFacts};
use crate::checker::Verdict;

/// Everything one audit saw.
#[derive(Debug, Clone)]
pub struct AuditReport {
    /// The URL with its password masked.
    pub url: String,
    pub patterns: Vec<String>,
    pub ttl_max_ms: Option<u64>,
    pub ops_per_s: u32,
    pub facts: ServerFacts,
    pub tally: KeyTally,
    pub completion: Completion,
    pub risks: Vec<Risk>,
    pub commands_sent: u64,
    pub elapsed_ms: u64,
}

impl AuditReport {
    /// Invalid when a key has no TTL (or one above the bound given), even in a partial
    /// audit: a finding is a finding. Otherwise unknown when the audit is partial or some
    /// key could not be checked; valid when every matched key was checked and is fine.
    pub fn verdict(&self) -> Verdict {
        if self.findings() > 0 {
            Verdict::Invalid
        } else if self.completion != Completion::Complete || self.tally.unchecked > 0 || self.tally.matched == 0 {
            // Nothing matched is no pass: no limiter key was checked (a wrong pattern or db).
            Verdict::Unknown
        } else {
            Verdict::Valid
        }
    }

    fn findings(&self) -> u64 {
        self.tally.without_ttl.count + self.tally.above_max.count
    }

    /// The verdict in one line of plain words.
    pub fn summary(&self) -> String {
        let t = &self.tally;
        let partial = match self.completion.partial_reason() {
            Some(reason) => format!("; the audit is partial ({reason})"),
            None => String::new(),
        };
        match self.verdict() {
            Verdict::Invalid => {
                let mut found = vec![format!("{} keys without TTL (PTTL -1)", t.without_ttl.count)];
                if let Some(max) = self.ttl_max_ms {
                    found.push(format!("{} with a TTL above {max} ms", t.above_max.count));
                }
                format!(
                    "found {} among {} matched keys{partial}",
                    found.join(" and "),
                    t.matched
                )
            }
            Verdict::Unknown if t.unchecked > 0 && partial.is_empty() => format!(
                "{} of {} matched keys could not be checked ({}); none of the others lacks a TTL",
                t.unchecked,
                t.matched,
                t.unchecked_error.as_deref().unwrap_or("no reason given")
            ),
            Verdict::Unknown if t.matched == 0 && partial.is_empty() => format!(
                "nothing matched {} in db{} (DBSIZE {}): no limiter key was checked; check the pattern and the database the URL selects",
                self.patterns_quoted(),
                self.facts.db,
                self.facts.dbsize
            ),
            Verdict::Unknown => format!("no key without TTL among the {} matched so far{partial}", t.matched),
            Verdict::Valid => {
                let bound = self
                    .ttl_max_ms
                    .map(|max| format!(", none above {max} ms"))
                    .unwrap_or_default();
                format!("all {} matched keys have a TTL{bound}", t.matched)
            }
        }
    }

    fn patterns_quoted(&self) -> String {
        self.patterns
            .iter()
            .map(|p| format!("`{p}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A key as text: as it is when it is printable UTF-8, else with `\xNN` escapes.
pub fn display_key(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) if !text.chars().any(char::is_control) => text.to_owned(),
        _ => key.escape_ascii().to_string(),
    }
}

fn examples(found: &Examples) -> Vec<String> {
    found.first.iter().map(|k| display_key(k)).collect()
}

/// The text summary printed on stdout.
pub fn render_text(report: &AuditReport) -> String {
    let mut out = Vec::new();
    let state = match report.completion.partial_reason() {
        Some(reason) => format!("PARTIAL: {reason}; what follows is what was seen before"),
        None => "complete".into(),
    };
    out.push(format!(
        "audit:     {} db{}, keys matching {}: {state}",
        report.url,
        report.facts.db,
        report.patterns_quoted()
    ));
    out.extend(server_lines(&report.facts));
    out.extend(key_lines(report));
    for risk in &report.risks {
        out.push(format!("risk:      {}: {}", risk.kind.name(), risk.says));
        out.push(format!("             because {}", risk.because));
    }
    out.push(format!(
        "sent:      {} commands in {:.1} s (at most {} a second, --ops-per-s); no key was written and no value read",
        report.commands_sent,
        report.elapsed_ms as f64 / 1000.0,
        report.ops_per_s
    ));
    out.push(format!(
        "verdict:   {} — {}",
        report.verdict().name().to_uppercase(),
        report.summary()
    ));
    out.join("\n")
}

fn server_lines(facts: &ServerFacts) -> Vec<String> {
    let maxmemory = match facts.maxmemory_bytes {
        0 => "0 (no limit)".to_owned(),
        bytes => human_bytes(bytes),
    };
    vec![
        format!(
            "server:    {}; maxmemory {maxmemory}, maxmemory-policy {}; evicted_keys {}, expired_keys {}",
            facts.version, facts.maxmemory_policy, facts.evicted_keys, facts.expired_keys
        ),
        format!(
            "keyspace:  DBSIZE {} (db{}); {} keys in all databases, {} with a TTL; keyspace notifications {}",
            facts.dbsize,
            facts.db,
            facts.keys_total(),
            facts.expires_total(),
            facts.keyspace_events.describe()
        ),
    ]
}

fn key_lines(report: &AuditReport) -> Vec<String> {
    let t = &report.tally;
    let longest = t
        .ttl_longest_ms
        .map(|ms| format!(" (longest {ms} ms)"))
        .unwrap_or_default();
    let mut out = vec![format!(
        "keys:      {} matched: {} with a TTL{longest}, {} without TTL; {} vanished between SCAN and PTTL",
        t.matched, t.with_ttl, t.without_ttl.count, t.vanished
    )];
    if t.without_ttl.count > 0 {
        out.push(format!(
            "no TTL:    {} keys (PTTL -1) never expire: a counter that never expires locks its user out once it reaches the cap (incident 1); the first {} in byte order:",
            t.without_ttl.count,
            t.without_ttl.first.len()
        ));
        out.extend(examples(&t.without_ttl).iter().map(|k| format!("             {k}")));
    }
    if let Some(max) = report.ttl_max_ms
        && t.above_max.count > 0
    {
        out.push(format!(
            "long TTL:  {} keys with a TTL above --ttl-max-ms {max}; the first {} in byte order:",
            t.above_max.count,
            t.above_max.first.len()
        ));
        out.extend(examples(&t.above_max).iter().map(|k| format!("             {k}")));
    }
    if t.unchecked > 0 {
        out.push(format!(
            "unchecked: {} keys: PTTL failed ({})",
            t.unchecked,
            t.unchecked_error.as_deref().unwrap_or("no reason given")
        ));
    }
    out
}

/// The `--format json` document: stable field names, units last.
#[derive(Debug, Serialize)]
struct AuditJson<'a> {
    verdict: &'static str,
    summary: String,
    complete: bool,
    partial_reason: Option<String>,
    url: &'a str,
    db: i64,
    patterns: &'a [String],
    ttl_max_ms: Option<u64>,
    keys_matched: u64,
    keys_with_ttl: u64,
    keys_without_ttl: u64,
    keys_without_ttl_examples: Vec<String>,
    keys_above_ttl_max: Option<u64>,
    keys_above_ttl_max_examples: Vec<String>,
    keys_vanished: u64,
    keys_unchecked: u64,
    unchecked_reason: Option<&'a str>,
    ttl_longest_ms: Option<i64>,
    server: ServerJson<'a>,
    risks: &'a [Risk],
    commands_sent: u64,
    ops_per_s_max: u32,
    elapsed_ms: u64,
}

#[derive(Debug, Serialize)]
struct ServerJson<'a> {
    version: &'a str,
    maxmemory_bytes: u64,
    maxmemory_policy: &'a str,
    evicted_keys: u64,
    expired_keys: u64,
    dbsize: u64,
    keyspace: BTreeMap<&'a str, DbJson>,
    keys_total: u64,
    keys_with_ttl_total: u64,
    keyspace_notifications: String,
    notify_keyspace_events: Option<&'a str>,
}

#[derive(Debug, Serialize)]
struct DbJson {
    keys: u64,
    keys_with_ttl: u64,
}

/// One JSON document for tools.
pub fn render_json(report: &AuditReport) -> String {
    let t = &report.tally;
    let f = &report.facts;
    let doc = AuditJson {
        verdict: report.verdict().name(),
        summary: report.summary(),
        complete: report.completion == Completion::Complete,
        partial_reason: report.completion.partial_reason(),
        url: &report.url,
        db: f.db,
        patterns: &report.patterns,
        ttl_max_ms: report.ttl_max_ms,
        keys_matched: t.matched,
        keys_with_ttl: t.with_ttl,
        keys_without_ttl: t.without_ttl.count,
        keys_without_ttl_examples: examples(&t.without_ttl),
        keys_above_ttl_max: report.ttl_max_ms.map(|_| t.above_max.count),
        keys_above_ttl_max_examples: examples(&t.above_max),
        keys_vanished: t.vanished,
        keys_unchecked: t.unchecked,
        unchecked_reason: t.unchecked_error.as_deref(),
        ttl_longest_ms: t.ttl_longest_ms,
        server: ServerJson {
            version: &f.version,
            maxmemory_bytes: f.maxmemory_bytes,
            maxmemory_policy: &f.maxmemory_policy,
            evicted_keys: f.evicted_keys,
            expired_keys: f.expired_keys,
            dbsize: f.dbsize,
            keyspace: f
                .keyspace
                .iter()
                .map(|(db, k)| {
                    (
                        db.as_str(),
                        DbJson {
                            keys: k.keys,
                            keys_with_ttl: k.expires,
                        },
                    )
                })
                .collect(),
            keys_total: f.keys_total(),
            keys_with_ttl_total: f.expires_total(),
            keyspace_notifications: f.keyspace_events.describe(),
            notify_keyspace_events: match &f.keyspace_events {
                KeyspaceEvents::On { flags } => Some(flags),
                KeyspaceEvents::Off => Some(""),
                KeyspaceEvents::Unknown { .. } => None,
            },
        },
        risks: &report.risks,
        commands_sent: report.commands_sent,
        ops_per_s_max: report.ops_per_s,
        elapsed_ms: report.elapsed_ms,
    };
    serde_json::to_string_pretty(&doc).expect("an audit report always serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::server::{InfoSections, parse_facts};

    fn report(records: &[(&[u8], i64)], ttl_max_ms: Option<u64>, completion: Completion) -> AuditReport {
        let mut tally = KeyTally::new(ttl_max_ms, 10);
        for (key, pttl) in records {
            tally.record(key, Ok(*pttl));
        }
        let info = InfoSections {
            memory: "maxmemory:0\r\nmaxmemory_policy:noeviction\r\n".into(),
            ..InfoSections::default()
        };
        AuditReport {
            url: "redis://127.0.0.1:6379".into(),
            patterns: vec!["rl:*".into()],
            ttl_max_ms,
            ops_per_s: 5000,
            facts: parse_facts(&info, 0, 0, KeyspaceEvents::Off),
            tally,
            completion,
            risks: Vec::new(),
            commands_sent: 0,
            elapsed_ms: 0,
        }
    }

    #[test]
    fn a_key_without_ttl_is_invalid_even_in_a_partial_audit() {
        let r = report(&[(b"rl:1", -1), (b"rl:2", 500)], None, Completion::Interrupted);
        assert_eq!(r.verdict(), Verdict::Invalid);
        assert_eq!(
            r.summary(),
            "found 1 keys without TTL (PTTL -1) among 2 matched keys; the audit is partial (interrupted by a signal (SIGINT or SIGTERM))"
        );
    }

    #[test]
    fn a_partial_audit_without_findings_is_unknown() {
        let r = report(&[(b"rl:2", 500)], None, Completion::Failed("broken pipe".into()));
        assert_eq!(r.verdict(), Verdict::Unknown);
        assert!(
            r.summary()
                .contains("the server stopped answering mid-scan: broken pipe")
        );
        assert!(render_text(&r).contains("PARTIAL"));
    }

    #[test]
    fn a_long_ttl_counts_only_against_a_bound_given() {
        let r = report(&[(b"rl:2", 86_400_000)], None, Completion::Complete);
        assert_eq!(r.verdict(), Verdict::Valid);
        let r = report(&[(b"rl:2", 86_400_000)], Some(60_000), Completion::Complete);
        assert_eq!(r.verdict(), Verdict::Invalid);
        assert!(render_text(&r).contains("long TTL:  1 keys with a TTL above --ttl-max-ms 60000"));
    }

    #[test]
    fn nothing_matched_says_so_rather_than_all_good() {
        let r = report(&[], None, Completion::Complete);
        assert_eq!(r.verdict(), Verdict::Unknown, "nothing checked is no pass");
        assert!(
            r.summary()
                .starts_with("nothing matched `rl:*` in db0 (DBSIZE 0): no limiter key was checked"),
            "{}",
            r.summary()
        );
    }

    #[test]
    fn json_names_the_findings_with_units_last() {
        let r = report(
            &[(b"rl:b", -1), (b"rl:a", -1), (b"rl:c", 10)],
            Some(5),
            Completion::Complete,
        );
        let doc: serde_json::Value = serde_json::from_str(&render_json(&r)).unwrap();
        assert_eq!(doc["verdict"], "invalid");
        assert_eq!(doc["keys_without_ttl"], 2);
        assert_eq!(doc["keys_without_ttl_examples"], serde_json::json!(["rl:a", "rl:b"]));
        assert_eq!(doc["keys_above_ttl_max"], 1);
        assert_eq!(doc["ttl_max_ms"], 5);
        assert_eq!(
            doc["server"]["keyspace_notifications"],
            "off (notify-keyspace-events is empty)"
        );
    }

    #[test]
    fn binary_keys_are_escaped() {
        assert_eq!(display_key(b"rl:42"), "rl:42");
        assert_eq!(display_key(b"rl:\x00\xff"), "rl:\\x00\\xff");
        assert_eq!(display_key("rl:é".as_bytes()), "rl:é");
    }
}
