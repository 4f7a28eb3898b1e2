//! How much of the proxy's wire log a run keeps. Every round trip is a `wire` line in the
//! history, and the history is held in memory for the checkers: a limiter (or an adapter
//! gone wrong) that pipelines commands without end would grow it without bound. The log is
//! therefore cut at [`WIRE_LOG_MAX`] bytes of command text; after the cut, only a round trip
//! naming a key outside the layout that the log has not shown yet is still recorded (the
//! report lists the keys a limiter touched), and the cut itself is recorded once, with when.
//! No verdict rests on the wire lines: they are the evidence shown beside an anomaly.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The command text a run's wire log may hold: 32 MiB (about 300,000 round trips of a
/// typical limiter; a run at the 1,000,000-request cap keeps the first third of them).
pub const WIRE_LOG_MAX: usize = 32 * 1024 * 1024;

/// The commands one wire line shows; the rest of a long pipeline is counted, not listed.
pub const COMMANDS_PER_LINE_MAX: usize = 32;

/// The keys one wire line names (a pipeline over many keys names the first of them).
pub const KEYS_PER_LINE_MAX: usize = 64;

/// Keys outside the layout still recorded after the cut (the report lists at most 256).
const FOREIGN_KEYS_MAX: usize = 256;

/// What a line weighs beyond its text (time, connection, request, the event's own memory).
const LINE_OVERHEAD: usize = 96;

/// What a command of a line weighs beyond its text (the `String` and its allocation).
const COMMAND_OVERHEAD: usize = 40;

/// What the hook should do with one wire line.
#[derive(Debug, PartialEq, Eq)]
pub enum Keep {
    /// Record it.
    Line,
    /// Record it; the log has just been cut, and the cut is to be recorded with it.
    LineAndCut,
    /// Drop it; the log has just been cut, and the cut is to be recorded.
    Cut,
    /// Drop it.
    Drop,
}

/// The wire log's account, shared by the proxy's connections.
#[derive(Debug)]
pub struct WireLog {
    limit: usize,
    used: AtomicUsize,
    cut: AtomicBool,
    /// Keys outside the layout the log has shown (after the cut: which still get a line).
    foreign: Mutex<HashSet<String>>,
}

impl Default for WireLog {
    fn default() -> Self {
        Self::new(WIRE_LOG_MAX)
    }
}

impl WireLog {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
            cut: AtomicBool::new(false),
            foreign: Mutex::new(HashSet::new()),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// The log has been cut: a line naming no key outside the layout is dropped unseen.
    pub fn is_cut(&self) -> bool {
        self.cut.load(Ordering::Relaxed)
    }

    /// Whether to record a line of `commands` naming `keys`, of which `foreign_keys` are
    /// outside the layout. The line weighs its commands' and its keys' text.
    pub fn keep(&self, commands: &[String], keys: &[String], foreign_keys: &[String]) -> Keep {
        // A limiter's own keys (the common line) take no lock.
        let new_foreign = !foreign_keys.is_empty() && {
            let mut seen = self.foreign.lock().expect("wire log lock");
            let mut new = false;
            for key in foreign_keys {
                if seen.len() < FOREIGN_KEYS_MAX && !seen.contains(key) {
                    seen.insert(key.clone());
                    new = true;
                }
            }
            new
        };
        if self.cut.load(Ordering::Relaxed) {
            return if new_foreign { Keep::Line } else { Keep::Drop };
        }
        let weight = LINE_OVERHEAD
            + commands
                .iter()
                .chain(keys)
                .map(|text| COMMAND_OVERHEAD + text.len())
                .sum::<usize>();
        let before = self.used.fetch_add(weight, Ordering::Relaxed);
        if before + weight <= self.limit {
            return Keep::Line;
        }
        let first = !self.cut.swap(true, Ordering::Relaxed);
        match (first, new_foreign) {
            (true, true) => Keep::LineAndCut,
            (true, false) => Keep::Cut,
            (false, true) => Keep::Line,
            (false, false) => Keep::Drop,
        }
    }
}

