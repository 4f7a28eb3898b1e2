//! The proxy's hook for a run: the nemesis's rules, at command boundaries, for requests
//! found through [`InFlight`]; every round trip goes into the history as a wire record,
//! up to the wire log's cap ([`WireLog`]).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::wirelog::{KEYS_PER_LINE_MAX, Keep, WireLog, shown};
use super::{Action, Command, InFlight, ProxyHook};
use crate::backend::key_slot;
use crate::clock::RunClock;
use crate::history::{Event, ProblemSource, Recorder};
use crate::nemesis::{GapHook, Nemesis};
use crate::request::TripSummary;
use crate::scenario::{CommandFaultAction, redirection};

pub struct NemesisHook {
    pub nemesis: Arc<Nemesis>,
    pub inflight: Arc<InFlight>,
    pub recorder: Recorder,
    pub clock: RunClock,
    /// Shared by the proxies of a cluster's nodes: one log, one cap.
    pub wire: Arc<WireLog>,
    /// The cluster node this hook's proxy fronts (none on one server).
    pub node: Option<u32>,
    /// The address the proxy listens on, once it does: where an injected `MOVED` or `ASK`
    /// sends the client (the node it asked, which owns the slot).
    pub listening: std::sync::OnceLock<std::net::SocketAddr>,
}

/// A fault on a command queued inside MULTI … EXEC acts as a real server would on the
/// transaction: an error at queue time aborts it (the server answers `+OK`, the error,
/// `+QUEUED`…, then `-EXECABORT`, and runs none of it: nothing is forwarded); a lost or
/// late reply is the EXEC's, whose reply carries the outcome.
fn fit_transactions(trip: &[Command], actions: &mut [Action]) {
    let Some(struck) = actions.iter().position(|a| *a != Action::Forward) else {
        return;
    };
    let Some(multi) = trip[..struck].iter().rposition(|c| c.is("MULTI")) else {
        return;
    };
    let Some(exec) = trip[struck..].iter().position(|c| c.is("EXEC")).map(|e| struck + e) else {
        return;
    };
    if trip[multi..struck].iter().any(|c| c.is("EXEC")) {
        return;
    }
    match actions[struck].clone() {
        Action::Inject(error) => {
            for (i, action) in actions.iter_mut().enumerate().take(exec + 1).skip(multi) {
                *action = Action::Inject(if i == multi {
                    b"+OK\r\n".to_vec()
                } else if i == struck {
                    error.clone()
                } else if i == exec {
                    resp::error_reply("EXECABORT Transaction discarded because of previous errors.")
                } else {
                    b"+QUEUED\r\n".to_vec()
                });
            }
        }
        moved @ (Action::DropReply | Action::DelayReply(_)) => {
            actions[struck] = Action::Forward;
            actions[exec] = moved;
        }
        Action::Forward | Action::Reset => {}
    }
}

/// Which identity each command of a read belongs to: the identity of the first limiter key
/// it names; a keyless command inside MULTI … EXEC belongs to the transaction's identity.
fn owners(trip: &[Command], inflight: &InFlight) -> Vec<Option<u32>> {
    let mut owners: Vec<Option<u32>> = trip
        .iter()
        .map(|c| c.keys().into_iter().find_map(|k| inflight.identity_of(k)))
        .collect();
    let mut i = 0;
    while i < trip.len() {
        if trip[i].is("MULTI")
            && let Some(len) = trip[i..].iter().position(|c| c.is("EXEC") || c.is("DISCARD"))
        {
            let block = i..=i + len;
            if let Some(owner) = owners[block.clone()].iter().flatten().next().copied() {
                for o in &mut owners[block] {
                    o.get_or_insert(owner);
                }
            }
            i += len + 1;
        } else {
            i += 1;
        }
    }
    owners
}

impl NemesisHook {
    /// An injected error's text, a redirection's slot (the command's first key's) and node
    /// (this proxy's address) filled in.
    fn filled_in(&self, error: &str, command: &TripSummary) -> String {
        let slot = command.keys.first().map_or(0, |key| key_slot(key.as_bytes()));
        let node = self.listening.get().map(ToString::to_string).unwrap_or_default();
        redirection(error, slot, &node)
    }

    /// The wire line of the commands at `positions`, if the wire log keeps it; the log's cut
    /// is recorded once, as a noted problem.
    fn record_wire(&self, conn: u64, request: Option<u64>, positions: &[usize], trip: &[Command], part: &TripSummary) {
        let foreign: Vec<String> = part
            .keys
            .iter()
            .filter(|k| self.inflight.identity_of(k.as_bytes()).is_none())
            .cloned()
            .collect();
        if foreign.is_empty() && self.wire.is_cut() {
            return;
        }
        let commands = shown(positions.iter().map(|&i| &trip[i]));
        let keys: Vec<String> = part.keys.iter().take(KEYS_PER_LINE_MAX).cloned().collect();
        let t_us = self.clock.now_us();
        let keep = self.wire.keep(&commands, &keys, &foreign);
        if matches!(keep, Keep::Cut | Keep::LineAndCut) {
            self.recorder.record(Event::Problem {
                t_us,
                source: ProblemSource::FaultProxy,
                detail: format!(
                    "the wire log reached its cap of {} MiB of commands at {:.3} s: later round trips are not recorded as `wire` lines (but the first naming each key outside the layout); no verdict rests on them",
                    self.wire.limit() >> 20,
                    t_us as f64 / 1e6
                ),
                fatal: false,
                noted: true,
            });
        }
        if matches!(keep, Keep::Line | Keep::LineAndCut) {
            self.recorder.record(Event::Wire {
                t_us,
                node: self.node,
                conn,
                request,
                commands,
                keys,
            });
        }
    }
}

