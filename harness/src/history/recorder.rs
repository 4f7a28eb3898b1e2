//! Records events: appends each to `history.jsonl` as it arrives and keeps them for the
//! checkers. A dedicated thread does the writing so the request path only sends.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

use super::Event;
use crate::error::SetupError;

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
        let thread = std::thread::Builder::new()
            .name("history-writer".into())
            .spawn(move || write_all(&rx, file))
            .expect("spawn history writer thread");
        let close = tx.clone();
        (Self { tx }, RecorderHandle { thread, close })
    }
}

fn write_all(rx: &mpsc::Receiver<Option<Event>>, file: Option<(PathBuf, File)>) -> (Vec<Event>, Option<String>) {
    let mut events = Vec::new();
    let mut out = file.map(|(path, f)| (path, BufWriter::new(f)));
    let mut write_error = None;
    // Poll instead of blocking in recv: a blocked receiver makes every send a futex wake-up
    // on the request path; a sleeping one costs the senders nothing.
    while let Some(event) = next_event(rx) {
        if let Some((path, w)) = out.as_mut()
            && let Err(e) = serde_json::to_writer(&mut *w, &event)
                .map_err(std::io::Error::from)
                .and_then(|()| w.write_all(b"\n"))
        {
            write_error = Some(format!("writing {}: {e}", path.display()));
            out = None;
        }
        events.push(event);
    }
    if let Some((path, mut w)) = out
        && let Err(e) = w.flush()
    {
        write_error = Some(format!("writing {}: {e}", path.display()));
    }
    (events, write_error)
}

/// The next event, or None once the history is closed (or every sender is gone).
fn next_event(rx: &mpsc::Receiver<Option<Event>>) -> Option<Event> {
    loop {
        match rx.try_recv() {
            Ok(event) => return event,
            Err(mpsc::TryRecvError::Empty) => std::thread::sleep(std::time::Duration::from_millis(2)),
            Err(mpsc::TryRecvError::Disconnected) => return None,
        }
    }
}

/// Closes the history and joins the writer.
#[derive(Debug)]
pub struct RecorderHandle {
    thread: JoinHandle<(Vec<Event>, Option<String>)>,
    close: mpsc::Sender<Option<Event>>,
}

impl RecorderHandle {
    /// Every event recorded so far, and a message if the file could not be written in full.
    pub fn finish(self) -> (Vec<Event>, Option<String>) {
        let _ = self.close.send(None);
        self.thread.join().expect("history writer thread panicked")
    }
}

/// Read a `history.jsonl` back (for re-checking a saved run).
pub fn read_history(path: &Path) -> Result<Vec<Event>, SetupError> {
    let file = File::open(path).map_err(|e| SetupError::io("cannot read history", path, e))?;
    let mut events = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| SetupError::io("cannot read history", path, e))?;
        if line.trim().is_empty() {
            continue;
        }
        let event = serde_json::from_str(&line)
            .map_err(|e| SetupError::Usage(format!("{}:{}: not a history event: {e}", path.display(), n + 1)))?;
        events.push(event);
    }
    Ok(events)
}
