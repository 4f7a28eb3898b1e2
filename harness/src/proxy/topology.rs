//! Node addresses in a cluster's replies, as the proxies' clients must see them.
//!
//! A client of a Redis Cluster learns the nodes from the cluster's own replies: `MOVED` and
//! `ASK` errors, and the topology commands (`CLUSTER SLOTS`, `SHARDS`, `NODES`, `REPLICAS`).
//! To keep a limiter inside the fault proxies it must find each node at its proxy's address.
//! The proxies rewrite those replies, on a cluster the harness starts as on one it did not
//! (where nothing may be reconfigured): every node address they know ([`Addresses`]) becomes
//! the address of the proxy in front of that node. (A node announces its proxy's port itself,
//! `cluster-announce-port`, only where replicas must sync through the proxies: a scenario
//! that holds replication back.) A node is known by its `ip:port` and, when
//! the cluster names its nodes by hostname (`cluster-preferred-endpoint-type hostname`), by
//! its `hostname:port` too ([`Addresses::with_hostnames`]). An address the map does not know
//! (a node added after the run started, an endpoint the cluster gives as `?`) is left as it
//! is, and reported: a client that follows it leaves the proxies.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use resp::{Command, Value};

/// Each node's address as the cluster gives it (`host:port`), and its proxy's.
#[derive(Debug, Clone, Default)]
pub struct Addresses {
    proxies: HashMap<String, SocketAddr>,
    /// The proxies' own addresses: a node that announces its proxy's port names one of these.
    own: HashSet<SocketAddr>,
    /// The host of the node whose replies these are (see [`Addresses::answered_by`]).
    answering_host: String,
    /// Addresses not in the map that a reply named, shared by every proxy of the run (each
    /// is reported once: [`Addresses::sighting`]).
    sighted: Arc<Mutex<HashSet<String>>>,
}

/// How many unknown addresses a run reports one by one ([`Addresses::sighting`]).
pub const SIGHTED_MAX: usize = 32;

/// What the map says of a node address in a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lookup {
    /// A node's, in front of which this proxy stands.
    Node(SocketAddr),
    /// A proxy's own (the node announces its proxy's port): nothing to rewrite.
    Proxy,
    /// Neither.
    Unknown,
}

impl Addresses {
    /// From `(node's host:port, its proxy's address)` pairs. An IPv6 host may come in
    /// brackets (`[::1]:7000`, as a URL writes it); the cluster writes it bare (`::1:7000`).
    pub fn new(pairs: impl IntoIterator<Item = (String, SocketAddr)>) -> Self {
        let proxies: HashMap<String, SocketAddr> = pairs
            .into_iter()
            .map(|(node, proxy)| (unbracketed(&node), proxy))
            .collect();
        Self {
            own: proxies.values().copied().collect(),
            proxies,
            ..Self::default()
        }
    }

    /// The map with each node's hostname added, as a `CLUSTER NODES` reply gives it
    /// (`<id> <ip:port@cport[,hostname[,aux=value…]]> …`): `hostname:port` is then known as
    /// the node at `ip:port` is.
    pub fn with_hostnames(mut self, cluster_nodes: &str) -> Self {
        for line in cluster_nodes.lines() {
            let Some(address) = line.split_whitespace().nth(1) else {
                continue;
            };
            let (endpoint, rest) = address.split_once('@').unwrap_or((address, ""));
            let hostname = rest.split(',').nth(1).filter(|h| !h.is_empty() && !h.contains('='));
            let (Some(hostname), Some((_, port))) = (hostname, endpoint.rsplit_once(':')) else {
                continue;
            };
            if let Some(&proxy) = self.proxies.get(&unbracketed(endpoint)) {
                self.proxies.insert(format!("{hostname}:{port}"), proxy);
            }
        }
        self
    }

    /// The map as the proxy of the node at `upstream` (`host:port`) uses it: an address with
    /// an empty host (`:7001`, which a node gives for an endpoint it does not know) is on the
    /// host the client reached the node at.
    pub fn answered_by(mut self, upstream: &str) -> Self {
        let upstream = unbracketed(upstream);
        self.answering_host = upstream
            .rsplit_once(':')
            .map_or(upstream.as_str(), |(h, _)| h)
            .to_owned();
        self
    }