#[async_trait]
impl ProxyHook for NemesisHook {
    async fn before_forward(&self, conn: u64, trip: &[Command]) -> Vec<Action> {
        let mut actions = vec![Action::Forward; trip.len()];
        let owners = owners(trip, &self.inflight);
        // One round trip per identity in the read (a connection shared by requests of
        // several identities carries them together), in order of first appearance.
        let mut identities: Vec<Option<u32>> = Vec::new();
        for owner in &owners {
            if !identities.contains(owner) {
                identities.push(*owner);
            }
        }
        for identity in identities {
            let positions: Vec<usize> = (0..trip.len()).filter(|&i| owners[i] == identity).collect();
            let part = TripSummary::of_commands(positions.iter().map(|&i| &trip[i]));
            let found = identity.and_then(|id| self.inflight.trip(id, &part));
            self.record_wire(conn, found.as_ref().map(|f| f.ctx.id), &positions, trip, &part);
            let Some(found) = found else { continue };
            let (ctx, number) = (&found.ctx, found.number);
            if number > 1 {
                let outcome = self.nemesis.before_trip(ctx, number, &found.keys, &part).await;
                if let Some(hold) = outcome.hold {
                    self.inflight.hold(ctx, hold);
                }
                if outcome.client_dies.is_some() {
                    // The client dies: nothing of this read reaches the server.
                    return vec![Action::Reset; trip.len()];
                }
            }
            for &i in &positions {
                let one = TripSummary::of_commands([&trip[i]]);
                if let Some(fault) = self.nemesis.on_command(ctx, number, &one) {
                    actions[i] = match fault {
                        CommandFaultAction::DelayReply { delay_ms } => {
                            Action::DelayReply(Duration::from_millis(delay_ms))
                        }
                        CommandFaultAction::DropReply => Action::DropReply,
                        CommandFaultAction::InjectError { error } => {
                            Action::Inject(resp::error_reply(&self.filled_in(&error, &one)))
                        }
                        CommandFaultAction::ResetConnection => Action::Reset,
                    };
                    break;
                }
            }
        }
        fit_transactions(trip, &mut actions);
        actions
    }

    fn connection_problem(&self, conn: u64, detail: String) {
        self.recorder.record(Event::Problem {
            t_us: self.clock.now_us(),
            source: ProblemSource::FaultProxy,
            detail: match (self.node, conn) {
                (None, 0) => detail,
                (None, conn) => format!("connection {conn}: {detail}"),
                (Some(node), 0) => format!("node {node}'s proxy: {detail}"),
                (Some(node), conn) => format!("node {node}, connection {conn}: {detail}"),
            },
            fatal: false,
            noted: false,
        });
    }

    fn unknown_node(&self, conn: u64, address: &str) {
        let whose = self
            .node
            .map_or_else(String::new, |node| format!("node {node}'s proxy: "));
        let what = if address.starts_with("?:") {
            "a node the cluster would name by a hostname it does not have (`cluster-preferred-endpoint-type hostname`): a client cannot follow it, through the proxies or around them"
        } else {
            "an address no fault proxy of the run stands in front of (a node added after the run started, or one the cluster names by an endpoint the harness did not learn): a client that follows it leaves the proxies, and its commands there are neither faulted nor recorded"
        };
        self.recorder.record(Event::Problem {
            t_us: self.clock.now_us(),
            source: ProblemSource::FaultProxy,
            detail: format!("{whose}a reply on connection {conn} named {address}, {what}"),
            fatal: false,
            noted: true,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trip(commands: &[&str]) -> Vec<Command> {
        commands.iter().map(|c| Command::new(c.split(' '))).collect()
    }

    #[test]
    fn an_error_inside_a_transaction_aborts_it_like_the_server() {
        let t = trip(&["MULTI", "INCR rl:0", "PEXPIRE rl:0 510 NX", "EXEC"]);
        let oom = resp::error_reply("OOM no");
        let mut actions = vec![
            Action::Forward,
            Action::Inject(oom.clone()),
            Action::Forward,
            Action::Forward,
        ];
        fit_transactions(&t, &mut actions);
        assert_eq!(
            actions,
            vec![
                Action::Inject(b"+OK\r\n".to_vec()),
                Action::Inject(oom),
                Action::Inject(b"+QUEUED\r\n".to_vec()),
                Action::Inject(resp::error_reply(
                    "EXECABORT Transaction discarded because of previous errors."
                )),
            ]
        );
    }

    #[test]
    fn commands_belong_to_the_identity_of_their_key() {
        let inflight = InFlight::new();
        inflight.set_layout(crate::keys::KeyLayout::default_for("rl:", 4));
        let t = trip(&[
            "GET rl:0",
            "MULTI",
            "INCR rl:1",
            "PEXPIRE rl:1 5",
            "EXEC",
            "PING",
            "INCR rl:0",
        ]);
        assert_eq!(
            owners(&t, &inflight),
            vec![Some(0), Some(1), Some(1), Some(1), Some(1), None, Some(0)]
        );
    }

    #[test]
    fn a_lost_reply_inside_a_transaction_is_the_execs() {
        let t = trip(&["MULTI", "INCR rl:0", "EXEC"]);
        let mut actions = vec![Action::Forward, Action::DropReply, Action::Forward];
        fit_transactions(&t, &mut actions);
        assert_eq!(actions, vec![Action::Forward, Action::Forward, Action::DropReply]);
        let plain = trip(&["INCR rl:0", "PEXPIRE rl:0 5"]);
        let mut actions = vec![Action::DropReply, Action::Forward];
        fit_transactions(&plain, &mut actions);
        assert_eq!(
            actions,
            vec![Action::DropReply, Action::Forward],
            "no transaction: unchanged"
        );
    }
}
