//! Client commands: the array-of-bulks form and redis-server's inline form, and the keys a command
//! names.

use crate::error::{ParseError, escape_into};
use crate::scan::{need, read_int};
use crate::value::push_blob;
use crate::value::push_header;
use crate::{MAX_AGGREGATE_LEN, MAX_BULK_LEN, MAX_INLINE_LEN};

/// A client command: its arguments, the name first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Command {
    pub args: Vec<Vec<u8>>,
}

/// Longest argument shown whole by [`Command::display`].
const DISPLAY_ARG_MAX: usize = 64;
/// Length (in characters) past which [`Command::display`] cuts.
const DISPLAY_MAX: usize = 200;

impl Command {
    /// A command from its arguments: `Command::new(["SET", "k", "v"])`.
    pub fn new<I, A>(args: I) -> Self
    where
        I: IntoIterator<Item = A>,
        A: AsRef<[u8]>,
    {
        Command {
            args: args.into_iter().map(|a| a.as_ref().to_vec()).collect(),
        }
    }

    /// The command name in ASCII upper case (`"GET"`, `"EVALSHA"`; `""` when there are no
    /// arguments). Non-UTF-8 bytes become U+FFFD.
    pub fn name_upper(&self) -> String {
        match self.args.first() {
            Some(name) => String::from_utf8_lossy(name).to_ascii_uppercase(),
            None => String::new(),
        }
    }

