//! Progress on a terminal: the phase and how many requests are done.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar on stderr when it is a terminal; invisible otherwise (CI logs stay clean).
#[derive(Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    pub fn new(total_requests: u64, visible: bool) -> Self {
        let target = if visible {
            ProgressDrawTarget::stderr_with_hz(10)
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(total_requests), target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg:<22} {bar:30} {pos}/{len} requests")
                .expect("valid template"),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Self { bar }
    }

    pub fn hidden() -> Self {
        Self::new(0, false)
    }

    pub fn phase(&self, name: &str) {
        self.bar.set_message(format!("phase {name}"));
    }

    pub fn request_done(&self) {
        self.bar.inc(1);
    }

    pub fn set_message(&self, message: &str) {
        self.bar.set_message(message.to_owned());
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
