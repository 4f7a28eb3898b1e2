//! A direct connection: one socket that the request holding it writes to and reads from
//! itself, with no connection task between them. A multiplexed connection hands every
//! command to its own task through a channel and the reply back through a oneshot: two
//! task wake-ups per round trip, often across the runtime's threads. A burst worker that
//! owns its connection (as each of redis-benchmark's clients does) needs neither.
//!
//! One caller at a time: a second caller waits for the first one's reply (as on a pooled
//! connection of a client library without multiplexing). A socket that failed (closed by
//! the server, an error, no reply within [`RESPONSE_TIMEOUT`], or a request dropped half-way
//! that left it out of step) is closed; the next caller opens a new one.

use std::io;
use std::sync::Arc;

use futures::future::BoxFuture;
use redis::{Cmd, ConnectionInfo, ErrorKind, IntoConnectionInfo, Pipeline, RedisError, RedisResult, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::settings::{CONNECT_TIMEOUT, RESPONSE_TIMEOUT};
use crate::error::SetupError;

/// A direct connection; clones share the socket (and take turns on it).
#[derive(Clone)]
pub struct Direct {
    inner: Arc<tokio::sync::Mutex<Socket>>,
    info: Arc<ConnectionInfo>,
}

struct Socket {
    /// `None` once closed: by the server, an error, a timeout or a cancelled request. The
    /// next caller opens a new one, as a client's pool replaces a broken connection.
    stream: Option<TcpStream>,
    /// Bytes read and not yet parsed.
    buf: Vec<u8>,
    /// Set while a request is on the socket: still set when the next caller comes, the
    /// request was cancelled before its reply was read.
    busy: bool,
}

impl Direct {
    /// Connect to `url` (`redis://[user:password@]host:port[/db]`), authenticating and
    /// selecting its database as the `redis` crate's clients do.
    pub fn connect(url: &str) -> BoxFuture<'_, Result<Self, SetupError>> {
        Box::pin(Self::connect_unboxed(url))
    }

    async fn connect_unboxed(url: &str) -> Result<Self, SetupError> {
        let failed = |reason: String| SetupError::Connect {
            url: url.to_owned(),
            reason,
        };
        let info = url.into_connection_info().map_err(|e| failed(e.to_string()))?;
        let mut buf = Vec::with_capacity(4096);
        let stream = open(&info, &mut buf).await.map_err(|e| failed(e.to_string()))?;
        Ok(Self {
            inner: Arc::new(tokio::sync::Mutex::new(Socket {
                stream: Some(stream),
                buf,
                busy: false,
            })),
            info: Arc::new(info),
        })
    }

    async fn exchange(&self, packed: &[u8], replies: usize) -> RedisResult<Vec<Value>> {
        let mut socket = self.inner.lock().await;
        let Socket { stream, buf, busy } = &mut *socket;
        if std::mem::take(busy) {
            *stream = None;
        }
        let tcp = match stream {
            Some(tcp) => tcp,
            None => {
                buf.clear();
                stream.insert(open(&self.info, buf).await?)
            }
        };
        *busy = true;
        let result = match tokio::time::timeout(RESPONSE_TIMEOUT, round_trip(tcp, buf, packed, replies)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "no reply in time").into()),
        };
        *busy = false;
        if result.is_err() {
            *stream = None;
        }
        result
    }
}

/// A new socket to the server of `info`, authenticated and on its database.
async fn open(info: &ConnectionInfo, buf: &mut Vec<u8>) -> RedisResult<TcpStream> {
    let redis::ConnectionAddr::Tcp(host, port) = info.addr() else {
        return Err(RedisError::from((
            ErrorKind::InvalidClientConfig,
            "a direct connection is TCP only",
        )));
    };
    let connect = TcpStream::connect((host.as_str(), *port));
    let mut tcp = tokio::time::timeout(CONNECT_TIMEOUT, connect)
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no connection in time"))??;
    tcp.set_nodelay(true)?;
    let settings = info.redis_settings();
    let mut setup = redis::pipe();
    if let Some(password) = settings.password() {
        setup.cmd("AUTH");
        if let Some(user) = settings.username() {
            setup.arg(user);
        }
        setup.arg(password);
    }
    if settings.db() != 0 {
        setup.cmd("SELECT").arg(settings.db());
    }
    if !setup.is_empty() {
        let packed = setup.get_packed_pipeline();
        let trip = round_trip(&mut tcp, buf, &packed, setup.len());
        let replies = tokio::time::timeout(RESPONSE_TIMEOUT, trip)
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no reply to AUTH or SELECT in time"))??;
        for reply in replies {
            reply.extract_error()?;
        }
    }
    Ok(tcp)
}

