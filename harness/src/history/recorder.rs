//! Records events: appends each to `history.jsonl` as it arrives and keeps them for the
//! checkers. A dedicated thread does the writing so the request path only sends.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use tokio_util::sync::CancellationToken;

use super::Event;
use crate::error::SetupError;

/// Why the history file could not be written in full.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// A batch of events could not be written while the run went on (a full disk).
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
    /// The events found after the run could not be appended.
    #[error("appending to {path}: {source}")]
    Append { path: PathBuf, source: std::io::Error },
}

/// The sending side, cloned into every role that records.
#[derive(Debug, Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Option<Event>>,
}

impl Recorder {
    pub fn record(&self, event: Event) {
        // After `finish`, late events (from a task still winding down) are dropped.
        let _ = self.tx.send(Some(event));
    }

    /// A recorder that only keeps events in memory (tests).
    pub fn in_memory() -> (Self, RecorderHandle) {
        Self::spawn(None)
    }

    /// A recorder that writes `path` as it goes.
    pub fn to_file(path: &Path) -> Result<(Self, RecorderHandle), SetupError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| SetupError::io("cannot create", dir, e))?;
        }
        let file = File::create(path).map_err(|e| SetupError::io("cannot create", path, e))?;
        Ok(Self::spawn(Some((path.to_owned(), file))))
    }

    fn spawn(file: Option<(PathBuf, File)>) -> (Self, RecorderHandle) {
        let (tx, rx) = mpsc::channel::<Option<Event>>();
        let failed = CancellationToken::new();
        let on_failure = failed.clone();
        let thread = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || write_all(&rx, file, &on_failure))
            .expect("spawn history writer thread");
        let close = tx.clone();
        (Self { tx }, RecorderHandle { thread, close, failed })
    }
}

/// Events are written in batches of whole lines, one `write` each: a run killed at any
/// moment leaves a history whose every line parses (it loses at most the batch in hand).
const BATCH_BYTES: usize = 64 * 1024;
/// How long a batch gathers after its first event.
const GATHER: std::time::Duration = std::time::Duration::from_millis(2);

fn write_all(
    rx: &mpsc::Receiver<Option<Event>>,
    file: Option<(PathBuf, File)>,
    failed: &CancellationToken,
) -> (Vec<Event>, Option<HistoryError>) {
    let mut events = Vec::new();
    let mut out = file;
    let mut write_error = None;
    let mut batch = Vec::with_capacity(BATCH_BYTES);
    let writing = out.is_some();
    let mut keep = |event: Event, batch: &mut Vec<u8>| {
        if writing {
            serde_json::to_writer(&mut *batch, &event).expect("an event serializes");
            batch.push(b'\n');
        }
        events.push(event);
    };
    // Block for the next event (None: the history is closed; an error: every sender is
    // gone), let a batch gather for a moment, then take what has arrived without waiting. A
    // sender wakes the writer at most once per batch (a writer blocked in `recv` would cost
    // every send on the request path a wake-up); an idle run costs nothing.
    while let Ok(Some(first)) = rx.recv() {
        keep(first, &mut batch);
        std::thread::sleep(GATHER);
        let closed = loop {
            match rx.try_recv() {
                Ok(Some(event)) => keep(event, &mut batch),
                Ok(None) | Err(mpsc::TryRecvError::Disconnected) => break true,
                Err(mpsc::TryRecvError::Empty) => break false,
            }
            if batch.len() >= BATCH_BYTES {
                flush_batch(&mut out, &mut batch, &mut write_error, failed);
            }
        };
        flush_batch(&mut out, &mut batch, &mut write_error, failed);
        if closed {
            break;
        }
    }
    (events, write_error)
}

/// Write the batch's whole lines in one call; after a failure the file is given up on (what
/// it holds still parses: a torn last line is skipped when read) and `failed` says so, so
/// that the run stops at once rather than go on unrecorded.
fn flush_batch(
    out: &mut Option<(PathBuf, File)>,
    batch: &mut Vec<u8>,
    write_error: &mut Option<HistoryError>,
    failed: &CancellationToken,
) {
    if let Some((path, file)) = out.as_mut()
        && !batch.is_empty()
        && let Err(e) = file.write_all(batch)
    {
        *write_error = Some(HistoryError::Write {
            path: path.clone(),
            source: e,
        });
        *out = None;
        failed.cancel();
    }
    batch.clear();
}

