//! One client connection through the proxy: commands flow client → server in one task,
//! replies server → client in another, matched in order through a queue of what to do
//! with each reply. Every byte either direction holds is counted in the proxy's
//! [`Budget`]: buffers as they grow, a parsed round trip while the hook looks at it, the
//! queue's entries until the reply side takes them. Redirections and topology replies are
//! rewritten to name the proxies when the proxy has an address map ([`super::topology`]).

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::budget::{Budget, Lease, RESTING, Refused};
use super::topology::{self, Addresses};
use super::{Action, Command, ProxyHook};

/// Room made in a read buffer before each read.
const READ_CHUNK: usize = RESTING;

/// A reply this large is written straight from the read buffer, not copied into the batch.
const DIRECT: usize = READ_CHUNK;

/// What a queue entry weighs in the budget (an injected reply adds its bytes).
const QUEUED: usize = size_of::<Pending>();

/// What a parsed command weighs beyond its wire bytes.
const PARSED: usize = size_of::<Command>();

/// Why a direction stopped: `None` when the connection just ended, else the problem.
type Ends<T> = Result<T, Option<String>>;

fn refused(why: Refused) -> Option<String> {
    Some(why.to_string())
}

/// What every connection of one proxy shares.
#[derive(Clone)]
pub(super) struct Shared {
    /// The proxy's memory budget.
    pub budget: Arc<Budget>,
    /// Whether replicas' streams are held.
    pub hold: watch::Receiver<bool>,
    /// The cluster's node addresses and their proxies', once the run has set them.
    pub addresses: Arc<OnceLock<Addresses>>,
}

/// What the reply side does with the next reply.
#[derive(Debug)]
enum Pending {
    /// The server's next reply: forward it (after a delay), or drop it and close.
    Reply(Action),
    /// The same, for a command whose reply lists the cluster's nodes ([`topology::lists_nodes`]).
    Nodes(Action),
    /// An injected reply, in the place of a command that was not forwarded.
    Injected(Vec<u8>),
    /// From here on the replies are not one per command (SUBSCRIBE, MONITOR): copy bytes.
    Passthrough,
    /// From here on the connection is a replica's sync and replication stream (SYNC, PSYNC):
    /// copy bytes, except while replication is held ([`super::Proxy::hold_replication`]).
    Replication,
}

impl Pending {
    /// What the entry for a command with this action weighs (no action: forward).
    fn weight_of(action: Option<&Action>) -> usize {
        match action {
            Some(Action::Inject(reply)) => QUEUED + reply.len(),
            _ => QUEUED,
        }
    }

    fn weight(&self) -> usize {
        match self {
            Pending::Injected(reply) => QUEUED + reply.len(),
            Pending::Reply(_) | Pending::Nodes(_) | Pending::Passthrough | Pending::Replication => QUEUED,
        }
    }
}

pub async fn serve(
    client: TcpStream,
    upstream: String,
    hook: Arc<dyn ProxyHook>,
    conn: u64,
    stop: CancellationToken,
    shared: Shared,
) {
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
    relay(client.into_split(), server.into_split(), hook, conn, stop, shared).await;
    // Dropping both halves of both sockets closes the connection on both sides.
}

/// Relay one connection between a client's halves and the server's (sockets in the proxy,
/// scripted I/O in tests) until either side ends, the hook deciding what each command's
/// reply becomes.
pub(super) async fn relay<CR, CW, SR, SW>(
    (client_read, client_write): (CR, CW),
    (server_read, server_write): (SR, SW),
    hook: Arc<dyn ProxyHook>,
    conn: u64,
    stop: CancellationToken,
    shared: Shared,
) where
    CR: AsyncRead + Unpin,
    CW: AsyncWrite + Unpin,
    SR: AsyncRead + Unpin,
    SW: AsyncWrite + Unpin,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let closed = stop.child_token();
    // Both directions count in one lease; dropped last, it gives back whatever they held.
    let lease = Lease::new(shared.budget);
    let upstream = Upstream {
        server: server_write,
        tx,
        hook: Arc::clone(&hook),
        conn,
        lease: &lease,
        out: Vec::new(),
        addresses: Arc::clone(&shared.addresses),
    };
    let requests = commands(client_read, upstream);
    let downstream = Downstream {
        client: client_write,
        out: Vec::new(),
        lease: &lease,
        taken: 0,
        hold: shared.hold,
        addresses: shared.addresses,
        hook: Arc::clone(&hook),
        conn,
    };
    let replies = replies(server_read, rx, downstream);
    let why = tokio::select! {
        () = closed.cancelled() => None,
        ended = requests => ended.err().flatten(),
        ended = replies => ended.err().flatten(),
    };
    if let Some(why) = why {
        hook.connection_problem(conn, why);
    }
}