    /// Whether the name is `name` (ASCII case-insensitive).
    pub fn is(&self, name: &str) -> bool {
        self.args
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(name.as_bytes()))
    }

    /// The keys the command names.
    ///
    /// * all arguments: `MGET DEL EXISTS UNLINK TOUCH WATCH PFCOUNT PFMERGE SINTER SUNION SDIFF
    ///   SINTERSTORE SUNIONSTORE SDIFFSTORE`;
    /// * every other argument from the first: `MSET MSETNX`;
    /// * `numkeys` then the keys: `EVAL EVALSHA EVAL_RO EVALSHA_RO FCALL FCALL_RO` (`EVALSHA sha 2
    ///   k1 k2 a` → `k1 k2`), `ZUNION ZINTER ZDIFF ZINTERCARD SINTERCARD LMPOP ZMPOP` (numkeys
    ///   first), `BLMPOP BZMPOP` (after the timeout), `ZUNIONSTORE ZINTERSTORE ZDIFFSTORE` (the
    ///   destination too). A `numkeys` that is not a number or exceeds the arguments gives no keys
    ///   (redis-server rejects the command);
    /// * all but the last (the timeout): `BLPOP BRPOP BZPOPMIN BZPOPMAX`;
    /// * the first two: `RENAME RENAMENX COPY SMOVE LMOVE BLMOVE RPOPLPUSH BRPOPLPUSH ZRANGESTORE`;
    /// * the argument after the subcommand: `OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key`,
    ///   `MEMORY USAGE key`;
    /// * after `STREAMS`, the first half of the rest: `XREAD XREADGROUP`;
    /// * none: `MULTI EXEC DISCARD UNWATCH PING ECHO SCRIPT FUNCTION TIME INFO CONFIG SCAN KEYS
    ///   RANDOMKEY SELECT SWAPDB AUTH HELLO CLIENT COMMAND READONLY READWRITE ASKING QUIT RESET
    ///   DBSIZE FLUSHALL FLUSHDB SAVE BGSAVE BGREWRITEAOF LASTSAVE SLOWLOG LATENCY WAIT WAITAOF
    ///   MONITOR DEBUG SHUTDOWN ROLE REPLICAOF SLAVEOF SYNC PSYNC REPLCONF FAILOVER CLUSTER ACL
    ///   MODULE LOLWUT PUBSUB PUBLISH SPUBLISH SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE
    ///   SSUBSCRIBE SUNSUBSCRIBE` (a channel is not a key), and `OBJECT`/`MEMORY` with other
    ///   subcommands;
    /// * every other command, known (`GET SET INCR EXPIRE … HSET ZADD LPUSH …`) or not: the first
    ///   argument, if any.
    pub fn keys(&self) -> Vec<&[u8]> {
        let args = &self.args;
        let Some(name) = args.first() else { return Vec::new() };
        let mut upper = [0u8; 16];
        if name.len() > upper.len() {
            return first_arg(args);
        }
        let upper = &mut upper[..name.len()];
        upper.copy_from_slice(name);
        upper.make_ascii_uppercase();
        let rest = || args[1..].iter().map(Vec::as_slice);
        match &*upper {
            b"MULTI" | b"EXEC" | b"DISCARD" | b"UNWATCH" | b"PING" | b"ECHO" | b"SCRIPT" | b"FUNCTION" | b"TIME"
            | b"INFO" | b"CONFIG" | b"SCAN" | b"KEYS" | b"RANDOMKEY" | b"SELECT" | b"SWAPDB" | b"AUTH" | b"HELLO"
            | b"CLIENT" | b"COMMAND" | b"READONLY" | b"READWRITE" | b"ASKING" | b"QUIT" | b"RESET" | b"DBSIZE"
            | b"FLUSHALL" | b"FLUSHDB" | b"SAVE" | b"BGSAVE" | b"BGREWRITEAOF" | b"LASTSAVE" | b"SLOWLOG"
            | b"LATENCY" | b"WAIT" | b"WAITAOF" | b"MONITOR" | b"DEBUG" | b"SHUTDOWN" | b"ROLE" | b"REPLICAOF"
            | b"SLAVEOF" | b"SYNC" | b"PSYNC" | b"REPLCONF" | b"FAILOVER" | b"CLUSTER" | b"ACL" | b"MODULE"
            | b"LOLWUT" | b"PUBSUB" | b"PUBLISH" | b"SPUBLISH" | b"SUBSCRIBE" | b"UNSUBSCRIBE" | b"PSUBSCRIBE"
            | b"PUNSUBSCRIBE" | b"SSUBSCRIBE" | b"SUNSUBSCRIBE" => Vec::new(),
            b"MGET" | b"DEL" | b"EXISTS" | b"UNLINK" | b"TOUCH" | b"WATCH" | b"PFCOUNT" | b"PFMERGE" | b"SINTER"
            | b"SUNION" | b"SDIFF" | b"SINTERSTORE" | b"SUNIONSTORE" | b"SDIFFSTORE" => rest().collect(),
            b"MSET" | b"MSETNX" => rest().step_by(2).collect(),
            b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" | b"BLMPOP" | b"BZMPOP" => {
                numkeys_at(args, 2)
            }
            b"ZUNION" | b"ZINTER" | b"ZDIFF" | b"ZINTERCARD" | b"SINTERCARD" | b"LMPOP" | b"ZMPOP" => {
                numkeys_at(args, 1)
            }
            b"ZUNIONSTORE" | b"ZINTERSTORE" | b"ZDIFFSTORE" => {
                let mut keys = first_arg(args);
                keys.extend(numkeys_at(args, 2));
                keys
            }
            b"BLPOP" | b"BRPOP" | b"BZPOPMIN" | b"BZPOPMAX" => args[1..args.len().saturating_sub(1).max(1)]
                .iter()
                .map(Vec::as_slice)
                .collect(),
            b"RENAME" | b"RENAMENX" | b"COPY" | b"SMOVE" | b"LMOVE" | b"BLMOVE" | b"RPOPLPUSH" | b"BRPOPLPUSH"
            | b"ZRANGESTORE" => rest().take(2).collect(),
            b"OBJECT" | b"MEMORY" => {
                let sub = args.get(1).map(|s| s.to_ascii_uppercase()).unwrap_or_default();
                let keyed: &[&[u8]] = if &*upper == b"OBJECT" {
                    &[b"ENCODING", b"FREQ", b"IDLETIME", b"REFCOUNT"]
                } else {
                    &[b"USAGE"]
                };
                if keyed.contains(&sub.as_slice()) {
                    args.get(2).map(Vec::as_slice).into_iter().collect()
                } else {
                    Vec::new()
                }
            }
            b"XREAD" | b"XREADGROUP" => match args.iter().position(|a| a.eq_ignore_ascii_case(b"STREAMS")) {
                Some(i) => {
                    let after = &args[i + 1..];
                    after[..after.len() / 2].iter().map(Vec::as_slice).collect()
                }
                None => Vec::new(),
            },
            _ => first_arg(args),
        }
    }

    /// A short printable form for logs: the arguments joined by spaces, printable ASCII as is,
    /// `\\` for a backslash, `\xNN` for other bytes, `""` for an empty argument; an argument longer
    /// than 64 bytes is cut with `…`, and the whole is cut to 200 characters with `…`.
    pub fn display(&self) -> String {
        let mut s = String::new();
        let mut cut = false;
        for (i, arg) in self.args.iter().enumerate() {
            if s.len() > DISPLAY_MAX {
                cut = true;
                break;
            }
            if i > 0 {
                s.push(' ');
            }
            if arg.is_empty() {
                s.push_str("\"\"");
            } else {
                escape_into(&mut s, arg, DISPLAY_ARG_MAX);
            }
        }
        if s.chars().count() > DISPLAY_MAX {
            let end = s.char_indices().nth(DISPLAY_MAX - 1).map_or(s.len(), |(i, _)| i);
            s.truncate(end);
            cut = true;
        }
        if cut {
            s.push('…');
        }
        s
    }

    /// Appends the command as an array of bulk strings.
    pub fn encode(&self, out: &mut Vec<u8>) {
        push_header(out, b'*', self.args.len());
        for arg in &self.args {
            push_blob(out, b'$', arg);
        }
    }

    /// The command as an array of bulk strings.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode(&mut out);
        out
    }
}