/// Append `events` to the history at `path` in one write, after the run's recorder closed it
/// (what a run finds while leaving a server as it found it). The error says what failed.
pub fn append_history(path: &Path, events: &[Event]) -> Result<(), HistoryError> {
    if events.is_empty() {
        return Ok(());
    }
    let mut lines = Vec::new();
    for event in events {
        serde_json::to_writer(&mut lines, event).expect("an event serializes");
        lines.push(b'\n');
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut file| file.write_all(&lines))
        .map_err(|source| HistoryError::Append {
            path: path.to_owned(),
            source,
        })
}

/// Closes the history and joins the writer.
#[derive(Debug)]
pub struct RecorderHandle {
    thread: JoinHandle<(Vec<Event>, Option<HistoryError>)>,
    close: mpsc::Sender<Option<Event>>,
    failed: CancellationToken,
}

impl RecorderHandle {
    /// Cancelled when the history file could not be written (a full disk): the run stops.
    pub fn failed(&self) -> CancellationToken {
        self.failed.clone()
    }

    /// Every event recorded so far, and why the file could not be written in full, if not.
    pub fn finish(self) -> (Vec<Event>, Option<HistoryError>) {
        let _ = self.close.send(None);
        self.thread.join().expect("history writer thread panicked")
    }
}

/// Read a `history.jsonl` back (for re-checking a saved run).
pub fn read_history(path: &Path) -> Result<Vec<Event>, SetupError> {
    let file = File::open(path).map_err(|e| SetupError::io("cannot read history", path, e))?;
    let mut events = Vec::new();
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .collect::<Result<_, _>>()
        .map_err(|e| SetupError::io("cannot read history", path, e))?;
    for (n, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str(line) {
            Ok(event) => events.push(event),
            // A run killed in the middle of a write may leave its last line torn: what came
            // before it still stands.
            Err(_) if n + 1 == lines.len() => break,
            Err(e) => {
                return Err(SetupError::Usage(format!(
                    "{}:{}: not a history event: {e}",
                    path.display(),
                    n + 1
                )));
            }
        }
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The voluntary context switches of this process's thread named `name`.
    fn switches_of(name: &str) -> u64 {
        let task = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .flatten()
            .find(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
            .unwrap_or_else(|| panic!("no thread named {name}"));
        std::fs::read_to_string(task.path().join("status"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap()
    }

    /// An idle writer sleeps in its channel: it does not wake up to poll.
    #[test]
    fn an_idle_history_writer_does_not_poll() {
        // The writer's loop on a thread of this test's own, named so that it can be found.
        let (tx, rx) = mpsc::channel::<Option<Event>>();
        let writer = std::thread::Builder::new()
            .name("idle-writer".into())
            .spawn(move || write_all(&rx, None, &CancellationToken::new()))
            .unwrap();
        tx.send(Some(Event::Setup {
            t_us: 1,
            key: "rl:0".into(),
            detail: "x".into(),
        }))
        .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let before = switches_of("idle-writer");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let woke = switches_of("idle-writer") - before;
        assert!(woke <= 2, "the idle writer woke {woke} times in 300 ms");
        tx.send(None).unwrap();
        let (events, error) = writer.join().unwrap();
        assert_eq!(events.len(), 1);
        assert!(error.is_none(), "{error:?}");
    }

    /// A history that cannot be written (a full disk: /dev/full) says so at once, and keeps
    /// the events in memory for the report.
    #[test]
    fn a_failed_write_is_said_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        std::os::unix::fs::symlink("/dev/full", &path).unwrap();
        let (recorder, handle) = Recorder::to_file(&path).unwrap();
        let failed = handle.failed();
        recorder.record(Event::Setup {
            t_us: 1,
            key: "rl:0".into(),
            detail: "planted".into(),
        });
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !failed.is_cancelled() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(failed.is_cancelled(), "the write failure was not said");
        drop(recorder);
        let (events, error) = handle.finish();
        assert_eq!(events.len(), 1);
        assert!(error.is_some_and(|e| e.to_string().contains("history.jsonl")));
    }

    /// Every line written is whole and in order, however the events were batched.
    #[test]
    fn the_history_file_holds_every_event_in_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.jsonl");
        let (recorder, handle) = Recorder::to_file(&path).unwrap();
        for t_us in 0..20_000 {
            recorder.record(Event::Setup {
                t_us,
                key: format!("rl:{t_us}"),
                detail: "planted".into(),
            });
        }
        drop(recorder);
        let (events, error) = handle.finish();
        assert_eq!(events.len(), 20_000);
        assert!(error.is_none(), "{error:?}");
        let read = read_history(&path).unwrap();
        assert_eq!(read, events);
    }
}