    pub fn is_empty(&self) -> bool {
        self.proxies.is_empty()
    }

    /// What to report of `address`, one that [`rewrite`] found unknown: `Some` the first time
    /// any proxy of the run meets it, for the first [`SIGHTED_MAX`] addresses; then once more,
    /// saying that no more are listed; else `None`. A cluster's replies cannot grow the set
    /// (or the history) without bound.
    pub fn sighting(&self, address: &str) -> Option<String> {
        let mut sighted = self.sighted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if sighted.contains(address) || sighted.len() > SIGHTED_MAX {
            return None;
        }
        let first_past_the_cap = sighted.len() == SIGHTED_MAX;
        sighted.insert(address.to_owned());
        Some(if first_past_the_cap {
            format!("{address} (and more: past {SIGHTED_MAX} such addresses, no more are listed)")
        } else {
            address.to_owned()
        })
    }

    /// The node at `host:port` (an empty host: the answering node's).
    fn lookup(&self, host: &str, port: &str) -> Lookup {
        let host = if host.is_empty() { &self.answering_host } else { host };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Some(&proxy) = self.proxies.get(&format!("{host}:{port}")) {
            return Lookup::Node(proxy);
        }
        let socket = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        match socket.parse::<SocketAddr>() {
            Ok(a) if self.own.contains(&a) => Lookup::Proxy,
            _ => Lookup::Unknown,
        }
    }

    /// The proxy in front of the node at `host:port`; an address neither a node's nor a
    /// proxy's is added to `unknown`.
    fn proxy_of(&self, host: &str, port: &str, unknown: &mut Vec<String>) -> Option<SocketAddr> {
        match self.lookup(host, port) {
            Lookup::Node(proxy) => Some(proxy),
            Lookup::Proxy => None,
            Lookup::Unknown => {
                let address = format!("{host}:{port}");
                if !unknown.contains(&address) {
                    unknown.push(address);
                }
                None
            }
        }
    }
}

/// `host:port` with an IPv6 host's brackets (`[::1]:7000`, as a URL writes it) taken off, as
/// the cluster writes it (`::1:7000`).
fn unbracketed(address: &str) -> String {
    address.replacen('[', "", 1).replacen(']', "", 1)
}

/// Whether the reply to `command` lists the cluster's nodes.
pub fn lists_nodes(command: &Command) -> bool {
    command.is("CLUSTER")
        && command.args.get(1).is_some_and(|sub| {
            ["SLOTS", "SHARDS", "NODES", "REPLICAS", "SLAVES"]
                .iter()
                .any(|name| sub.eq_ignore_ascii_case(name.as_bytes()))
        })
}

/// The largest reply rewritten: 1 MiB, a topology of thousands of nodes. The rewritten copy
/// is held outside the proxy's memory budget; a larger reply goes out as it came.
const REWRITE_MAX: usize = 1 << 20;

/// Whether `frame` may need [`rewrite`]: a redirection, or the reply to a command that
/// [`lists_nodes`]. The check on every reply is one byte.
pub fn may_rewrite(frame: &[u8], lists_nodes: bool) -> bool {
    let redirection = || frame.starts_with(b"-MOVED ") || frame.starts_with(b"-ASK ");
    (lists_nodes || (frame.first() == Some(&b'-') && redirection())) && frame.len() <= REWRITE_MAX
}

/// What [`rewrite`] made of a reply.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Rewritten {
    /// The reply with every node address in the map replaced by its proxy's; `None` when
    /// nothing in it changes (or it is not a frame this understands: it goes out as it came).
    pub frame: Option<Vec<u8>>,
    /// The addresses it names that are neither a node's in the map nor a proxy's: a client
    /// that follows one leaves the proxies. Nodes the cluster lists as failed, without an
    /// address or still in a handshake are not counted.
    pub unknown: Vec<String>,
}

/// `frame` as the proxies' clients must see it (see [`Rewritten`]).
pub fn rewrite(frame: &[u8], lists_nodes: bool, map: &Addresses) -> Rewritten {
    let mut walk = Walk {
        map,
        unknown: Vec::new(),
    };
    if map.is_empty() {
        return Rewritten::default();
    }
    let Some((mut value, _)) = resp::parse(frame).ok().flatten() else {
        return Rewritten::default();
    };
    let changed = match &mut value {
        Value::Error(text) if !lists_nodes => walk.redirection(text),
        _ if lists_nodes => walk.topology(&mut value),
        _ => false,
    };
    Rewritten {
        frame: changed.then(|| value.to_bytes()),
        unknown: walk.unknown,
    }
}

