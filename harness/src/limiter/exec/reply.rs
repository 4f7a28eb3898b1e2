//! What the adapter prints, read with bounds: lines capped at [`super::LINE_MAX`], replies that
//! must be JSON objects carrying a decision, and a tally of the protocol violations.

use redis::{ErrorKind, RedisError, RedisResult};
use serde::Deserialize;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use super::PLANT_IDS_FROM;
use super::error::AdapterError;
use crate::limiter::Decision;

/// Replies missed in a row (no reply in time) after which the adapter is declared dead.
pub(super) const MISSED_IN_ROW_MAX: u32 = 3;
/// The share of replies, in percent, that may be protocol violations in a run that passes.
pub(super) const VIOLATIONS_PERCENT_MAX: u64 = 1;
/// Replies to no waiting request recorded as problems one by one (they are not bounded by
/// the number of requests); later ones are only counted.
const UNSOLICITED_RECORDED_MAX: u64 = 100;

/// One line of the adapter's stdout.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Line {
    /// Its bytes, without the `\n` (or `\r\n`) that ended it; the last line may lack one.
    Text(Vec<u8>),
    /// Longer than the cap: it was not read to its end.
    TooLong,
    /// The stream closed.
    Eof,
}

/// The next line of `reader`, holding at most `cap` bytes of it in memory: a longer line is
/// [`Line::TooLong`] as soon as the cap is passed, whether or not a newline ever comes.
pub(super) async fn read_line_capped<R: AsyncBufRead + Unpin>(reader: &mut R, cap: usize) -> std::io::Result<Line> {
    let mut line = Vec::new();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if line.is_empty() { Line::Eof } else { Line::Text(line) });
        }
        let newline = buf.iter().position(|&b| b == b'\n');
        let chunk = &buf[..newline.unwrap_or(buf.len())];
        if line.len() + chunk.len() > cap {
            return Ok(Line::TooLong);
        }
        line.extend_from_slice(chunk);
        let used = chunk.len() + usize::from(newline.is_some());
        reader.consume(used);
        if newline.is_some() {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(Line::Text(line));
        }
    }
}

/// One reply, adapter → harness.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplyLine {
    pub id: u64,
    #[serde(default)]
    pub allowed: Option<bool>,
    #[serde(default)]
    pub count: Option<i64>,
    #[serde(default)]
    pub error: Option<String>,
    /// The adapter does not know whether its command took effect (a lost reply).
    #[serde(default)]
    pub indeterminate: bool,
    /// The answer to a `plant` message: what it wrote.
    #[serde(default)]
    pub planted: Option<String>,
}

/// A line of the adapter's stdout, read as a reply.
#[derive(Debug)]
pub(super) enum Parsed {
    Reply(ReplyLine),
    /// A JSON object with a readable `id` that is not a well-formed reply (an unknown field,
    /// a field of the wrong type): a protocol violation answering that id.
    Malformed {
        id: u64,
        why: String,
    },
    /// Not a reply at all: not JSON, not an object, or an object without a readable `id`.
    NotAReply(String),
}

/// Only a JSON object can be a reply: serde would otherwise read an array such as
/// `[5, true, 3, null, false, null]` field by field, as an admission.
pub(super) fn parse_reply(line: &[u8]) -> Parsed {
    let value = match serde_json::from_slice::<serde_json::Value>(line) {
        Ok(value) => value,
        Err(e) => return Parsed::NotAReply(format!("not JSON ({e})")),
    };
    let Some(object) = value.as_object() else {
        return Parsed::NotAReply(format!("a JSON {}, not an object", kind_of(&value)));
    };
    let Some(id) = object.get("id").and_then(serde_json::Value::as_u64) else {
        return Parsed::NotAReply("an object without a readable `id` (a non-negative integer)".into());
    };
    // From the bytes, not the value: a JSON object keeps the last of two equal keys, so
    // `{"allowed": false, "allowed": true}` would be read as an admission.
    match serde_json::from_slice::<ReplyLine>(line) {
        Ok(reply) => Parsed::Reply(reply),
        Err(e) => Parsed::Malformed { id, why: e.to_string() },
    }
}

fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "boolean",
        serde_json::Value::Number(_) => "number",
        serde_json::Value::String(_) => "string",
        serde_json::Value::Array(_) => "array",
        serde_json::Value::Object(_) => "object",
    }
}

/// What a well-formed reply answers.
#[derive(Debug)]
pub(super) enum Answer {
    Decision(Decision),
    Planted(String),
}

