//! A TCP relay on a loopback port whose upstream can be switched, held or cut: the
//! endpoint a failover moves (new connections reach the new primary; open ones stay where
//! they were), and the replica's link to its primary (held: what the primary sends is
//! dropped, so the replica falls behind while the primary acknowledges writes).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::BackendError;

struct Shared {
    upstream: Mutex<SocketAddr>,
    /// Drop what the upstream sends instead of relaying it.
    held: AtomicBool,
    /// Closes the listener and every connection.
    cut: CancellationToken,
}

pub struct Relay {
    port: u16,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Relay {
    /// Listen on a free loopback port, relaying each connection to `upstream`.
    pub fn start(upstream: SocketAddr) -> BoxFuture<'static, Result<Self, BackendError>> {
        Box::pin(Self::start_unboxed(upstream))
    }

    async fn start_unboxed(upstream: SocketAddr) -> Result<Self, BackendError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(BackendError::RelayBind)?;
        let port = listener.local_addr()?.port();
        let shared = Arc::new(Shared {
            upstream: Mutex::new(upstream),
            held: AtomicBool::new(false),
            cut: CancellationToken::new(),
        });
        let accepting = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = accepting.cut.cancelled() => break,
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => {
                            tokio::spawn(pump(client, Arc::clone(&accepting)));
                        }
                        Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                    },
                }
            }
        });
        Ok(Self { port, shared, task })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// New connections go to `upstream`; open ones stay with theirs.
    pub fn switch(&self, upstream: SocketAddr) {
        *self.shared.upstream.lock().unwrap_or_else(|e| e.into_inner()) = upstream;
    }

    /// From now on, what the upstream sends is dropped.
    pub fn hold(&self) {
        self.shared.held.store(true, Ordering::SeqCst);
    }

    /// Close every connection and stop listening.
    pub fn cut(&self) {
        self.shared.cut.cancel();
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.shared.cut.cancel();
        self.task.abort();
    }
}

/// Relay one connection until either side closes or the relay is cut.
async fn pump(client: TcpStream, shared: Arc<Shared>) {
    let upstream = *shared.upstream.lock().unwrap_or_else(|e| e.into_inner());
    let Ok(server) = TcpStream::connect(upstream).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let up = tokio::io::copy(&mut client_read, &mut server_write);
    let down = async {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match server_read.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            if shared.held.load(Ordering::SeqCst) {
                continue;
            }
            if client_write.write_all(&buf[..n]).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        () = shared.cut.cancelled() => {}
        _ = up => {}
        () = down => {}
    }
}

/// The address a `redis://HOST:PORT` URL names.
pub fn socket_addr(url: &str) -> Result<SocketAddr, BackendError> {
    let client = redis::Client::open(url)?;
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(host, port) => {
            let host = if host == "localhost" {
                "127.0.0.1"
            } else {
                host.as_str()
            };
            format!("{host}:{port}").parse().map_err(|source| BackendError::NotIp {
                url: url.to_owned(),
                source,
            })
        }
        other => Err(BackendError::NotTcp {
            url: url.to_owned(),
            addr: other.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn echo_server(tag: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut buf = [0u8; 64];
                    while let Ok(n) = sock.read(&mut buf).await {
                        if n == 0 || sock.write_all(tag).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        addr
    }

    async fn ask(stream: &mut TcpStream) -> Vec<u8> {
        stream.write_all(b"?").await.unwrap();
        let mut buf = [0u8; 1];
        match tokio::time::timeout(std::time::Duration::from_millis(300), stream.read(&mut buf)).await {
            Ok(Ok(1)) => buf.to_vec(),
            _ => Vec::new(),
        }
    }

    #[tokio::test]
    async fn a_switch_moves_new_connections_and_leaves_open_ones_a_hold_drops_replies_a_cut_closes() {
        let (a, b) = (echo_server(b"a").await, echo_server(b"b").await);
        let relay = Relay::start(a).await.unwrap();
        let mut first = TcpStream::connect(("127.0.0.1", relay.port())).await.unwrap();
        assert_eq!(ask(&mut first).await, b"a");
        relay.switch(b);
        let mut second = TcpStream::connect(("127.0.0.1", relay.port())).await.unwrap();
        assert_eq!(
            ask(&mut second).await,
            b"b",
            "a new connection reaches the new upstream"
        );
        assert_eq!(
            ask(&mut first).await,
            b"a",
            "an open connection stays with its upstream"
        );
        relay.hold();
        assert_eq!(ask(&mut second).await, b"", "held: the upstream's reply is dropped");
        relay.cut();
        let mut buf = [0u8; 1];
        let closed = tokio::time::timeout(std::time::Duration::from_secs(2), first.read(&mut buf)).await;
        assert!(
            matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
            "cut: the connection is closed"
        );
    }
}