/// One reply's rewriting: the map, and the unknown addresses met so far.
struct Walk<'a> {
    map: &'a Addresses,
    unknown: Vec<String>,
}

impl Walk<'_> {
    fn proxy_of(&mut self, host: &str, port: &str) -> Option<SocketAddr> {
        self.map.proxy_of(host, port, &mut self.unknown)
    }

    /// `MOVED 3999 127.0.0.1:6381` (or `ASK …`): the address replaced.
    fn redirection(&mut self, text: &mut Vec<u8>) -> bool {
        let Ok(line) = std::str::from_utf8(text) else {
            return false;
        };
        let mut parts = line.splitn(3, ' ');
        let (Some(kind), Some(slot), Some(endpoint)) = (parts.next(), parts.next(), parts.next()) else {
            return false;
        };
        let Some((host, port)) = endpoint.rsplit_once(':') else {
            return false;
        };
        let Some(proxy) = self.proxy_of(host, port) else {
            return false;
        };
        *text = format!("{kind} {slot} {proxy}").into_bytes();
        true
    }

    /// The reply of a topology command: `CLUSTER NODES`/`REPLICAS` (text, a node per line),
    /// `CLUSTER SLOTS` (ranges, each with its nodes as `[ip, port, id, …]`) or `CLUSTER SHARDS`
    /// (shards, each with its nodes as maps — flat arrays in RESP2 — of `ip`, `port`, `endpoint`).
    fn topology(&mut self, value: &mut Value) -> bool {
        match value {
            Value::Bulk(text) | Value::Verbatim { text, .. } => self.node_lines(text),
            Value::Array(items) => {
                let mut changed = false;
                for item in items {
                    changed |= match item {
                        // CLUSTER REPLICAS: a `CLUSTER NODES` line per replica.
                        Value::Bulk(text) | Value::Verbatim { text, .. } => self.node_lines(text),
                        item => self.slot_range(item) | self.shard(item),
                    };
                }
                changed
            }
            _ => false,
        }
    }

    /// `<id> <ip:port@cport[,hostname]> <flags> …` lines: the `ip:port` of each replaced.
    fn node_lines(&mut self, text: &mut Vec<u8>) -> bool {
        let Ok(lines) = std::str::from_utf8(text) else {
            return false;
        };
        let mut changed = false;
        let mut out = String::with_capacity(lines.len());
        for line in lines.split_inclusive('\n') {
            let mut fields = line.splitn(3, ' ');
            let (Some(id), Some(address), rest) = (fields.next(), fields.next(), fields.next()) else {
                out.push_str(line);
                continue;
            };
            let (endpoint, bus) = address.split_at(address.find(['@', ',']).unwrap_or(address.len()));
            let flags = rest.and_then(|r| r.split(' ').next()).unwrap_or_default();
            let reachable = !flags.split(',').any(|f| matches!(f, "fail" | "noaddr" | "handshake"));
            let proxy = match endpoint.rsplit_once(':') {
                Some((host, port)) if reachable => self.proxy_of(host, port),
                Some((host, port)) => self.map.proxy_of(host, port, &mut Vec::new()),
                None => None,
            };
            match proxy {
                Some(proxy) => {
                    changed = true;
                    out.push_str(&format!(
                        "{id} {proxy}{}",
                        hostname_replaced(bus, &proxy.ip().to_string())
                    ));
                }
                None => out.push_str(&format!("{id} {address}")),
            }
            if let Some(rest) = rest {
                out.push(' ');
                out.push_str(rest);
            }
        }
        if changed {
            *text = out.into_bytes();
        }
        changed
    }

    /// `[start, end, [endpoint, port, id, {metadata}], …]` of `CLUSTER SLOTS`. A nil or empty
    /// endpoint (`cluster-preferred-endpoint-type unknown-endpoint`) is the answering node's
    /// host; an endpoint the map does not know (`?`, a node without the hostname the cluster
    /// prefers) is looked up by the `ip` of its metadata. The metadata's `ip` and `hostname`
    /// name the proxy too.
    fn slot_range(&mut self, range: &mut Value) -> bool {
        let Value::Array(items) = range else { return false };
        if !matches!(items.first(), Some(Value::Integer(_))) {
            return false;
        }
        let mut changed = false;
        for node in items.iter_mut().skip(2) {
            let Value::Array(fields) = node else { continue };
            let host = match fields.first() {
                Some(Value::Bulk(host)) => String::from_utf8_lossy(host).into_owned(),
                Some(Value::Null | Value::NullBulk) => String::new(),
                _ => continue,
            };
            let Some(Value::Integer(port)) = fields.get(1) else {
                continue;
            };
            let port = port.to_string();
            let by_ip = match fields.get_mut(3).and_then(|m| field(m, "ip")) {
                Some(Value::Bulk(ip)) => self.map.proxy_of(&String::from_utf8_lossy(ip), &port, &mut Vec::new()),
                _ => None,
            };
            let proxy = match self.map.proxy_of(&host, &port, &mut Vec::new()) {
                Some(proxy) => Some(proxy),
                None if by_ip.is_some() => by_ip,
                None => self.proxy_of(&host, &port),
            };
            let Some(proxy) = proxy else { continue };
            let ip = proxy.ip().to_string().into_bytes();
            fields[0] = Value::Bulk(ip.clone());
            fields[1] = Value::Integer(i64::from(proxy.port()));
            if let Some(metadata) = fields.get_mut(3) {
                for name in ["ip", "hostname"] {
                    if let Some(Value::Bulk(text)) = field(metadata, name) {
                        *text = ip.clone();
                    }
                }
            }
            changed = true;
        }
        changed
    }

    /// A shard of `CLUSTER SHARDS`: its `nodes`, each with its `ip`, `port`, `endpoint` (and
    /// `hostname`, when the cluster names its nodes).
    fn shard(&mut self, shard: &mut Value) -> bool {
        let Some(Value::Array(nodes)) = field(shard, "nodes") else {
            return false;
        };
        let mut changed = false;
        for node in nodes {
            let ip = match field(node, "ip") {
                Some(Value::Bulk(ip)) => String::from_utf8_lossy(ip).into_owned(),
                _ => continue,
            };
            // A failed node is listed, but a client does not go there: not reported.
            let failed = matches!(field(node, "health"), Some(Value::Bulk(h)) if h == b"fail");
            let Some(Value::Integer(port)) = field(node, "port") else {
                continue;
            };
            let port = port.to_string();
            let proxy = if failed {
                self.map.proxy_of(&ip, &port, &mut Vec::new())
            } else {
                self.proxy_of(&ip, &port)
            };
            let Some(proxy) = proxy else {
                continue;
            };
            if let Some(Value::Integer(port)) = field(node, "port") {
                *port = i64::from(proxy.port());
            }
            let host = proxy.ip().to_string().into_bytes();
            for name in ["ip", "endpoint", "hostname"] {
                if let Some(Value::Bulk(text)) = field(node, name) {
                    *text = host.clone();
                }
            }
            changed = true;
        }
        changed
    }
}