/// Where the commands go: the server, and the queue telling the reply side what to do.
struct Upstream<'a, W> {
    server: W,
    tx: mpsc::UnboundedSender<Pending>,
    hook: Arc<dyn ProxyHook>,
    conn: u64,
    lease: &'a Lease,
    /// The commands of a round trip that are forwarded, when the proxy answers some of it.
    out: Vec<u8>,
    /// The cluster's node addresses, once set (see [`Downstream::addresses`]).
    addresses: Arc<OnceLock<Addresses>>,
}

/// Client → server, until the connection ends: `Err(Some(why))` for a protocol problem or
/// the budget.
async fn commands<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(mut client: R, mut up: Upstream<'_, W>) -> Ends<()> {
    let mut buf: Vec<u8> = Vec::new();
    let mut spans: Vec<Range<usize>> = Vec::new();
    let mut passthrough = false;
    loop {
        // Room for one read, never for what a length in the input announces: the buffer
        // grows with the bytes that arrive.
        up.lease.room(&mut buf, READ_CHUNK).map_err(refused)?;
        match client.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return Err(None),
            Ok(_) => {}
        }
        if passthrough {
            up.server.write_all(&buf).await.map_err(|_| None)?;
            buf.clear();
            continue;
        }
        spans.clear();
        let used =
            measure(&buf, &mut spans).map_err(|e| Some(format!("closed: the client sent a malformed command: {e}")))?;
        if spans.is_empty() {
            continue;
        }
        passthrough = up.round_trip(&buf, &spans).await?;
        if passthrough {
            buf.clear();
        } else {
            buf.drain(..used);
        }
        up.lease.trim(&mut buf);
    }
}

/// The complete commands at the front of `buf`, measured (an array-form command without
/// allocating, an inline one within its 64 KiB line); returns the bytes they take.
fn measure(buf: &[u8], spans: &mut Vec<Range<usize>>) -> Result<usize, resp::ParseError> {
    let mut used = 0;
    while let Some(len) = resp::command_len(&buf[used..])? {
        spans.push(used..used + len);
        used += len;
    }
    Ok(used)
}

