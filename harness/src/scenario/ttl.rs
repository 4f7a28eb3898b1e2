//! How long a limiter says its keys may live: in windows (a token bucket kept two refill
//! periods declares 2) or in absolute time (a daily cap's `EXPIRE 26 h`, whatever window the
//! scenario runs with). One declaration, from the limiter (an adapter's hello, a Lua sidecar)
//! or from a suite's `[[limiter]]`; `ttl-bounded` takes it as the bound.

use serde::Serialize;

use super::error::TtlMaxError;

/// A limiter's declared TTL bound.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TtlMax {
    /// This many windows of the scenario (`ttl_max_windows`).
    Windows(f64),
    /// This many milliseconds, whatever the window (`ttl_max_ms`).
    Ms(u64),
}

impl TtlMax {
    /// The declaration made by the fields `ttl_max_windows` and `ttl_max_ms` (at most one of
    /// them); the error says what is wrong with them in one line.
    pub fn declared(windows: Option<f64>, ms: Option<u64>) -> Result<Option<Self>, TtlMaxError> {
        match (windows, ms) {
            (Some(_), Some(_)) => Err(TtlMaxError::Both),
            (Some(w), None) if !(w.is_finite() && w > 0.0) => Err(TtlMaxError::Windows { windows: w }),
            (Some(w), None) => Ok(Some(Self::Windows(w))),
            (None, Some(0)) => Err(TtlMaxError::ZeroMs),
            (None, Some(ms)) => Ok(Some(Self::Ms(ms))),
            (None, None) => Ok(None),
        }
    }

    /// The bound in milliseconds for a window of `window_ms` (`as` saturates: an absurd
    /// declaration is a huge bound, never a wrapped one).
    pub fn ms(self, window_ms: u64) -> u64 {
        match self {
            Self::Windows(w) => (w * window_ms as f64).ceil() as u64,
            Self::Ms(ms) => ms,
        }
    }

    /// The declaration in words, e.g. "2 × window_ms" or "93600000 ms".
    pub fn describe(self) -> String {
        match self {
            Self::Windows(w) => format!("{} × window_ms", trim_float(w)),
            Self::Ms(ms) => format!("{ms} ms"),
        }
    }
}

/// `2` rather than `2.0`, `1.083` rather than `1.0833333`.
fn trim_float(x: f64) -> String {
    let text = format!("{x:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_owned()
}

#[cfg(test)]
mod tests {
    use super::TtlMax;

    #[test]
    fn one_declaration_in_windows_or_in_ms() {
        assert_eq!(TtlMax::declared(None, None), Ok(None));
        assert_eq!(TtlMax::declared(Some(2.0), None), Ok(Some(TtlMax::Windows(2.0))));
        // A daily cap on the catalog's shortest window: no cap on the number of windows.
        let daily = TtlMax::declared(Some(1_872_000.0), None).unwrap().unwrap();
        assert_eq!(daily.ms(50), 93_600_000);
        assert_eq!(
            TtlMax::declared(None, Some(93_600_000)).unwrap().unwrap().ms(50),
            93_600_000
        );
        assert!(
            TtlMax::declared(Some(0.0), None)
                .unwrap_err()
                .to_string()
                .contains("positive")
        );
        assert!(
            TtlMax::declared(Some(f64::NAN), None)
                .unwrap_err()
                .to_string()
                .contains("positive")
        );
        assert!(
            TtlMax::declared(None, Some(0))
                .unwrap_err()
                .to_string()
                .contains("positive")
        );
        assert!(
            TtlMax::declared(Some(1.0), Some(1))
                .unwrap_err()
                .to_string()
                .contains("both")
        );
        assert_eq!(TtlMax::Windows(26.0 / 24.0).describe(), "1.083 × window_ms");
        assert_eq!(TtlMax::Ms(93_600_000).describe(), "93600000 ms");
    }
}