/// The commands of a line as shown: at most [`COMMANDS_PER_LINE_MAX`], then how many more
/// (a vector of just that size: the line is held until the run is judged).
pub fn shown<'c>(commands: impl ExactSizeIterator<Item = &'c resp::Command>) -> Vec<String> {
    let count = commands.len();
    let mut shown = Vec::with_capacity(count.min(COMMANDS_PER_LINE_MAX + 1));
    shown.extend(commands.take(COMMANDS_PER_LINE_MAX).map(resp::Command::display));
    if count > COMMANDS_PER_LINE_MAX {
        shown.push(format!("… {} more commands", count - COMMANDS_PER_LINE_MAX));
    }
    shown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> Vec<String> {
        vec![text.to_owned()]
    }

    #[test]
    fn the_log_is_cut_once_past_its_limit_and_only_new_foreign_keys_get_a_line_after() {
        let log = WireLog::new(2 * (LINE_OVERHEAD + COMMAND_OVERHEAD + 10));
        assert_eq!(log.keep(&line("INCR rl:0 "), &[], &[]), Keep::Line);
        assert_eq!(log.keep(&line("INCR rl:0 "), &[], &[]), Keep::Line);
        assert_eq!(log.keep(&line("INCR rl:0 "), &[], &[]), Keep::Cut, "the cut, once");
        assert_eq!(log.keep(&line("INCR rl:0 "), &[], &[]), Keep::Drop);
        assert_eq!(
            log.keep(&line("GET big"), &["big".into()], &["big".into()]),
            Keep::Line,
            "a key not shown yet"
        );
        assert_eq!(log.keep(&line("GET big"), &["big".into()], &["big".into()]), Keep::Drop);
    }

    #[test]
    fn the_line_that_cuts_the_log_is_kept_when_it_shows_a_new_foreign_key() {
        let log = WireLog::new(0);
        assert_eq!(log.keep(&line("GET a"), &["a".into()], &["a".into()]), Keep::LineAndCut);
        assert_eq!(log.keep(&line("GET a"), &["a".into()], &["a".into()]), Keep::Drop);
    }

    #[test]
    fn a_line_weighs_its_keys_too() {
        let log = WireLog::new(LINE_OVERHEAD + 2 * (COMMAND_OVERHEAD + 10));
        let keys: Vec<String> = (0..10).map(|i| format!("key:{i:05}")).collect();
        assert_eq!(
            log.keep(&line("GET x"), &keys, &keys),
            Keep::LineAndCut,
            "ten keys do not fit"
        );
    }

    #[test]
    fn foreign_keys_after_the_cut_are_bounded() {
        let log = WireLog::new(0);
        let _ = log.keep(&line("PING"), &[], &[]);
        let kept = (0..1000)
            .filter(|i| log.keep(&line("GET"), &[format!("k{i}")], &[format!("k{i}")]) == Keep::Line)
            .count();
        assert_eq!(kept, FOREIGN_KEYS_MAX);
    }

    #[test]
    fn a_long_pipeline_shows_its_first_commands_and_counts_the_rest() {
        let commands: Vec<resp::Command> = (0..100)
            .map(|i| resp::Command::new(["GET".to_owned(), format!("k{i}")]))
            .collect();
        let shown = shown(commands.iter());
        assert_eq!(shown.len(), COMMANDS_PER_LINE_MAX + 1);
        assert!(
            shown.capacity() <= COMMANDS_PER_LINE_MAX + 1,
            "no room held for the rest"
        );
        assert_eq!(shown[0], "GET k0");
        assert_eq!(shown.last().unwrap(), "… 68 more commands");
        let ping = [resp::Command::new(["PING"])];
        assert_eq!(super::shown(ping.iter()), vec!["PING"]);
    }
}