impl<W: AsyncWrite + Unpin> Upstream<'_, W> {
    /// One round trip: the commands measured at `spans` of `buf` are parsed (their weight
    /// taken from the budget first), shown to the hook, queued and forwarded as it says.
    /// `Ok(true)` when the rest of the connection is passed through as it is (SUBSCRIBE,
    /// MONITOR, PSYNC): everything in `buf` went to the server.
    async fn round_trip(&mut self, buf: &[u8], spans: &[Range<usize>]) -> Ends<bool> {
        let used = spans.last().map_or(0, |s| s.end);
        let parsed = used + spans.len() * PARSED;
        self.lease.take(parsed).map_err(refused)?;
        let trip: Vec<Command> = spans
            .iter()
            .map(|s| match resp::parse_command(&buf[s.clone()]) {
                Ok(Some((command, _))) => command,
                // Measured complete and valid above: cannot happen.
                _ => Command::default(),
            })
            .collect();
        let actions = self.hook.before_forward(self.conn, &trip).await;
        let switch = trip.iter().position(starts_passthrough);
        let sync = switch.is_some_and(|at| trip[at].is("SYNC") || trip[at].is("PSYNC"));
        // A sync's own reply is already the stream (newlines while the primary prepares it,
        // then `+FULLRESYNC` and the payload); a subscription's is one reply of its own.
        let queued = match switch {
            Some(at) if sync => at,
            Some(at) => at + 1,
            None => spans.len(),
        };
        // The replies naming the cluster's nodes, rewritten on the way back: only in front of
        // a cluster's node (an address map set), and rarely any.
        let listing: Vec<usize> = if self.addresses.get().is_some() && trip.iter().any(|c| c.is("CLUSTER")) {
            (0..queued).filter(|&i| topology::lists_nodes(&trip[i])).collect()
        } else {
            Vec::new()
        };
        drop(trip);
        self.lease.give(parsed);
        let then = switch.map(|_| {
            if sync {
                Pending::Replication
            } else {
                Pending::Passthrough
            }
        });
        self.queue(&actions[..actions.len().min(queued)], queued, &listing, then)?;
        // Forwarded: the commands whose replies are queued, and with a switch everything after.
        let queued_end = queued.checked_sub(1).map_or(0, |last| spans[last].end);
        let end = if switch.is_some() { buf.len() } else { queued_end };
        let answered = |i: usize| matches!(actions.get(i), Some(Action::Inject(_)));
        let bytes = if (0..queued).any(answered) {
            self.out.clear();
            self.lease.room(&mut self.out, end).map_err(refused)?;
            for (i, span) in spans[..queued].iter().enumerate() {
                if !answered(i) {
                    self.out.extend_from_slice(&buf[span.clone()]);
                }
            }
            self.out.extend_from_slice(&buf[queued_end..end]);
            &self.out[..]
        } else {
            &buf[..end]
        };
        if !bytes.is_empty() && self.server.write_all(bytes).await.is_err() {
            return Err(None);
        }
        self.out.clear();
        self.lease.trim(&mut self.out);
        Ok(switch.is_some())
    }

    /// Tells the reply side what to do with the replies of `count` commands (`actions` may be
    /// shorter: the rest are forwarded; those at `listing` list the cluster's nodes), then that
    /// the connection switches to pass-through. The entries' weight is taken from the budget
    /// first. A reset ends the connection.
    fn queue(&self, actions: &[Action], count: usize, listing: &[usize], switch: Option<Pending>) -> Ends<()> {
        let weight = (0..count).map(|i| Pending::weight_of(actions.get(i))).sum::<usize>()
            + if switch.is_some() { QUEUED } else { 0 };
        self.lease.take(weight).map_err(refused)?;
        for i in 0..count {
            let pending = match actions.get(i).cloned().unwrap_or(Action::Forward) {
                Action::Reset => return Err(None),
                Action::Inject(reply) => Pending::Injected(reply),
                action if listing.contains(&i) => Pending::Nodes(action),
                action => Pending::Reply(action),
            };
            self.tx.send(pending).map_err(|_| None)?;
        }
        if let Some(switch) = switch {
            self.tx.send(switch).map_err(|_| None)?;
        }
        Ok(())
    }
}

/// After these the server's replies are not one per command: pub/sub messages, a monitor's
/// feed, a replica's sync (its `+FULLRESYNC`, the RDB payload, the replication stream).
fn starts_passthrough(command: &Command) -> bool {
    ["SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "MONITOR", "SYNC", "PSYNC"]
        .iter()
        .any(|name| command.is(name))
}

/// Where the replies go: the client, through a batch written when the reply side waits.
struct Downstream<'a, W> {
    client: W,
    out: Vec<u8>,
    lease: &'a Lease,
    /// The weight of the queue entries taken since the last flush, given back at the next.
    taken: usize,
    /// Whether a replica's stream is held (see [`Pending::Replication`]).
    hold: watch::Receiver<bool>,
    /// Node addresses to rewrite in the replies, once set.
    addresses: Arc<OnceLock<Addresses>>,
    /// Told of an address a reply names that no proxy stands in front of.
    hook: Arc<dyn ProxyHook>,
    conn: u64,
}

impl<W: AsyncWrite + Unpin> Downstream<'_, W> {
    fn push(&mut self, bytes: &[u8]) -> Ends<()> {
        self.lease.room(&mut self.out, bytes.len()).map_err(refused)?;
        self.out.extend_from_slice(bytes);
        Ok(())
    }

    /// Adds a reply to the batch; a large one goes out on its own, without a copy.
    async fn forward(&mut self, reply: &[u8]) -> Ends<()> {
        if reply.len() < DIRECT {
            return self.push(reply);
        }
        self.flush().await?;
        self.client.write_all(reply).await.map_err(|_| None)
    }

    async fn flush(&mut self) -> Ends<()> {
        self.lease.give(std::mem::take(&mut self.taken));
        if self.out.is_empty() {
            return Ok(());
        }
        let written = self.client.write_all(&self.out).await;
        self.out.clear();
        self.lease.trim(&mut self.out);
        written.map_err(|_| None)
    }
}

