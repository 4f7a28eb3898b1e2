//! The proxy's memory budget: one count, shared by every connection, of the bytes the proxy
//! buffers — read and write buffers by their capacity, a parsed round trip while the hook looks
//! at it, and the queue of what to do with each reply. A connection takes from the budget
//! *before* it grows anything and gives back when it shrinks; one whose next growth would take
//! the count over the limit is refused (and closed by its caller), so the count never exceeds
//! the limit and other connections go on.
//!
//! The hot path pays a comparison per read or reply (is there room already?); the atomics run
//! only when a buffer grows or shrinks, and twice per round trip.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The default budget of a proxy: 256 MiB. A rate limiter's commands and replies are tens of
/// bytes, so this is never near in a run; it still lets through a single command of up to about
/// half of it (a command counts twice while parsed: its bytes and the copy the hook sees), and
/// it keeps a matrix of 8 runs through proxies at once within 2 GiB of buffers.
pub const DEFAULT_BUDGET: usize = 256 * 1024 * 1024;

/// A buffer shrinks back to this capacity once it is mostly empty again.
pub const RESTING: usize = 64 * 1024;

/// Above this capacity a buffer that is at most a quarter full is shrunk back to [`RESTING`].
const TRIM_ABOVE: usize = 4 * RESTING;

/// Why a connection may not buffer more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Taking `wanted` bytes more would take the proxy over its budget.
    OverBudget { wanted: usize, used: usize, limit: usize },
    /// The allocator refused `bytes` (the budget had room).
    NoMemory { bytes: usize },
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Refused::OverBudget { wanted, used, limit } => write!(
                f,
                "closed: buffering {wanted} more bytes would take the fault proxy over its memory budget of {} \
                 ({used} bytes already buffered across all connections)",
                bytes(limit)
            ),
            Refused::NoMemory { bytes } => write!(f, "closed: could not allocate {bytes} bytes for its buffers"),
        }
    }
}

impl std::error::Error for Refused {}

/// `8 MiB (8388608 bytes)`, or `1000 bytes`.
fn bytes(n: usize) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB ({n} bytes)", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// The count shared by every connection of one proxy.
#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
    peak: AtomicUsize,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes buffered now, across all connections.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The most bytes ever buffered at once; never more than the limit.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    fn take(&self, n: usize) -> Result<(), Refused> {
        let over = |used: usize| Refused::OverBudget {
            wanted: n,
            used,
            limit: self.limit,
        };
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let after = used
                .checked_add(n)
                .filter(|&a| a <= self.limit)
                .ok_or_else(|| over(used))?;
            match self
                .used
                .compare_exchange_weak(used, after, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.raise_peak(after);
                    return Ok(());
                }
                Err(now) => used = now,
            }
        }
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::Relaxed);
    }

    /// Counts `n` bytes already allocated, limit or not.
    fn force(&self, n: usize) {
        let after = self.used.fetch_add(n, Ordering::Relaxed) + n;
        self.raise_peak(after);
    }

    #[inline]
    fn raise_peak(&self, used: usize) {
        // A plain load first: the peak is seldom raised, a read-modify-write costs more.
        if used > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(used, Ordering::Relaxed);
        }
    }
}

/// What one connection holds of the budget (both of its directions); all of it goes back to
/// the budget when the lease is dropped with the connection.
#[derive(Debug)]
pub struct Lease {
    budget: Arc<Budget>,
    held: AtomicUsize,
}

impl Lease {
    pub fn new(budget: Arc<Budget>) -> Self {
        Self {
            budget,
            held: AtomicUsize::new(0),
        }
    }