/// The `@cport[,hostname[,aux=value…]]` of a `CLUSTER NODES` address with its hostname, if it
/// has one, replaced by `host`.
fn hostname_replaced(bus: &str, host: &str) -> String {
    let Some((cport, extra)) = bus.split_once(',') else {
        return bus.to_owned();
    };
    let (hostname, aux) = extra.split_once(',').map_or((extra, None), |(h, a)| (h, Some(a)));
    if hostname.is_empty() || hostname.contains('=') {
        return bus.to_owned();
    }
    match aux {
        Some(aux) => format!("{cport},{host},{aux}"),
        None => format!("{cport},{host}"),
    }
}

/// The value under `name` in a RESP3 map or a RESP2 flat `[name, value, …]` array.
fn field<'a>(value: &'a mut Value, name: &str) -> Option<&'a mut Value> {
    let is_name = |v: &Value| matches!(v, Value::Bulk(b) | Value::SimpleString(b) if b == name.as_bytes());
    match value {
        Value::Map(pairs) => pairs.iter_mut().find(|(k, _)| is_name(k)).map(|(_, v)| v),
        Value::Array(items) => {
            let at = items.iter().step_by(2).position(is_name)? * 2 + 1;
            items.get_mut(at)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map() -> Addresses {
        Addresses::new([
            ("10.0.0.5:7000".to_owned(), "127.0.0.1:41000".parse().unwrap()),
            ("10.0.0.6:7001".to_owned(), "127.0.0.1:41001".parse().unwrap()),
            ("10.0.0.6:7000".to_owned(), "127.0.0.1:41002".parse().unwrap()),
        ])
        .answered_by("10.0.0.5:7000")
    }

    fn command(args: &[&str]) -> Command {
        Command {
            args: args.iter().map(|a| a.as_bytes().to_vec()).collect(),
        }
    }

    #[test]
    fn the_topology_commands_are_known_by_their_subcommand() {
        assert!(lists_nodes(&command(&["cluster", "slots"])));
        assert!(lists_nodes(&command(&["CLUSTER", "SHARDS"])));
        assert!(lists_nodes(&command(&["CLUSTER", "NODES"])));
        assert!(!lists_nodes(&command(&["CLUSTER", "INFO"])));
        assert!(!lists_nodes(&command(&["GET", "slots"])));
    }

    #[test]
    fn a_redirection_names_the_proxy_of_its_node() {
        let moved = rewrite(b"-MOVED 3999 10.0.0.6:7001\r\n", false, &map()).frame.unwrap();
        assert_eq!(moved, b"-MOVED 3999 127.0.0.1:41001\r\n");
        let ask = rewrite(b"-ASK 12 10.0.0.5:7000\r\n", false, &map()).frame.unwrap();
        assert_eq!(ask, b"-ASK 12 127.0.0.1:41000\r\n");
        // `:port`: on the host of the node that answered (not any node on that port).
        let bare = rewrite(b"-MOVED 1 :7000\r\n", false, &map()).frame.unwrap();
        assert_eq!(bare, b"-MOVED 1 127.0.0.1:41000\r\n");
        let elsewhere = map().answered_by("10.0.0.6:7001");
        let bare = rewrite(b"-MOVED 1 :7000\r\n", false, &elsewhere).frame.unwrap();
        assert_eq!(bare, b"-MOVED 1 127.0.0.1:41002\r\n");
        assert!(may_rewrite(b"-MOVED 1 :7000\r\n", false));
        assert!(!may_rewrite(b"-ERR no\r\n", false));
        assert!(!may_rewrite(b":1\r\n", false));
        assert!(may_rewrite(b"$3\r\nabc\r\n", true));
        assert!(
            !may_rewrite(&vec![b'x'; REWRITE_MAX + 1], true),
            "too large: out as it came"
        );
    }

    #[test]
    fn an_ipv6_node_is_known_with_or_without_brackets() {
        let map = Addresses::new([("[::1]:7000".to_owned(), "127.0.0.1:41000".parse().unwrap())]);
        let moved = rewrite(b"-MOVED 7 ::1:7000\r\n", false, &map).frame.unwrap();
        assert_eq!(moved, b"-MOVED 7 127.0.0.1:41000\r\n");
    }

    #[test]
    fn what_the_map_does_not_know_goes_out_unchanged() {
        assert_eq!(rewrite(b"-MOVED 3999 10.9.9.9:7001\r\n", false, &map()).frame, None);
        assert_eq!(rewrite(b"-ERR MOVED\r\n", false, &map()).frame, None);
        assert_eq!(rewrite(b"$3\r\nabc\r\n", false, &map()).frame, None);
        assert_eq!(
            rewrite(b"-MOVED 3999 10.0.0.6:7001\r\n", false, &Addresses::default()).frame,
            None
        );
        // Not a frame it understands: left to go out as it came.
        assert_eq!(rewrite(b"*9\r\n", true, &map()), Rewritten::default());
    }

    #[test]
    fn an_address_neither_a_nodes_nor_a_proxys_is_reported() {
        let moved = rewrite(b"-MOVED 3999 10.9.9.9:7001\r\n", false, &map());
        assert_eq!(moved.unknown, ["10.9.9.9:7001"]);
        // A hostname endpoint the cluster does not know (`?`): the client cannot follow it
        // through the proxies either.
        assert_eq!(rewrite(b"-ASK 1 ?:7001\r\n", false, &map()).unknown, ["?:7001"]);
        // A node announcing its proxy's port names a proxy: nothing to rewrite or report.
        let announced = rewrite(b"-MOVED 3999 127.0.0.1:41001\r\n", false, &map());
        assert_eq!(announced, Rewritten::default());
        // Failed, address-less or handshaking nodes in CLUSTER NODES are not reported.
        let text = "a1 10.0.0.5:7000@17000 myself,master - 0 0 1 connected 0-5460\n\
                    d4 10.0.0.8:7003@17003 master,fail - 0 1 4 disconnected\n\
                    e5 :0@0 master,noaddr - 0 1 5 disconnected\n\
                    f6 10.0.0.9:7005@17005 slave a1 0 1 6 connected\n";
        let nodes = rewrite(&Value::Bulk(text.as_bytes().to_vec()).to_bytes(), true, &map());
        assert!(nodes.frame.is_some());
        assert_eq!(nodes.unknown, ["10.0.0.9:7005"]);
        // Each address is reported once in a run, whichever proxy meets it.
        let shared = map();
        let other = shared.clone().answered_by("10.0.0.6:7001");
        assert_eq!(shared.sighting("10.9.9.9:7001").as_deref(), Some("10.9.9.9:7001"));
        assert_eq!(other.sighting("10.9.9.9:7001"), None);
        assert_eq!(other.sighting("?:7001").as_deref(), Some("?:7001"));
        // Up to a cap: then once more, saying so, and never again.
        for i in 2..SIGHTED_MAX {
            assert!(shared.sighting(&format!("10.1.0.{i}:7000")).is_some());
        }
        let last = shared.sighting("10.2.0.1:7000").unwrap();
        assert!(last.starts_with("10.2.0.1:7000 (and more"), "{last}");
        assert_eq!(shared.sighting("10.2.0.2:7000"), None);
        assert_eq!(other.sighting("10.2.0.3:7000"), None);
    }

    #[test]
    fn a_cluster_naming_its_nodes_by_hostname_is_rewritten_by_hostname_too() {
        let nodes = "a1 10.0.0.5:7000@17000,node-a myself,master - 0 0 1 connected 0-5460\n\
                     b2 10.0.0.6:7001@17001,node-b,shard-id=x master - 0 1 2 connected 5461-10922\n\
                     c3 10.0.0.6:7000@17002,,shard-id=y master - 0 1 3 connected 10923-16383\n";
        let map = map().with_hostnames(nodes);
        let moved = rewrite(b"-MOVED 3999 node-b:7001\r\n", false, &map);
        assert_eq!(moved.frame.unwrap(), b"-MOVED 3999 127.0.0.1:41001\r\n");
        assert!(moved.unknown.is_empty());
        // CLUSTER SLOTS names each node by its hostname first.
        let slots = Value::Array(vec![Value::Array(vec![
            Value::Integer(0),
            Value::Integer(5460),
            Value::Array(vec![Value::Bulk(b"node-a".to_vec()), Value::Integer(7000)]),
        ])]);
        let out = rewrite(&slots.to_bytes(), true, &map).frame.unwrap();
        let (value, _) = resp::parse(&out).unwrap().unwrap();
        assert_eq!(
            value,
            Value::Array(vec![Value::Array(vec![
                Value::Integer(0),
                Value::Integer(5460),
                Value::Array(vec![Value::Bulk(b"127.0.0.1".to_vec()), Value::Integer(41000)]),
            ])])
        );
        // An aux field is not a hostname; a hostname on another port is another node.
        assert_eq!(
            rewrite(b"-MOVED 1 shard-id=y:7000\r\n", false, &map).unknown,
            ["shard-id=y:7000"]
        );
        assert_eq!(
            rewrite(b"-MOVED 1 node-b:7000\r\n", false, &map).unknown,
            ["node-b:7000"]
        );
    }

    /// The first node of the first range of a rewritten `CLUSTER SLOTS` reply.
    fn first_slot_node(reply: &Value, map: &Addresses) -> Value {
        let out = rewrite(&reply.to_bytes(), true, map).frame.unwrap();
        let (value, _) = resp::parse(&out).unwrap().unwrap();
        let Value::Array(mut ranges) = value else { panic!() };
        let Value::Array(mut range) = ranges.remove(0) else {
            panic!()
        };
        range.remove(2)
    }

    fn slots_with(node: Vec<Value>) -> Value {
        Value::Array(vec![Value::Array(vec![
            Value::Integer(0),
            Value::Integer(5460),
            Value::Array(node),
        ])])
    }

    #[test]
    fn a_nil_endpoint_in_cluster_slots_is_the_answering_node_host_in_resp2_and_resp3() {
        for nil in [Value::Null, Value::NullBulk] {
            let node = first_slot_node(
                &slots_with(vec![nil, Value::Integer(7001)]),
                &map().answered_by("10.0.0.6:7000"),
            );
            assert_eq!(
                node,
                Value::Array(vec![Value::Bulk(b"127.0.0.1".to_vec()), Value::Integer(41001)])
            );
        }
    }

    #[test]
    fn a_slots_endpoint_the_map_does_not_know_is_found_by_its_metadata_ip() {
        // `?`: the cluster prefers hostnames and this node has none; its metadata has its ip.
        let metadata = |ip: &str| Value::Map(vec![(Value::Bulk(b"ip".to_vec()), Value::Bulk(ip.as_bytes().to_vec()))]);
        let node = first_slot_node(
            &slots_with(vec![
                Value::Bulk(b"?".to_vec()),
                Value::Integer(7001),
                Value::Bulk(b"b2".to_vec()),
                metadata("10.0.0.6"),
            ]),
            &map(),
        );
        assert_eq!(
            node,
            Value::Array(vec![
                Value::Bulk(b"127.0.0.1".to_vec()),
                Value::Integer(41001),
                Value::Bulk(b"b2".to_vec()),
                metadata("127.0.0.1"),
            ])
        );
        let unknown = slots_with(vec![
            Value::Bulk(b"?".to_vec()),
            Value::Integer(7001),
            Value::Bulk(b"z9".to_vec()),
            metadata("10.9.9.9"),
        ]);
        assert_eq!(rewrite(&unknown.to_bytes(), true, &map()).unknown, ["?:7001"]);
    }

    #[test]
    fn a_failed_node_in_cluster_shards_is_not_reported() {
        let node = |ip: &str, health: &str| {
            Value::Map(vec![
                (Value::Bulk(b"port".to_vec()), Value::Integer(7009)),
                (Value::Bulk(b"ip".to_vec()), Value::Bulk(ip.as_bytes().to_vec())),
                (Value::Bulk(b"health".to_vec()), Value::Bulk(health.as_bytes().to_vec())),
            ])
        };
        let shards = |n: Value| {
            Value::Array(vec![Value::Map(vec![(
                Value::Bulk(b"nodes".to_vec()),
                Value::Array(vec![n]),
            )])])
        };
        let failed = shards(node("10.9.9.9", "fail"));
        assert_eq!(rewrite(&failed.to_bytes(), true, &map()).unknown, Vec::<String>::new());
        let online = shards(node("10.9.9.9", "online"));
        assert_eq!(rewrite(&online.to_bytes(), true, &map()).unknown, ["10.9.9.9:7009"]);
    }

    #[test]
    fn cluster_slots_lists_each_range_on_the_proxies() {
        let reply = Value::Array(vec![Value::Array(vec![
            Value::Integer(0),
            Value::Integer(5460),
            Value::Array(vec![
                Value::Bulk(b"10.0.0.5".to_vec()),
                Value::Integer(7000),
                Value::Bulk(b"abc".to_vec()),
                Value::Map(vec![]),
            ]),
            Value::Array(vec![Value::Bulk(b"10.0.0.9".to_vec()), Value::Integer(7005)]),
        ])]);
        let out = rewrite(&reply.to_bytes(), true, &map()).frame.unwrap();
        let (value, _) = resp::parse(&out).unwrap().unwrap();
        let Value::Array(ranges) = value else { panic!() };
        let Value::Array(range) = &ranges[0] else { panic!() };
        assert_eq!(
            range[2],
            Value::Array(vec![
                Value::Bulk(b"127.0.0.1".to_vec()),
                Value::Integer(41000),
                Value::Bulk(b"abc".to_vec()),
                Value::Map(vec![]),
            ])
        );
        // A replica the map does not know is left as it is.
        assert_eq!(
            range[3],
            Value::Array(vec![Value::Bulk(b"10.0.0.9".to_vec()), Value::Integer(7005)])
        );
    }

    #[test]
    fn cluster_nodes_keeps_each_bus_port_and_names_the_proxy_for_a_hostname() {
        let text = "a1 10.0.0.5:7000@17000 myself,master - 0 0 1 connected 0-5460\n\
                    b2 10.0.0.6:7001@17001,node-b,shard-id=x master - 0 1 2 connected 5461-10922\n\
                    c3 10.0.0.7:7002@17002 master - 0 1 3 connected 10923-16383\n";
        let reply = Value::Bulk(text.as_bytes().to_vec()).to_bytes();
        let out = rewrite(&reply, true, &map()).frame.unwrap();
        let (Value::Bulk(out), _) = resp::parse(&out).unwrap().unwrap() else {
            panic!()
        };
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "a1 127.0.0.1:41000@17000 myself,master - 0 0 1 connected 0-5460\n\
             b2 127.0.0.1:41001@17001,127.0.0.1,shard-id=x master - 0 1 2 connected 5461-10922\n\
             c3 10.0.0.7:7002@17002 master - 0 1 3 connected 10923-16383\n"
        );
    }

    #[test]
    fn cluster_replicas_lines_name_the_proxies() {
        let reply = Value::Array(vec![Value::Bulk(
            b"r1 10.0.0.6:7001@17001 slave a1 0 1 4 connected".to_vec(),
        )]);
        let out = rewrite(&reply.to_bytes(), true, &map()).frame.unwrap();
        let (value, _) = resp::parse(&out).unwrap().unwrap();
        assert_eq!(
            value,
            Value::Array(vec![Value::Bulk(
                b"r1 127.0.0.1:41001@17001 slave a1 0 1 4 connected".to_vec()
            )])
        );
    }

    #[test]
    fn cluster_shards_in_resp2_and_resp3_name_the_proxies() {
        let node = |pairs: Vec<(&str, Value)>| -> Vec<(Value, Value)> {
            pairs
                .into_iter()
                .map(|(k, v)| (Value::Bulk(k.as_bytes().to_vec()), v))
                .collect()
        };
        let fields = node(vec![
            ("id", Value::Bulk(b"a1".to_vec())),
            ("port", Value::Integer(7000)),
            ("ip", Value::Bulk(b"10.0.0.5".to_vec())),
            ("endpoint", Value::Bulk(b"10.0.0.5".to_vec())),
            ("role", Value::Bulk(b"master".to_vec())),
        ]);
        let flat = |pairs: Vec<(Value, Value)>| Value::Array(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect());
        let resp3 = Value::Array(vec![Value::Map(vec![
            (Value::Bulk(b"slots".to_vec()), Value::Array(vec![])),
            (
                Value::Bulk(b"nodes".to_vec()),
                Value::Array(vec![Value::Map(fields.clone())]),
            ),
        ])]);
        let resp2 = Value::Array(vec![flat(vec![
            (Value::Bulk(b"slots".to_vec()), Value::Array(vec![])),
            (Value::Bulk(b"nodes".to_vec()), Value::Array(vec![flat(fields)])),
        ])]);
        for reply in [resp3, resp2] {
            let out = rewrite(&reply.to_bytes(), true, &map()).frame.unwrap();
            let (mut value, _) = resp::parse(&out).unwrap().unwrap();
            let Value::Array(shards) = &mut value else { panic!() };
            let Some(Value::Array(nodes)) = field(&mut shards[0], "nodes") else {
                panic!()
            };
            let node = &mut nodes[0];
            assert_eq!(field(node, "port").cloned(), Some(Value::Integer(41000)));
            assert_eq!(field(node, "ip").cloned(), Some(Value::Bulk(b"127.0.0.1".to_vec())));
            assert_eq!(
                field(node, "endpoint").cloned(),
                Some(Value::Bulk(b"127.0.0.1".to_vec()))
            );
            assert_eq!(field(node, "role").cloned(), Some(Value::Bulk(b"master".to_vec())));
        }
    }
}