/// Server → client: each reply in its turn, injected ones in theirs.
async fn replies<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut server: R,
    mut rx: mpsc::UnboundedReceiver<Pending>,
    mut down: Downstream<'_, W>,
) -> Ends<()> {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let pending = match rx.try_recv() {
            Ok(p) => p,
            Err(mpsc::error::TryRecvError::Empty) => {
                down.flush().await?;
                rx.recv().await.ok_or(None)?
            }
            Err(mpsc::error::TryRecvError::Disconnected) => return Err(None),
        };
        down.taken += pending.weight();
        match pending {
            Pending::Injected(reply) => down.push(&reply)?,
            Pending::Passthrough => {
                down.push(&buf)?;
                down.flush().await?;
                let _ = tokio::io::copy(&mut server, &mut down.client).await;
                return Err(None);
            }
            Pending::Replication => {
                down.push(&buf)?;
                down.flush().await?;
                return replicate(&mut server, &mut down).await;
            }
            Pending::Reply(action) => reply(&mut server, &mut buf, &mut down, action, false).await?,
            Pending::Nodes(action) => reply(&mut server, &mut buf, &mut down, action, true).await?,
        }
    }
}

/// A replica's stream, copied as it comes except while replication is held: then nothing is
/// read from the primary (its writes wait in its output buffer) until the hold is lifted.
async fn replicate<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    server: &mut R,
    down: &mut Downstream<'_, W>,
) -> Ends<()> {
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        if down.hold.wait_for(|held| !held).await.is_err() {
            return Err(None);
        }
        let read = tokio::select! {
            read = server.read(&mut chunk) => read,
            // Held while waiting: stop reading at once.
            _ = down.hold.wait_for(|held| *held) => continue,
        };
        match read {
            Ok(0) | Err(_) => return Err(None),
            Ok(n) => down.client.write_all(&chunk[..n]).await.map_err(|_| None)?,
        }
    }
}

/// The server's next reply, done with as `action` says (a redirection, or a reply that
/// `lists_nodes`, naming the proxies once the address map is set). RESP3 pushes before it
/// are forwarded as they come.
async fn reply<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    server: &mut R,
    buf: &mut Vec<u8>,
    down: &mut Downstream<'_, W>,
    action: Action,
    lists_nodes: bool,
) -> Ends<()> {
    let len = loop {
        match resp::frame_len(buf) {
            Ok(Some(len)) if buf.first() == Some(&b'>') => {
                // A RESP3 push (client tracking, pub/sub): not a reply to a command.
                down.push(&buf[..len])?;
                buf.drain(..len);
            }
            Ok(Some(len)) => break len,
            Ok(None) => {
                down.flush().await?;
                down.lease.room(buf, READ_CHUNK).map_err(refused)?;
                match server.read_buf(buf).await {
                    Ok(0) | Err(_) => return Err(None),
                    Ok(_) => {}
                }
            }
            Err(e) => return Err(Some(format!("closed: the server sent a malformed reply: {e}"))),
        }
    };
    let rewritten = match down.addresses.get() {
        Some(map) if topology::may_rewrite(&buf[..len], lists_nodes) => {
            let rewritten = topology::rewrite(&buf[..len], lists_nodes, map);
            for address in rewritten.unknown.iter().filter_map(|a| map.sighting(a)) {
                down.hook.unknown_node(down.conn, &address);
            }
            rewritten.frame
        }
        _ => None,
    };
    let frame = rewritten.as_deref().unwrap_or(&buf[..len]);
    match action {
        Action::DropReply => {
            let _ = down.flush().await;
            return Err(None);
        }
        Action::DelayReply(delay) => {
            // The reply is held in `buf` (counted) while it waits.
            down.flush().await?;
            tokio::time::sleep(delay).await;
            down.forward(frame).await?;
        }
        _ => down.forward(frame).await?,
    }
    buf.drain(..len);
    down.lease.trim(buf);
    Ok(())
}

#[cfg(test)]
mod tests {
    //! The relay against scripted I/O (`tokio_test::io`): what the client sends, what the
    //! server must receive, what the client must get back, with no server and no socket;
    //! delays on paused time.

    use std::time::Duration;

    use tokio_test::io::Builder;

    use super::*;

    const GET: &[u8] = b"*2\r\n$3\r\nGET\r\n$4\r\nrl:0\r\n";
    const ONE: &[u8] = b":1\r\n";

    /// Answers every command of a round trip with one action.
    struct Fixed(Action);

    #[async_trait::async_trait]
    impl ProxyHook for Fixed {
        async fn before_forward(&self, _conn: u64, trip: &[Command]) -> Vec<Action> {
            vec![self.0.clone(); trip.len()]
        }
    }

