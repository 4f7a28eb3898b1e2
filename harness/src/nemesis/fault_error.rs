//! Why a server fault could not strike.

use crate::backend::BackendError;
use crate::error::SetupError;

/// Why a server fault could not strike (recorded as a fatal problem of the run).
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// The server, or a command to it, failed.
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The harness could not connect to the server, or configure it again.
    #[error(transparent)]
    Setup(#[from] Box<SetupError>),
    /// A failover on a server started without a replica.
    #[error("the server has no replica to fail over to (a scenario with a failover fault starts one)")]
    NoReplica,
    /// The replica had not caught up with the write-paused primary in time.
    #[error("the replica had not caught up within {timeout_s} s")]
    NotCaughtUp { timeout_s: u64 },
    /// A cluster replica told to take over that is not a primary even in its own view.
    #[error("node {node} was told to take over but still lists itself as `{flags}` after {timeout_s} s")]
    NotPromoted { node: usize, flags: String, timeout_s: u64 },
    /// A demoted cluster primary not yet replicating its successor.
    #[error("the demoted primary had not synced from the new one within {timeout_s} s")]
    NotResynced { timeout_s: u64 },
    /// A reshard of an identity whose key the layout does not name in full.
    #[error(
        "identity {identity}'s keys are named with a wildcard part in the layout: which slot the fault acts on is unknown (describe them with `keys` templates without `*`)"
    )]
    NoKeyToMove { identity: u32 },
    /// A reshard or node failover on a server that is not a cluster.
    #[error("a reshard, node-failover or node-pause needs a cluster (topology = \"cluster\")")]
    NotACluster,
    /// A node failover that would lose writes, with no fault proxy to hold replication.
    #[error("no fault proxy fronts the primary: its replication cannot be held back")]
    NoProxyToHold,
}

impl From<SetupError> for FaultError {
    fn from(error: SetupError) -> Self {
        Self::Setup(Box::new(error))
    }
}