    pub fn take(&self, n: usize) -> Result<(), Refused> {
        if n > 0 {
            self.budget.take(n)?;
            self.held.fetch_add(n, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Gives back `n` bytes taken earlier.
    pub fn give(&self, n: usize) {
        if n > 0 {
            let held = self.held.fetch_sub(n, Ordering::Relaxed);
            debug_assert!(held >= n, "gave back {n} bytes of {held} held");
            self.budget.give(n);
        }
    }

    /// Room in `buf` for `additional` more bytes: nothing to do when it has that much spare
    /// capacity; else the growth is taken from the budget, then allocated.
    #[inline]
    pub fn room(&self, buf: &mut Vec<u8>, additional: usize) -> Result<(), Refused> {
        if buf.capacity() - buf.len() >= additional {
            return Ok(());
        }
        self.grow(buf, additional)
    }

    /// Grows `buf` to twice its capacity (amortised O(1) copying), or to just what is needed
    /// when the budget has no room for that: a large frame costs what it weighs, not twice.
    #[cold]
    fn grow(&self, buf: &mut Vec<u8>, additional: usize) -> Result<(), Refused> {
        let (len, capacity) = (buf.len(), buf.capacity());
        let need = len.saturating_add(additional);
        let doubled = capacity.saturating_mul(2).max(need).max(RESTING);
        let target = match self.take(doubled - capacity) {
            Ok(()) => doubled,
            Err(refused) if need == doubled => return Err(refused),
            Err(_) => {
                self.take(need - capacity)?;
                need
            }
        };
        if buf.try_reserve_exact(target - len).is_err() {
            self.give(target - capacity);
            return Err(Refused::NoMemory { bytes: target });
        }
        // `reserve_exact` allocates exactly what it is asked for; count any surplus anyway.
        let surplus = buf.capacity() - target;
        if surplus > 0 {
            self.budget.force(surplus);
            self.held.fetch_add(surplus, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Shrinks `buf` back to [`RESTING`] once a large frame has left it (capacity over 256 KiB,
    /// at most a quarter of it used), giving the difference back.
    #[inline]
    pub fn trim(&self, buf: &mut Vec<u8>) {
        let capacity = buf.capacity();
        if capacity > TRIM_ABOVE && buf.len() <= capacity / 4 {
            buf.shrink_to(buf.len().max(RESTING));
            self.give(capacity - buf.capacity());
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.budget.give(*self.held.get_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: usize = 1 << 20;

    fn lease(limit: usize) -> (Arc<Budget>, Lease) {
        let budget = Arc::new(Budget::new(limit));
        (Arc::clone(&budget), Lease::new(budget))
    }

    #[test]
    fn takes_are_refused_past_the_limit_and_the_peak_stays_within_it() {
        let (budget, a) = lease(1000);
        let b = Lease::new(Arc::clone(&budget));
        a.take(600).unwrap();
        let refused = b.take(401).unwrap_err();
        assert_eq!(
            refused,
            Refused::OverBudget {
                wanted: 401,
                used: 600,
                limit: 1000
            }
        );
        b.take(400).unwrap();
        assert_eq!((budget.used(), budget.peak()), (1000, 1000));
        a.give(100);
        assert_eq!(budget.used(), 900);
        drop(a);
        assert_eq!(budget.used(), 400, "a dropped lease gives back all it held");
        assert!(b.take(usize::MAX).is_err(), "no overflow");
        drop(b);
        assert_eq!((budget.used(), budget.peak()), (0, 1000));
    }

    #[test]
    fn the_reason_names_the_budget() {
        let reason = Refused::OverBudget {
            wanted: 5 * MIB,
            used: 6 * MIB,
            limit: 8 * MIB,
        }
        .to_string();
        assert!(reason.contains("memory budget of 8 MiB (8388608 bytes)"), "{reason}");
        assert!(reason.contains("buffering 5242880 more bytes"), "{reason}");
        assert!(
            Refused::OverBudget {
                wanted: 1,
                used: 0,
                limit: 1000
            }
            .to_string()
            .contains("budget of 1000 bytes")
        );
    }

    #[test]
    fn buffers_are_counted_by_capacity_as_they_grow_and_shrink() {
        let (budget, lease) = lease(8 * MIB);
        let mut buf = Vec::new();
        lease.room(&mut buf, 100).unwrap();
        assert_eq!((buf.capacity(), budget.used()), (RESTING, RESTING));
        buf.resize(RESTING, 1);
        lease.room(&mut buf, 1).unwrap();
        assert_eq!((buf.capacity(), budget.used()), (2 * RESTING, 2 * RESTING), "doubled");
        lease.room(&mut buf, 10).unwrap();
        assert_eq!(budget.used(), 2 * RESTING, "room already there: nothing changes");
        // A large frame: just what it needs, then doubled while the budget has room for it…
        lease.room(&mut buf, 3 * MIB).unwrap();
        assert_eq!(buf.capacity(), RESTING + 3 * MIB);
        buf.resize(buf.capacity(), 2);
        lease.room(&mut buf, 1).unwrap();
        assert_eq!(buf.capacity(), 2 * (RESTING + 3 * MIB));
        assert_eq!(budget.used(), buf.capacity());
        // …and only what it needs when doubling would go over the budget.
        let full = buf.capacity();
        buf.resize(full, 3);
        lease.room(&mut buf, 1).unwrap();
        assert_eq!(buf.capacity(), full + 1);
        assert_eq!(budget.used(), buf.capacity());
        assert_eq!(budget.peak(), budget.used());
        buf.truncate(10);
        lease.trim(&mut buf);
        assert_eq!(buf.capacity(), RESTING);
        assert_eq!(budget.used(), buf.capacity(), "the shrink is given back");
        assert_eq!(&buf[..], &[1; 10][..], "the bytes left are kept");
        drop(lease);
        assert_eq!(budget.used(), 0, "the lease gives back what it held");
    }

    #[test]
    fn a_refused_growth_leaves_the_buffer_and_the_count_as_they_were() {
        let (budget, lease) = lease(MIB);
        let mut buf = vec![7u8; 1000];
        lease.take(buf.capacity()).unwrap();
        let before = (buf.capacity(), budget.used());
        let refused = lease.room(&mut buf, MIB).unwrap_err();
        assert!(matches!(refused, Refused::OverBudget { limit, .. } if limit == MIB));
        assert_eq!((buf.capacity(), budget.used()), before);
        assert_eq!(buf, vec![7u8; 1000]);
        assert!(budget.peak() <= MIB);
    }

    #[test]
    fn a_small_buffer_is_not_trimmed() {
        let (budget, lease) = lease(MIB);
        let mut buf = Vec::new();
        lease.room(&mut buf, 2 * RESTING).unwrap();
        let capacity = buf.capacity();
        lease.trim(&mut buf);
        assert_eq!((buf.capacity(), budget.used()), (capacity, capacity));
    }
}