    async fn relay_scripted(client: tokio_test::io::Mock, server: tokio_test::io::Mock, action: Action) {
        let budget = Arc::new(Budget::new(1 << 20));
        relay(
            tokio::io::split(client),
            tokio::io::split(server),
            Arc::new(Fixed(action)),
            1,
            CancellationToken::new(),
            Shared {
                budget,
                hold: watch::channel(false).1,
                addresses: Arc::new(OnceLock::new()),
            },
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_command_is_forwarded_and_its_reply_comes_back() {
        let client = Builder::new().read(GET).write(ONE).build();
        let server = Builder::new().write(GET).read(ONE).build();
        relay_scripted(client, server, Action::Forward).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_pipeline_is_forwarded_whole_and_its_replies_come_back_in_order() {
        let two = [GET, GET].concat();
        let client = Builder::new().read(&two).write(b":1\r\n:2\r\n").build();
        let server = Builder::new().write(&two).read(b":1\r\n:2\r\n").build();
        relay_scripted(client, server, Action::Forward).await;
    }

    #[tokio::test(start_paused = true)]
    async fn an_injected_error_never_reaches_the_server() {
        let oom = b"-OOM command not allowed\r\n".to_vec();
        let client = Builder::new().read(GET).write(&oom).build();
        // The server is sent nothing and asked for nothing.
        let server = Builder::new().build();
        relay_scripted(client, server, Action::Inject(oom)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_reply_runs_on_the_server_and_closes_the_connection() {
        // The client gets no reply: the relay ends (closing it) while it still waits.
        let client = Builder::new().read(GET).wait(Duration::from_secs(60)).build();
        let server = Builder::new().write(GET).read(ONE).build();
        let started = tokio::time::Instant::now();
        relay_scripted(client, server, Action::DropReply).await;
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "closed before the client gave up"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_delayed_reply_is_held_exactly_its_delay() {
        let client = Builder::new().read(GET).write(ONE).build();
        let server = Builder::new().write(GET).read(ONE).build();
        let started = tokio::time::Instant::now();
        relay_scripted(client, server, Action::DelayReply(Duration::from_millis(750))).await;
        assert_eq!(started.elapsed(), Duration::from_millis(750));
    }

    #[tokio::test(start_paused = true)]
    async fn a_reset_closes_the_connection_without_forwarding() {
        let client = Builder::new().read(GET).wait(Duration::from_secs(60)).build();
        let server = Builder::new().build();
        relay_scripted(client, server, Action::Reset).await;
    }

    /// Forwards everything and keeps the unknown nodes it is told of.
    #[derive(Default)]
    struct Unknowns(std::sync::Mutex<Vec<(u64, String)>>);

    #[async_trait::async_trait]
    impl ProxyHook for Unknowns {
        async fn before_forward(&self, _conn: u64, trip: &[Command]) -> Vec<Action> {
            vec![Action::Forward; trip.len()]
        }
        fn unknown_node(&self, conn: u64, address: &str) {
            self.0.lock().unwrap().push((conn, address.to_owned()));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_redirection_to_a_node_without_a_proxy_goes_out_as_it_came_and_is_told_once() {
        let addresses = Addresses::new([("10.0.0.5:7000".to_owned(), "127.0.0.1:41000".parse().unwrap())]);
        let shared = Shared {
            budget: Arc::new(Budget::new(1 << 20)),
            hold: watch::channel(false).1,
            addresses: Arc::new(OnceLock::new()),
        };
        let _ = shared.addresses.set(addresses.answered_by("10.0.0.5:7000"));
        let hook = Arc::new(Unknowns::default());
        let replies: &[u8] = b"-MOVED 9 10.9.9.9:7001\r\n-MOVED 9 10.0.0.5:7000\r\n";
        let two = [GET, GET].concat();
        // The second connection meets the same unknown node: it is told of it no more.
        for conn in [1, 2] {
            let client = Builder::new()
                .read(&two)
                .write(b"-MOVED 9 10.9.9.9:7001\r\n-MOVED 9 127.0.0.1:41000\r\n")
                .build();
            let server = Builder::new().write(&two).read(replies).build();
            relay(
                tokio::io::split(client),
                tokio::io::split(server),
                Arc::clone(&hook) as Arc<dyn ProxyHook>,
                conn,
                CancellationToken::new(),
                shared.clone(),
            )
            .await;
        }
        assert_eq!(*hook.0.lock().unwrap(), [(1, "10.9.9.9:7001".to_owned())]);
    }
}