fn first_arg(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.get(1).map(Vec::as_slice).into_iter().collect()
}

/// `args[at]` is a key count, the keys follow it.
fn numkeys_at(args: &[Vec<u8>], at: usize) -> Vec<&[u8]> {
    let Some(n) = args.get(at) else { return Vec::new() };
    // Digits only (redis-server also rejects a sign); too many digits overflow and fail.
    if n.is_empty() || !n.iter().all(u8::is_ascii_digit) {
        return Vec::new();
    }
    let Some(n) = std::str::from_utf8(n).ok().and_then(|s| s.parse::<usize>().ok()) else {
        return Vec::new();
    };
    let keys = &args[at + 1..];
    if n > keys.len() {
        return Vec::new();
    }
    keys[..n].iter().map(Vec::as_slice).collect()
}

/// Walks the command array at the front of `buf` (which starts with `*`), handing each argument to
/// `arg`. Returns the length of the command.
fn walk_multibulk<'a>(buf: &'a [u8], mut arg: impl FnMut(&'a [u8])) -> Result<Option<usize>, ParseError> {
    let (count, mut p) = need!(read_int(buf, 1, "count"));
    if count <= 0 {
        // redis-server ignores `*0` and `*-1`.
        if count < -1 {
            return Err(ParseError::BadLength {
                kind: b'*',
                len: count,
                offset: 0,
            });
        }
        return Ok(Some(p));
    }
    if count > MAX_AGGREGATE_LEN as i64 {
        return Err(ParseError::TooManyElements { count, offset: 0 });
    }
    for _ in 0..count {
        let start = p;
        match buf.get(p) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&byte) => return Err(ParseError::BadCommandElement { byte, offset: p }),
        }
        let (len, data) = need!(read_int(buf, p + 1, "length"));
        if len < 0 {
            return Err(ParseError::BadCommandElement {
                byte: b'$',
                offset: start,
            });
        }
        if len > MAX_BULK_LEN as i64 {
            return Err(ParseError::BulkTooLong { len, offset: start });
        }
        let end = data + len as usize;
        match buf.get(end) {
            None => return Ok(None),
            Some(b'\r') => {}
            Some(_) => {
                return Err(ParseError::ExpectedCrlf {
                    after: "bulk data",
                    offset: end,
                });
            }
        }
        match buf.get(end + 1) {
            None => return Ok(None),
            Some(b'\n') => {}
            Some(_) => {
                return Err(ParseError::ExpectedCrlf {
                    after: "bulk data",
                    offset: end,
                });
            }
        }
        arg(&buf[data..end]);
        p = end + 2;
    }
    Ok(Some(p))
}

