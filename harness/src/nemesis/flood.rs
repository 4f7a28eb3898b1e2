//! Memory pressure: cold cache entries written alongside a phase's requests, like a bulk
//! import that caches every row (incident 2). The writes do not depend on the limiter's
//! decisions, so every limiter sees the same pressure.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use redis::aio::MultiplexedConnection;

use crate::history::{Event, ServerRole};
use crate::scenario::MemoryPressure;

/// Cache keys live under this prefix (never the limiter's).
pub const CACHE_PREFIX: &str = "lh-cache:";

/// What a flood wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FloodTotals {
    pub writes_ok: u64,
    pub writes_failed: u64,
    pub first_error: Option<String>,
}

/// The cache writer of one memory-pressure fault.
pub struct CacheFlood {
    pub spec: MemoryPressure,
    pub server: ServerRole,
    conn: MultiplexedConnection,
    /// Names are this prefix and a number.
    prefix: String,
    value: Vec<u8>,
    next: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl CacheFlood {
    /// `prefix`: [`CACHE_PREFIX`] on a server the harness started; on anyone else's, a
    /// prefix naming the run too, so that the run deletes its own entries by name.
    pub fn new(spec: MemoryPressure, server: ServerRole, conn: MultiplexedConnection, prefix: String) -> Self {
        let value = b"cold-cache-entry:"
            .iter()
            .copied()
            .cycle()
            .take(spec.value_bytes as usize)
            .collect();
        Self {
            spec,
            server,
            conn,
            prefix,
            value,
            next: AtomicU64::new(0),
            ok: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            first_error: Mutex::new(None),
        }
    }

    /// The name of every entry this fault tried to write.
    pub fn written_keys(&self) -> impl Iterator<Item = String> + '_ {
        (0..self.next.load(Ordering::Relaxed)).map(|n| format!("{}{n}", self.prefix))
    }

    /// Write this fault's cache entries for one request of its phase.
    pub async fn write_for_request(&self) {
        let mut conn = self.conn.clone();
        for _ in 0..self.spec.writes_per_request {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            let mut set = redis::cmd("SET");
            set.arg(format!("{}{n}", self.prefix)).arg(&self.value[..]);
            if self.spec.ttl_s > 0 {
                set.arg("EX").arg(self.spec.ttl_s);
            }
            match set.query_async::<()>(&mut conn).await {
                Ok(()) => {
                    self.ok.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    self.failed.fetch_add(1, Ordering::Relaxed);
                    let mut first = self.first_error.lock().expect("flood error lock");
                    first.get_or_insert_with(|| e.to_string());
                }
            }
        }
    }

    pub fn totals(&self) -> FloodTotals {
        FloodTotals {
            writes_ok: self.ok.load(Ordering::Relaxed),
            writes_failed: self.failed.load(Ordering::Relaxed),
            first_error: self.first_error.lock().expect("flood error lock").clone(),
        }
    }

    /// The history event summing up this flood.
    pub fn event(&self, t_us: u64) -> Event {
        let totals = self.totals();
        Event::Flood {
            t_us,
            phase: self.spec.phase.clone(),
            server: self.server,
            writes_ok: totals.writes_ok,
            writes_failed: totals.writes_failed,
            first_error: totals.first_error,
        }
    }
}
