//! A request and its round trips as the roles that watch them share them: the limiter's
//! `Wire`, the fault proxy and the nemesis all speak of a [`RequestCtx`] and the
//! [`TripSummary`] of each round trip (a module of its own, so that none of them depends on
//! another for it).

use redis::{Arg, Cmd, Pipeline};

use crate::keys::KeyLayout;

/// The request a limiter is deciding, as the nemesis sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestCtx {
    pub id: u64,
    pub identity: u32,
    /// The identity's n-th request, counting from 1.
    pub ordinal: u64,
    pub key: String,
    /// The limiter instance deciding it.
    pub instance: u32,
    /// The time the instance's clock says, in ms since the Unix epoch: what a limiter that
    /// uses client time must use (a `clock-skew` fault moves it).
    pub now_ms: u64,
}

/// The commands of one round trip: names (upper case) and the keys they name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TripSummary {
    pub commands: Vec<String>,
    pub keys: Vec<String>,
}

impl TripSummary {
    pub fn of_cmd(cmd: &Cmd) -> Self {
        let mut summary = Self::default();
        summary.add(cmd);
        summary
    }

    pub fn of_pipe(pipe: &Pipeline) -> Self {
        let mut summary = Self::default();
        if pipe.is_transaction() {
            summary.commands.push("MULTI".into());
        }
        for cmd in pipe.cmd_iter() {
            summary.add(cmd);
        }
        if pipe.is_transaction() {
            summary.commands.push("EXEC".into());
        }
        summary
    }

    /// The summary of commands as the fault proxy parsed them off the wire.
    pub fn of_commands<'c>(commands: impl IntoIterator<Item = &'c resp::Command>) -> Self {
        let mut summary = Self::default();
        for command in commands {
            summary.push(command);
        }
        summary
    }

    fn add(&mut self, cmd: &Cmd) {
        let args = cmd.args_iter().filter_map(|a| match a {
            Arg::Simple(bytes) => Some(bytes),
            _ => None,
        });
        self.push(&resp::Command::new(args));
    }

    /// One command: its name, and the keys it names (by the RESP crate's table, the same
    /// for the `Wire` and the fault proxy).
    fn push(&mut self, command: &resp::Command) {
        if command.args.is_empty() {
            return;
        }
        for key in command.keys() {
            let key = String::from_utf8_lossy(key).into_owned();
            if !self.keys.contains(&key) {
                self.keys.push(key);
            }
        }
        self.commands.push(command.name_upper());
    }

    /// The round trip as one history string, e.g. "MULTI INCR PEXPIRE EXEC".
    pub fn label(&self) -> String {
        self.commands.join(" ")
    }
}

/// How many distinct keys a request's record keeps (a command naming thousands of keys
/// would otherwise grow the history without bound).
pub const KEYS_PER_REQUEST_MAX: usize = 64;

/// Add `keys` to a request's record of the keys it named: each once, at most
/// [`KEYS_PER_REQUEST_MAX`].
pub fn remember_keys(record: &mut Vec<String>, keys: impl IntoIterator<Item = String>) {
    for key in keys {
        if record.len() >= KEYS_PER_REQUEST_MAX {
            return;
        }
        if !record.contains(&key) {
            record.push(key);
        }
    }
}

/// The limiter keys a request works on at a gap, as the nemesis sees them: the keys of
/// `identity` (by `layout`) that the request named in its earlier round trips, else those
/// its next round trip names.
pub fn keys_at_gap(layout: &KeyLayout, identity: u32, named: &[String], next: &TripSummary) -> Vec<String> {
    let of_identity =
        |keys: &[String]| -> Vec<String> { keys.iter().filter(|k| layout.is_key_of(k, identity)).cloned().collect() };
    let before = of_identity(named);
    if before.is_empty() {
        of_identity(&next.keys)
    } else {
        before
    }
}