/// The inline line at the front of `buf`: (end of its content, length including the newline).
/// The content ends before `\n`, or before `\r\n`.
fn inline_line(buf: &[u8]) -> Result<Option<(usize, usize)>, ParseError> {
    let window = &buf[..buf.len().min(MAX_INLINE_LEN + 1)];
    match window.iter().position(|&b| b == b'\n') {
        Some(nl) => {
            let end = if nl > 0 && buf[nl - 1] == b'\r' { nl - 1 } else { nl };
            Ok(Some((end, nl + 1)))
        }
        None if buf.len() > MAX_INLINE_LEN => Err(ParseError::InlineTooLong { offset: 0 }),
        None => Ok(None),
    }
}

/// redis-server's `sdssplitargs`: arguments separated by blanks; `"…"` with the escapes `\n \r \t
/// \b \a \xNN` (and `\` before any other byte stands for that byte), `'…'` with `\'`; a closing
/// quote must be followed by a blank or the end. Like redis-server (which works on a C string), a
/// NUL byte ends the line.
fn split_inline(line: &[u8]) -> Result<Vec<Vec<u8>>, ParseError> {
    // Long: one byte-level state machine for inline commands (quotes, escapes).
    let line = match line.iter().position(|&b| b == 0) {
        Some(nul) => &line[..nul],
        None => line,
    };
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let hex = |b: u8| char::from(b).to_digit(16).map(|d| d as u8);
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while p < line.len() && is_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Ok(args);
        }
        let mut current = Vec::new();
        let (mut in_dq, mut in_sq) = (false, false);
        loop {
            let c = at(p);
            if in_dq {
                if c == b'\\' && at(p + 1) == b'x' && hex(at(p + 2)).is_some() && hex(at(p + 3)).is_some() {
                    current.push(hex(at(p + 2)).unwrap_or(0) * 16 + hex(at(p + 3)).unwrap_or(0));
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    current.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return Err(ParseError::UnbalancedQuotes { offset: p });
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(ParseError::UnbalancedQuotes { offset: p });
                } else {
                    current.push(c);
                }
            } else if in_sq {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return Err(ParseError::UnbalancedQuotes { offset: p });
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return Err(ParseError::UnbalancedQuotes { offset: p });
                } else {
                    current.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => break,
                    b'"' => in_dq = true,
                    b'\'' => in_sq = true,
                    _ => current.push(c),
                }
            }
            p += 1;
        }
        args.push(current);
    }
}

/// Parses one command from the front of a client's buffer: `Ok(Some((command, consumed_bytes)))`,
/// `Ok(None)` if incomplete, `Err` if malformed.
///
/// As in redis-server, a buffer starting with `*` is an array of bulk strings (each element must be
/// `$n` with `n >= 0`; `*0` and `*-1` are empty commands, which redis-server ignores), anything
/// else is an inline command line ending with `\n` or `\r\n`, split like redis-server's
/// `sdssplitargs` (double quotes with `\"`, `\\`, `\n`, `\xNN`… escapes, single quotes with `\'`).
/// A blank inline line is an empty command.
pub fn parse_command(buf: &[u8]) -> Result<Option<(Command, usize)>, ParseError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => {
            // Measure first: nothing is allocated for an incomplete or malformed command.
            let Some(len) = walk_multibulk(buf, |_| {})? else {
                return Ok(None);
            };
            let mut args = Vec::new();
            walk_multibulk(&buf[..len], |a| args.push(a.to_vec()))?;
            Ok(Some((Command { args }, len)))
        }
        Some(_) => {
            let (end, len) = need!(inline_line(buf));
            let args = split_inline(&buf[..end])?;
            Ok(Some((Command { args }, len)))
        }
    }
}

/// Like [`parse_command`] but only measures: the length of the complete command at the front of
/// `buf`. Allocation-free for the array form; accepts and rejects exactly what `parse_command`
/// does.
pub fn command_len(buf: &[u8]) -> Result<Option<usize>, ParseError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*') => walk_multibulk(buf, |_| {}),
        Some(_) => {
            let (end, len) = need!(inline_line(buf));
            split_inline(&buf[..end])?;
            Ok(Some(len))
        }
    }
}
