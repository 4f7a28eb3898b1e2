//! One client connection through the proxy: commands flow client → server in one task,
//! replies server → client in another, matched in order through a queue of what to do
//! with each reply.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Action, ProxyHook};

const READ_CHUNK: usize = 64 * 1024;

/// What the reply side does with the next reply.
#[derive(Debug)]
enum Pending {
    /// The server's next reply: forward it (after a delay), or drop it and close.
    Reply(Action),
    /// An injected reply, in the place of a command that was not forwarded.
    Injected(Vec<u8>),
    /// From here on the replies are not one per command (SUBSCRIBE, MONITOR): copy bytes.
    Passthrough,
}

pub async fn serve(client: TcpStream, upstream: String, hook: Arc<dyn ProxyHook>, conn: u64, stop: CancellationToken) {
    let _ = client.set_nodelay(true);
    let server = match TcpStream::connect(&upstream).await {
        Ok(s) => s,
        Err(e) => {
            let mut client = client;
            let _ = client
                .write_all(format!("-ERR the fault proxy could not reach {upstream}: {e}\r\n").as_bytes())
                .await;
            hook.connection_problem(conn, format!("could not connect to the server {upstream}: {e}"));
            return;
        }
    };
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let closed = stop.child_token();
    let requests = commands(client_read, server_write, tx, Arc::clone(&hook), conn);
    let replies = replies(server_read, client_write, rx);
    let why = tokio::select! {
        () = closed.cancelled() => None,
        why = requests => why,
        why = replies => why,
    };
    if let Some(why) = why {
        hook.connection_problem(conn, why);
    }
    // Dropping both halves of both sockets closes the connection on both sides.
}

/// Client → server. Returns a reason when the connection ends for a protocol problem.
async fn commands(
    mut client: OwnedReadHalf,
    mut server: OwnedWriteHalf,
    tx: mpsc::UnboundedSender<Pending>,
    hook: Arc<dyn ProxyHook>,
    conn: u64,
) -> Option<String> {
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut passthrough = false;
    loop {
        buf.reserve(READ_CHUNK);
        match client.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        if passthrough {
            if server.write_all(&buf).await.is_err() {
                return None;
            }
            buf.clear();
            continue;
        }
        let mut trip = Vec::new();
        let mut spans = Vec::new();
        let mut used = 0;
        loop {
            match resp::parse_command(&buf[used..]) {
                Ok(Some((command, len))) => {
                    spans.push(used..used + len);
                    trip.push(command);
                    used += len;
                }
                Ok(None) => break,
                Err(e) => return Some(format!("closed: the client sent a malformed command: {e}")),
            }
        }
        if trip.is_empty() {
            continue;
        }
        let actions = hook.before_forward(conn, &trip).await;
        out.clear();
        for (i, (command, span)) in trip.iter().zip(&spans).enumerate() {
            let action = actions.get(i).cloned().unwrap_or(Action::Forward);
            let pending = match action {
                Action::Reset => return None,
                Action::Inject(reply) => Pending::Injected(reply),
                action => {
                    out.extend_from_slice(&buf[span.clone()]);
                    Pending::Reply(action)
                }
            };
            if tx.send(pending).is_err() {
                return None;
            }
            if starts_passthrough(command) {
                let _ = tx.send(Pending::Passthrough);
                passthrough = true;
                // What follows it in this read goes through as it is.
                for rest in spans.iter().skip(i + 1) {
                    out.extend_from_slice(&buf[rest.clone()]);
                }
                out.extend_from_slice(&buf[used..]);
                used = buf.len();
                break;
            }
        }
        if !out.is_empty() && server.write_all(&out).await.is_err() {
            return None;
        }
        buf.drain(..used);
    }
}

fn starts_passthrough(command: &resp::Command) -> bool {
    matches!(
        command.name_upper().as_str(),
        "SUBSCRIBE" | "PSUBSCRIBE" | "SSUBSCRIBE" | "MONITOR"
    )
}

/// Server → client: each reply in its turn, injected ones in theirs.
async fn replies(
    mut server: OwnedReadHalf,
    mut client: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Pending>,
) -> Option<String> {
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut out: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    loop {
        let pending = match rx.try_recv() {
            Ok(p) => p,
            Err(mpsc::error::TryRecvError::Empty) => {
                if !flush(&mut client, &mut out).await {
                    return None;
                }
                rx.recv().await?
            }
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
        };
        match pending {
            Pending::Injected(reply) => out.extend_from_slice(&reply),
            Pending::Passthrough => {
                out.extend_from_slice(&buf);
                if !flush(&mut client, &mut out).await {
                    return None;
                }
                let _ = tokio::io::copy(&mut server, &mut client).await;
                return None;
            }
            Pending::Reply(action) => {
                let len = loop {
                    match resp::frame_len(&buf) {
                        Ok(Some(len)) if buf.first() == Some(&b'>') => {
                            // A RESP3 push (client tracking, pub/sub): not a reply to a command.
                            out.extend_from_slice(&buf[..len]);
                            buf.drain(..len);
                        }
                        Ok(Some(len)) => break len,
                        Ok(None) => {
                            if !flush(&mut client, &mut out).await {
                                return None;
                            }
                            buf.reserve(READ_CHUNK);
                            match server.read_buf(&mut buf).await {
                                Ok(0) | Err(_) => return None,
                                Ok(_) => {}
                            }
                        }
                        Err(e) => return Some(format!("closed: the server sent a malformed reply: {e}")),
                    }
                };
                match action {
                    Action::DropReply => {
                        let _ = flush(&mut client, &mut out).await;
                        return None;
                    }
                    Action::DelayReply(delay) => {
                        if !flush(&mut client, &mut out).await {
                            return None;
                        }
                        tokio::time::sleep(delay).await;
                        out.extend_from_slice(&buf[..len]);
                    }
                    _ => out.extend_from_slice(&buf[..len]),
                }
                buf.drain(..len);
            }
        }
    }
}

async fn flush(client: &mut OwnedWriteHalf, out: &mut Vec<u8>) -> bool {
    if out.is_empty() {
        return true;
    }
    let ok = client.write_all(out).await.is_ok();
    out.clear();
    ok
}
