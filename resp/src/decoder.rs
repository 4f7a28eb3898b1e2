//! An incremental decoder: append bytes as they arrive, pop complete frames.

use crate::error::ParseError;
use crate::scan::{FrameScanner, build};
use crate::value::Value;

/// Buffers a byte stream and yields the complete frames in it, in order.
///
/// Measuring is resumable (a [`FrameScanner`] keeps its place), so a large frame arriving in many
/// small reads is scanned once, not once per read. After an error the decoder keeps returning that
/// error: the stream cannot be resynchronised.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    /// Start of the next frame in `buf`.
    start: usize,
    scanner: FrameScanner,
    failed: Option<ParseError>,
}

impl Decoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        // Drop consumed bytes once they are at least half the buffer (amortised O(1)).
        if self.start > 0 && self.start >= self.buf.len() / 2 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The bytes not yet returned as frames.
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// The length of the next complete frame, without consuming it (`Ok(None)`: need more bytes).
    pub fn peek_len(&mut self) -> Result<Option<usize>, ParseError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        match self.scanner.scan(&self.buf[self.start..]) {
            Ok(Some(n)) => {
                // The scanner has reset itself; a second call rescans from the frame start, so
                // keep the answer valid by leaving `start` unchanged until consumed.
                Ok(Some(n))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }

    /// The raw bytes of the next complete frame, consumed.
    pub fn next_raw(&mut self) -> Result<Option<Vec<u8>>, ParseError> {
        let Some(n) = self.peek_len()? else { return Ok(None) };
        let frame = self.buf[self.start..self.start + n].to_vec();
        self.start += n;
        Ok(Some(frame))
    }

    /// The next complete value, consumed.
    pub fn next_value(&mut self) -> Result<Option<Value>, ParseError> {
        let Some(n) = self.peek_len()? else { return Ok(None) };
        let frame = &self.buf[self.start..self.start + n];
        self.start += n;
        match build(frame, 0)? {
            Some((value, _)) => Ok(Some(value)),
            // The scanner accepted the frame, so the builder cannot run short.
            None => Ok(None),
        }
    }
}
