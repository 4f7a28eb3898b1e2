//! What a run may change in its scenario without editing the file (`--keys`, `--window-ms`,
//! `--ttl-max-ms`/`--ttl-max-windows`):
//! applied once to the loaded scenario, kept on it, recorded in the history and repeated in
//! the reproduce line, so that the same scenario can be rebuilt from a history.

use serde::{Deserialize, Serialize};

/// The changes a run made to its scenario, as given on the command line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Adjust {
    /// `--keys`: the limiter's key templates, overriding the file's and the limiter's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keys: Vec<String>,
    /// `--window-ms`: run with this window, every duration and rate scaled with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_ms: Option<u64>,
    /// `--ttl-max-ms`: how long the limiter's keys may live, declared for it in ms…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_max_ms: Option<u64>,
    /// …or `--ttl-max-windows`, in windows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_max_windows: Option<f64>,
}

impl Adjust {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.window_ms.is_none() && self.ttl_max_ms.is_none() && self.ttl_max_windows.is_none()
    }

    /// The command-line flags that make these changes, each quoted for a shell, with a
    /// leading space (empty when there are none).
    pub fn flags(&self) -> String {
        let mut flags = String::new();
        for key in &self.keys {
            flags.push_str(&format!(" --keys {}", crate::shell::quote(key)));
        }
        if let Some(window_ms) = self.window_ms {
            flags.push_str(&format!(" --window-ms {window_ms}"));
        }
        if let Some(ms) = self.ttl_max_ms {
            flags.push_str(&format!(" --ttl-max-ms {ms}"));
        }
        if let Some(windows) = self.ttl_max_windows {
            flags.push_str(&format!(" --ttl-max-windows {windows}"));
        }
        flags
    }
}