/// What a reply says — an answer, or an error the adapter reported — or, as `Err`, why it
/// breaks the protocol (it carries no decision, or a negative count).
pub(super) fn interpret(reply: ReplyLine) -> Result<RedisResult<Answer>, AdapterError> {
    if let Some(count) = reply.count
        && count < 0
    {
        return Err(AdapterError::NegativeCount { count });
    }
    let plant = reply.id >= PLANT_IDS_FROM;
    if let Some(error) = reply.error {
        return Ok(Err(reported(error, reply.indeterminate, plant)));
    }
    if plant {
        return match reply.planted {
            Some(planted) => Ok(Ok(Answer::Planted(planted))),
            None => Err(AdapterError::PlantUnanswered),
        };
    }
    if reply.indeterminate {
        return Ok(Err(indeterminate("the adapter says the outcome is unknown".into())));
    }
    match reply.allowed {
        Some(allowed) => Ok(Ok(Answer::Decision(Decision {
            allowed,
            count: reply.count,
        }))),
        None => Err(AdapterError::NoDecision),
    }
}

/// An error the adapter reported.
fn reported(error: String, indeterminate_: bool, plant: bool) -> RedisError {
    if indeterminate_ {
        indeterminate(format!("the adapter reported: {error}"))
    } else if plant {
        RedisError::from((ErrorKind::Client, "the adapter could not plant", error))
    } else {
        RedisError::from((ErrorKind::Client, "the adapter reported an error", error))
    }
}

/// A reply that breaks the protocol: the request completes as an error (never an admission).
pub(super) fn violation(detail: String) -> RedisError {
    RedisError::from((ErrorKind::Client, "protocol violation", detail))
}

/// An outcome the harness cannot know (classified Indeterminate by the driver).
pub(super) fn indeterminate(detail: String) -> RedisError {
    RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, detail))
}

/// The replies of a run: how many were due, how many broke the protocol, and how many in a
/// row were missed.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Tally {
    /// Every line read after the hello, and every reply not sent in time.
    pub replies: u64,
    pub violations: u64,
    missed_in_row: u32,
    unsolicited: u64,
}

impl Tally {
    /// A well-formed reply to a request waiting for it.
    pub fn good(&mut self) {
        self.replies += 1;
        self.missed_in_row = 0;
    }

    /// A reply that breaks the protocol (it does not end a row of missed replies).
    pub fn violation(&mut self) {
        self.replies += 1;
        self.violations += 1;
    }

