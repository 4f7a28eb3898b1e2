//! Progress on a terminal: keys examined, against DBSIZE as the estimate of the total.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar on stderr when visible; hidden otherwise (`--no-progress`, or stderr is
/// not a terminal). SCAN says nothing of how far it has gone: each step is counted as
/// COUNT keys examined, capped at the estimate.
#[derive(Debug)]
pub struct ScanProgress {
    bar: ProgressBar,
}

impl ScanProgress {
    pub fn new(keys_estimate: u64, visible: bool) -> Self {
        let target = if visible {
            ProgressDrawTarget::stderr_with_hz(10)
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(keys_estimate), target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg:<16} {bar:24} ~{pos}/{len} keys")
                .expect("valid template"),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Self { bar }
    }

    /// One SCAN step of `count` done; `matched` distinct keys so far.
    pub fn scanned(&self, count: u64, matched: u64) {
        let len = self.bar.length().unwrap_or(0);
        self.bar.set_position((self.bar.position() + count).min(len));
        self.bar.set_message(format!("{matched} matched"));
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
