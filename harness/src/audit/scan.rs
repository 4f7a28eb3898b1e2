//! The paced walk over the limiter's keys: `SCAN cursor MATCH pattern COUNT n`, then a
//! pipelined `PTTL` of each batch's keys not seen before. No value is read.

use std::collections::{BTreeSet, HashSet};
use std::hash::{BuildHasher, RandomState};

use redis::RedisResult;
use tokio_util::sync::CancellationToken;

use super::progress::ScanProgress;
use super::readonly::{ReadError, ReadOnly};

/// What to scan and what to look for.
#[derive(Debug, Clone)]
pub struct ScanOptions {
    /// SCAN MATCH globs, scanned one after the other.
    pub patterns: Vec<String>,
    pub scan_count: u32,
    /// Keys with a longer TTL are counted and named.
    pub ttl_max_ms: Option<u64>,
    /// How many keys of each finding to name.
    pub examples_max: usize,
}

/// A count of keys, naming the first few in byte order (stable from run to run).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Examples {
    pub count: u64,
    pub first: BTreeSet<Vec<u8>>,
    max: usize,
}

impl Examples {
    pub fn new(max: usize) -> Self {
        Self {
            count: 0,
            first: BTreeSet::new(),
            max,
        }
    }

    pub fn add(&mut self, key: &[u8]) {
        self.count += 1;
        self.first.insert(key.to_vec());
        if self.first.len() > self.max {
            self.first.pop_last();
        }
    }
}

/// Everything the scan saw, key by key. Keys are remembered by a 128-bit fingerprint, not
/// by name, so a scan of millions of keys holds a few dozen bytes per key.
#[derive(Debug, Clone)]
pub struct KeyTally {
    seen: HashSet<u128>,
    fingerprint: (RandomState, RandomState),
    ttl_max_ms: Option<u64>,
    /// Distinct keys SCAN returned and PTTL was asked about.
    pub matched: u64,
    pub with_ttl: u64,
    /// PTTL -1: the key never expires.
    pub without_ttl: Examples,
    /// A TTL above `ttl_max_ms` (empty when no bound was given).
    pub above_max: Examples,
    /// PTTL -2: gone between SCAN and PTTL.
    pub vanished: u64,
    /// PTTL answered with an error; the first one.
    pub unchecked: u64,
    pub unchecked_error: Option<String>,
    pub ttl_longest_ms: Option<i64>,
}

impl KeyTally {
    pub fn new(ttl_max_ms: Option<u64>, examples_max: usize) -> Self {
        Self {
            seen: HashSet::new(),
            fingerprint: (RandomState::new(), RandomState::new()),
            ttl_max_ms,
            matched: 0,
            with_ttl: 0,
            without_ttl: Examples::new(examples_max),
            above_max: Examples::new(examples_max),
            vanished: 0,
            unchecked: 0,
            unchecked_error: None,
            ttl_longest_ms: None,
        }
    }

    /// The keys of a SCAN batch not seen before (SCAN may return a key twice, and so may
    /// two patterns); they count as seen from now on.
    pub fn unseen(&mut self, keys: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        keys.into_iter()
            .filter(|key| {
                let (a, b) = &self.fingerprint;
                let print = (u128::from(a.hash_one(key)) << 64) | u128::from(b.hash_one(key));
                self.seen.insert(print)
            })
            .collect()
    }

    /// What PTTL said about `key`.
    pub fn record(&mut self, key: &[u8], pttl: RedisResult<i64>) {
        self.matched += 1;
        match pttl {
            Ok(-1) => self.without_ttl.add(key),
            Ok(-2) => self.vanished += 1,
            Ok(ms) if ms >= 0 => {
                self.with_ttl += 1;
                self.ttl_longest_ms = self.ttl_longest_ms.max(Some(ms));
                if self.ttl_max_ms.is_some_and(|max| ms as u64 > max) {
                    self.above_max.add(key);
                }
            }
            Ok(other) => self.unchecked(format!("PTTL answered {other}")),
            Err(e) => self.unchecked(e.to_string()),
        }
    }

    fn unchecked(&mut self, error: String) {
        self.unchecked += 1;
        self.unchecked_error.get_or_insert(error);
    }
}

/// How the scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    Complete,
    /// SIGINT or SIGTERM.
    Interrupted,
    /// A command failed (the server went away, timed out, refused): what it said.
    Failed(String),
}

impl Completion {
    /// Why the audit is partial, or None when it is complete.
    pub fn partial_reason(&self) -> Option<String> {
        match self {
            Self::Complete => None,
            Self::Interrupted => Some("interrupted by a signal (SIGINT or SIGTERM)".into()),
            Self::Failed(e) => Some(format!("the server stopped answering mid-scan: {e}")),
        }
    }
}