    /// A reply to no waiting request (a violation): whether to record it, and with which
    /// note (the last one recorded says so).
    pub fn unsolicited(&mut self) -> Option<&'static str> {
        self.violation();
        self.unsolicited += 1;
        match self.unsolicited {
            n if n < UNSOLICITED_RECORDED_MAX => Some(""),
            UNSOLICITED_RECORDED_MAX => Some(" (the last such reply recorded: later ones are only counted)"),
            _ => None,
        }
    }

    /// A reply not sent in time; true when that makes [`MISSED_IN_ROW_MAX`] in a row.
    pub fn missed(&mut self) -> bool {
        self.violation();
        self.missed_in_row += 1;
        self.missed_in_row >= MISSED_IN_ROW_MAX
    }

    /// "N of M replies were protocol violations (more than 1%)", when they were: with
    /// fewer than 100 replies, a single violation is more than 1%.
    pub fn excess(&self) -> Option<String> {
        (self.violations * 100 > self.replies * VIOLATIONS_PERCENT_MAX).then(|| {
            format!(
                "{} of {} replies were protocol violations (more than {VIOLATIONS_PERCENT_MAX}%)",
                self.violations, self.replies
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::LINE_MAX;
    use super::*;

    #[test]
    fn a_key_given_twice_is_a_protocol_violation_not_the_last_ones_value() {
        match parse_reply(br#"{"id": 7, "allowed": false, "allowed": true}"#) {
            Parsed::Malformed { id, why } => {
                assert_eq!(id, 7);
                assert!(why.contains("duplicate field `allowed`"), "{why}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_reply(br#"{"id": 7, "allowed": true}"#),
            Parsed::Reply(_)
        ));
    }

    async fn lines(input: &[u8], cap: usize, capacity: usize) -> Vec<Line> {
        let mut reader = tokio::io::BufReader::with_capacity(capacity, input);
        let mut out = Vec::new();
        loop {
            let line = read_line_capped(&mut reader, cap).await.unwrap();
            let end = matches!(line, Line::Eof | Line::TooLong);
            out.push(line);
            if end {
                return out;
            }
        }
    }

    fn text(s: &str) -> Line {
        Line::Text(s.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn lines_are_split_and_capped_across_buffer_refills() {
        for capacity in [1, 3, 8192] {
            assert_eq!(
                lines(b"ab\r\n\ncdef\nlast", 4, capacity).await,
                vec![text("ab"), text(""), text("cdef"), text("last"), Line::Eof],
                "buffer of {capacity}"
            );
            assert_eq!(
                lines(b"abcd\nabcde\nnever read", 4, capacity).await,
                vec![text("abcd"), Line::TooLong],
                "buffer of {capacity}"
            );
            assert_eq!(lines(b"", 4, capacity).await, vec![Line::Eof]);
        }
    }

    #[tokio::test]
    async fn a_line_without_end_stops_at_the_cap() {
        // 8 MiB without a newline: given up on after the cap, not read (or held) to its end.
        let huge = vec![b'x'; 8 * LINE_MAX];
        let mut reader = tokio::io::BufReader::new(&huge[..]);
        assert_eq!(read_line_capped(&mut reader, LINE_MAX).await.unwrap(), Line::TooLong);
        let rest = reader.fill_buf().await.unwrap().len() + reader.get_ref().len();
        assert!(rest > 6 * LINE_MAX, "only about the cap was read: {rest} bytes left");
    }

    fn decided(line: &str) -> Result<RedisResult<Answer>, AdapterError> {
        match parse_reply(line.as_bytes()) {
            Parsed::Reply(reply) => interpret(reply),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn only_an_object_with_a_readable_id_is_a_reply() {
        for (line, why) in [
            ("[5, true, 3, null, false, null]", "array"),
            ("this is not json", "not JSON"),
            ("5", "number"),
            ("{\"allowed\": true}", "readable `id`"),
            ("{\"id\": -5, \"allowed\": true}", "readable `id`"),
            ("{\"id\": \"5\", \"allowed\": true}", "readable `id`"),
        ] {
            match parse_reply(line.as_bytes()) {
                Parsed::NotAReply(reason) => assert!(reason.contains(why), "{line}: {reason}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        for line in [
            "{\"id\": 5, \"allowed\": \"yes\"}",
            "{\"id\": 5, \"allowd\": true}",
            "{\"id\": 5, \"allowed\": true, \"count\": 1.5}",
        ] {
            assert!(
                matches!(parse_reply(line.as_bytes()), Parsed::Malformed { id: 5, .. }),
                "{line}"
            );
        }
    }

    #[test]
    fn a_reply_without_a_decision_or_with_a_negative_count_is_a_violation() {
        assert!(
            decided("{\"id\": 5, \"allowed\": true, \"count\": -1}")
                .unwrap_err()
                .to_string()
                .contains("negative")
        );
        assert!(
            decided("{\"id\": 5, \"count\": 3}")
                .unwrap_err()
                .to_string()
                .contains("neither")
        );
        assert!(decided("{\"id\": 5}").unwrap_err().to_string().contains("neither"));
        let plant = format!("{{\"id\": {PLANT_IDS_FROM}}}");
        assert!(decided(&plant).unwrap_err().to_string().contains("`planted`"));
        match decided("{\"id\": 5, \"allowed\": true, \"count\": 0}") {
            Ok(Ok(Answer::Decision(d))) => assert!(d.allowed && d.count == Some(0)),
            other => panic!("{other:?}"),
        }
        match decided("{\"id\": 5, \"allowed\": false}") {
            Ok(Ok(Answer::Decision(d))) => assert!(!d.allowed && d.count.is_none()),
            other => panic!("{other:?}"),
        }
        let error = decided("{\"id\": 5, \"error\": \"OOM\"}").unwrap().unwrap_err();
        assert!(!error.is_timeout(), "an error, not indeterminate: {error}");
        let lost = decided("{\"id\": 5, \"error\": \"gone\", \"indeterminate\": true}")
            .unwrap()
            .unwrap_err();
        assert!(lost.is_timeout(), "{lost}");
    }

    #[test]
    fn missed_replies_in_a_row_and_the_share_of_violations() {
        let mut tally = Tally::default();
        assert!(!tally.missed() && !tally.missed());
        tally.good();
        assert!(!tally.missed() && !tally.missed());
        tally.violation();
        assert!(tally.missed(), "a violation does not end the row");

        let mut tally = Tally::default();
        assert_eq!(tally.excess(), None, "no replies, no violations");
        for _ in 0..99 {
            tally.good();
        }
        tally.violation();
        assert_eq!(tally.excess(), None, "1 of 100 is 1%, not more");
        tally.violation();
        assert_eq!(
            tally.excess().as_deref(),
            Some("2 of 101 replies were protocol violations (more than 1%)")
        );
        let mut flood = Tally::default();
        let recorded = (0..1000).filter_map(|_| flood.unsolicited()).collect::<Vec<_>>();
        assert_eq!(recorded.len(), 100, "only the first hundred are recorded");
        assert!(recorded[99].contains("only counted"), "{recorded:?}");
        assert_eq!((flood.violations, flood.replies), (1000, 1000), "all are counted");
        let mut small = Tally::default();
        small.good();
        small.violation();
        assert!(small.excess().is_some(), "one of two");
    }
}