/// Write `packed`, read `replies` whole replies.
async fn round_trip(tcp: &mut TcpStream, buf: &mut Vec<u8>, packed: &[u8], replies: usize) -> RedisResult<Vec<Value>> {
    tcp.write_all(packed).await?;
    let mut values = Vec::with_capacity(replies);
    let mut start = 0;
    while values.len() < replies {
        match frame_len(&buf[start..]) {
            Ok(Some(len)) => {
                values.push(redis::parse_redis_value(&buf[start..start + len])?);
                start += len;
            }
            Ok(None) => {
                buf.drain(..start);
                start = 0;
                if tcp.read_buf(buf).await? == 0 {
                    return Err(
                        io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the connection").into(),
                    );
                }
            }
            Err(what) => {
                return Err(RedisError::from((
                    ErrorKind::Parse,
                    "a malformed reply",
                    what.to_owned(),
                )));
            }
        }
    }
    buf.drain(..start);
    Ok(values)
}

/// The length of the RESP value at the start of `buf`: `None` while it is incomplete.
fn frame_len(buf: &[u8]) -> Result<Option<usize>, &'static str> {
    let Some(eol) = buf.windows(2).position(|w| w == b"\r\n") else {
        return Ok(None);
    };
    let head = eol + 2;
    let number = || -> Result<i64, &'static str> {
        std::str::from_utf8(&buf[1..eol])
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or("a length that is not a number")
    };
    let elements = |n: i64, per: i64| -> Result<Option<usize>, &'static str> {
        let mut at = head;
        for _ in 0..n.max(0) * per {
            match frame_len(&buf[at..])? {
                Some(len) => at += len,
                None => return Ok(None),
            }
        }
        Ok(Some(at))
    };
    match buf[0] {
        b'+' | b'-' | b':' | b'_' | b'#' | b',' | b'(' => Ok(Some(head)),
        b'$' | b'!' | b'=' => {
            let n = number()?;
            if n < 0 {
                return Ok(Some(head));
            }
            let end = head + n as usize + 2;
            Ok((buf.len() >= end).then_some(end))
        }
        b'*' | b'~' | b'>' => elements(number()?, 1),
        b'%' => elements(number()?, 2),
        _ => Err("an unknown reply type"),
    }
}

impl redis::aio::ConnectionLike for Direct {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> redis::RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut values = self.exchange(&cmd.get_packed_command(), 1).await?;
            Ok(values.pop().unwrap_or(Value::Nil))
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut values = self.exchange(&pipeline.get_packed_pipeline(), offset + count).await?;
            // In a transaction, a command the server refused to queue aborts it: its error.
            if let Some(refused) = values[..offset].iter().find(|v| matches!(v, Value::ServerError(_))) {
                let Value::ServerError(e) = refused.clone() else {
                    unreachable!()
                };
                return Err(e.into());
            }
            Ok(values.split_off(offset))
        })
    }

    fn get_db(&self) -> i64 {
        self.info.redis_settings().db()
    }
}

#[cfg(test)]
mod tests {
    use super::frame_len;

    #[test]
    fn replies_are_framed_whole_or_not_at_all() {
        let whole: &[(&[u8], usize)] = &[
            (b"+OK\r\n", 5),
            (b"-ERR no\r\n", 9),
            (b":12\r\n", 5),
            (b"$3\r\nabc\r\n", 9),
            (b"$-1\r\n", 5),
            (b"*2\r\n:1\r\n$1\r\nx\r\n", 15),
            (b"*-1\r\n", 5),
            (b"*0\r\n", 4),
            (b"*1\r\n*1\r\n:5\r\n", 12),
        ];
        for (reply, len) in whole {
            let mut more = reply.to_vec();
            more.extend_from_slice(b":9\r\n");
            assert_eq!(frame_len(&more), Ok(Some(*len)), "{}", String::from_utf8_lossy(reply));
            for cut in 0..*len {
                assert_eq!(frame_len(&reply[..cut]).ok().flatten(), None, "cut at {cut}");
            }
        }
        assert!(frame_len(b"?what\r\n").is_err());
        assert!(frame_len(b"$x\r\n").is_err());
    }
}
