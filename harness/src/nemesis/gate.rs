//! A per-identity gate: while the nemesis strikes a request, the identity's other
//! requests wait before their first round trip. Re-entrant for the struck request itself
//! (a second strike on the same request does not wait for itself).

use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct Gate {
    /// The request holding the gate.
    holder: Mutex<Option<u64>>,
    released: Notify,
}

impl Gate {
    /// Wait until no other request holds the gate.
    pub async fn pass(&self, request: u64) {
        self.wait_until(|holder| holder.is_none_or(|h| h == request)).await;
    }

    /// Hold the gate for `request` until the returned [`Hold`] is dropped.
    pub async fn take(self: &Arc<Self>, request: u64) -> Hold {
        loop {
            self.wait_until(|holder| holder.is_none_or(|h| h == request)).await;
            let mut holder = self.holder.lock().expect("gate lock");
            match *holder {
                None => {
                    *holder = Some(request);
                    return Hold {
                        gate: Some(Arc::clone(self)),
                    };
                }
                Some(h) if h == request => return Hold { gate: None },
                Some(_) => {}
            }
        }
    }

    async fn wait_until(&self, open: impl Fn(Option<u64>) -> bool) {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            released.as_mut().enable();
            if open(*self.holder.lock().expect("gate lock")) {
                return;
            }
            released.await;
        }
    }
}

/// Keeps the other requests of a struck identity waiting while it lives.
#[derive(Debug)]
pub struct Hold {
    /// None for a re-entrant hold (the outer one releases).
    gate: Option<Arc<Gate>>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            *gate.holder.lock().expect("gate lock") = None;
            gate.released.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    // On paused time: the waits below pass at once and the same way on every run.
    #[tokio::test(start_paused = true)]
    async fn others_wait_while_held_the_holder_does_not() {
        let gate = Arc::new(Gate::default());
        let hold = gate.take(1).await;
        let again = tokio::time::timeout(Duration::from_millis(50), gate.take(1)).await;
        assert!(again.is_ok(), "re-entrant for the same request");
        tokio::time::timeout(Duration::from_millis(50), gate.pass(1))
            .await
            .expect("the holder passes");
        let other = tokio::spawn({
            let gate = Arc::clone(&gate);
            async move { gate.pass(2).await }
        });
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert!(!other.is_finished(), "another request waits");
        drop(again);
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!other.is_finished(), "a re-entrant hold does not release");
        drop(hold);
        tokio::time::timeout(Duration::from_millis(100), other)
            .await
            .expect("released")
            .unwrap();
    }
}