/// Scan every pattern to its end, unless `cancel` fires or a command fails: what was seen
/// so far, and how it ended.
pub async fn scan_keys(
    conn: &mut ReadOnly,
    options: &ScanOptions,
    progress: &ScanProgress,
    cancel: &CancellationToken,
) -> (KeyTally, Completion) {
    let mut tally = KeyTally::new(options.ttl_max_ms, options.examples_max);
    for pattern in &options.patterns {
        let mut cursor = String::from("0");
        loop {
            let batch = tokio::select! {
                () = cancel.cancelled() => return (tally, Completion::Interrupted),
                batch = scan_once(conn, pattern, &cursor, options.scan_count) => batch,
            };
            let (next, keys) = match batch {
                Ok(batch) => batch,
                Err(e) => return (tally, Completion::Failed(e.to_string())),
            };
            let fresh = tally.unseen(keys);
            let replies = tokio::select! {
                () = cancel.cancelled() => return (tally, Completion::Interrupted),
                replies = pttl_all(conn, &fresh) => replies,
            };
            match replies {
                Ok(replies) => fresh
                    .iter()
                    .zip(replies)
                    .for_each(|(key, pttl)| tally.record(key, pttl)),
                Err(e) => return (tally, Completion::Failed(e.to_string())),
            }
            progress.scanned(u64::from(options.scan_count), tally.matched);
            if next == "0" {
                break;
            }
            cursor = next;
        }
    }
    (tally, Completion::Complete)
}

/// One SCAN step: the next cursor and the keys of this batch.
async fn scan_once(
    conn: &mut ReadOnly,
    pattern: &str,
    cursor: &str,
    count: u32,
) -> Result<(String, Vec<Vec<u8>>), ReadError> {
    let count = count.to_string();
    conn.query(&[
        b"SCAN",
        cursor.as_bytes(),
        b"MATCH",
        pattern.as_bytes(),
        b"COUNT",
        count.as_bytes(),
    ])
    .await
}

/// PTTL of every key, pipelined in bursts the pacer allows; one reply per key, in order.
async fn pttl_all(conn: &mut ReadOnly, keys: &[Vec<u8>]) -> Result<Vec<RedisResult<i64>>, ReadError> {
    let mut replies = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(conn.burst_max()) {
        let commands: Vec<Vec<&[u8]>> = chunk.iter().map(|k| vec![b"PTTL".as_slice(), k.as_slice()]).collect();
        replies.extend(conn.pipeline::<i64>(&commands).await?);
    }
    Ok(replies)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(names: &[&str]) -> Vec<Vec<u8>> {
        names.iter().map(|n| n.as_bytes().to_vec()).collect()
    }

    #[test]
    fn a_key_returned_twice_is_counted_once() {
        let mut tally = KeyTally::new(None, 10);
        assert_eq!(tally.unseen(keys(&["rl:1", "rl:2", "rl:1"])), keys(&["rl:1", "rl:2"]));
        assert_eq!(tally.unseen(keys(&["rl:2", "rl:3"])), keys(&["rl:3"]));
    }

    #[test]
    fn pttl_replies_are_sorted_into_findings() {
        let mut tally = KeyTally::new(Some(60_000), 2);
        tally.record(b"rl:a", Ok(1000));
        tally.record(b"rl:z", Ok(-1));
        tally.record(b"rl:c", Ok(-1));
        tally.record(b"rl:b", Ok(-1));
        tally.record(b"rl:long", Ok(86_400_000));
        tally.record(b"rl:gone", Ok(-2));
        let denied = || redis::RedisError::from((redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm), "no"));
        tally.record(b"secret:1", Err(denied()));
        assert_eq!(tally.matched, 7);
        assert_eq!(tally.with_ttl, 2);
        assert_eq!(tally.without_ttl.count, 3);
        assert_eq!(
            tally.without_ttl.first.iter().cloned().collect::<Vec<_>>(),
            keys(&["rl:b", "rl:c"]),
            "the first two in byte order"
        );
        assert_eq!(tally.above_max.count, 1);
        assert_eq!(tally.vanished, 1);
        assert_eq!(tally.unchecked, 1);
        assert_eq!(tally.unchecked_error, Some(denied().to_string()));
        assert_eq!(tally.ttl_longest_ms, Some(86_400_000));
    }

    #[test]
    fn without_a_bound_no_ttl_is_too_long() {
        let mut tally = KeyTally::new(None, 10);
        tally.record(b"rl:long", Ok(i64::MAX));
        assert_eq!(tally.above_max.count, 0);
    }
}
