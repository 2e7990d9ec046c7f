//! The transport: authenticated TCP connections carrying [`crate::wire`] frames.
//!
//! A [`Server`] accepts connections and serves requests with a [`Handler`]; a [`Peer`] is one
//! outgoing connection on which the caller issues calls ([`Peer::call`]) and one-way sends
//! ([`Peer::send`]); a [`PeerPool`] keeps one `Peer` per node id, connecting on first use and
//! reconnecting with bounded exponential back-off. Every socket has `TCP_NODELAY` set.
//! Beside each `Peer` the pool can keep a [`PolledPeer`]: a second connection, for one caller
//! at a time, that the caller drives itself — it writes, then polls for the answer — with no
//! hand-off to the runtime (the transaction path's latency; see [`polled`]).
//!
//! # A connection's life
//! 1. **Handshake** ([`crate::auth`]), under `Limits::handshake_timeout` (connect included).
//!    Until it completes, frames are held to [`HANDSHAKE_FRAME_BYTES_MAX`] and must be the
//!    handshake message expected next; anything else — a malformed, truncated or oversized
//!    frame, an application message, a wrong proof or cluster — gets a best-effort
//!    `Refused { reason }`, a `tracing::warn!` naming the peer's address and the reason, and
//!    the connection is closed.
//! 2. **Running**: the socket is split between two tasks.
//!    * The **writer task** drains a bounded queue of encoded frames (`Limits::queue_depth`
//!      frames) into the socket, coalescing what is queued into one write. A sender waits for
//!      room: a peer that stops reading stops its senders instead of growing a buffer.
//!    * The **reader task** reads frames (at most `Limits::frame_bytes_max`; the prefix is
//!      checked before a byte of the body is buffered, and the body buffer grows only as bytes
//!      arrive), routes each `Response` to the waiting call by request id, and on a server
//!      serves each `Request` by calling the [`Handler`] right there — the network task runs
//!      no application code — and queues the answer (waiting for room, so a client that does
//!      not read its answers stops being read).
//! 3. **Close**: on EOF, an I/O error, any malformed frame (a typed [`TransportError`],
//!    logged), [`Peer::close`], the last `Peer` handle dropped, or the server shutting down.
//!    Every pending call then fails with [`TransportError::PeerGone`] (or `Closed`, if we
//!    closed it), and later ones fail at once. A server keeps serving its other connections.
//!
//! # Bounds
//! * outgoing frames per connection: `queue_depth`; bytes per frame: `frame_bytes_max`;
//! * outstanding calls per connection: `in_flight_max` (a semaphore); the map from request id
//!   to waiting caller holds at most that many entries — a call removes its entry however it
//!   ends (answer, timeout, cancellation);
//! * connections per server: `connections_max` (more are closed on accept);
//! * a call waits at most its timeout, for a permit, for queue room and for the answer alike.

mod conn;
mod frame_io;
mod handshake;
mod peer;
pub mod polled;
mod pool;
mod server;

use std::net::SocketAddr;
use std::time::Duration;

pub use peer::Peer;
pub use polled::{Claim, PolledPeer};
pub use pool::{BACKOFF_MAX_DEFAULT, BACKOFF_MIN_DEFAULT, PeerPool};
pub use server::{Server, ServerStats};

use crate::auth::AuthError;
pub use crate::wire::HANDSHAKE_FRAME_BYTES_MAX;
use crate::wire::{Body, FRAME_BYTES_MAX_DEFAULT, WireError};

/// Bounds of a connection (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest frame body accepted or sent, in bytes (at least
    /// [`HANDSHAKE_FRAME_BYTES_MAX`]). Default 16 MiB.
    pub frame_bytes_max: u32,
    /// Encoded frames queued per connection before senders wait (at least 1). Default 256.
    pub queue_depth: usize,
    /// Calls outstanding per connection before callers wait (at least 1). Default 1024.
    pub in_flight_max: usize,
    /// How long [`Peer::call`] waits. Default 5 s.
    pub call_timeout: Duration,
    /// How long connecting and authenticating may take, on either side. Default 5 s.
    pub handshake_timeout: Duration,
    /// Connections a server holds at once, authenticated or not (at least 1); more are closed
    /// on accept. Default 1024.
    pub connections_max: usize,
    /// How long a thread waiting on a [`PolledPeer`] polls before it sleeps (at most
    /// [`POLL_SPIN_MAX`]; zero sleeps at once). Default 50 µs: longer than a loopback round
    /// trip when both ends are awake, far shorter than waking an idle vCPU.
    pub poll_spin: Duration,
}

/// The longest [`Limits::poll_spin`].
pub const POLL_SPIN_MAX: Duration = Duration::from_millis(10);

impl Default for Limits {
    fn default() -> Self {
        Self {
            frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
            queue_depth: 256,
            in_flight_max: 1024,
            call_timeout: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(5),
            connections_max: 1024,
            poll_spin: Duration::from_micros(50),
        }
    }
}

impl Limits {
    /// Checks the limits can be honoured.
    ///
    /// # Errors
    /// [`TransportError::BadLimits`] naming the first bad field.
    pub fn validate(&self) -> Result<(), TransportError> {
        let bad = |what| Err(TransportError::BadLimits { what });
        if self.frame_bytes_max < HANDSHAKE_FRAME_BYTES_MAX {
            return bad("frame_bytes_max is below HANDSHAKE_FRAME_BYTES_MAX");
        }
        if self.queue_depth == 0 {
            return bad("queue_depth is 0");
        }
        if self.in_flight_max == 0 || self.in_flight_max > tokio::sync::Semaphore::MAX_PERMITS {
            return bad("in_flight_max is 0 or above Semaphore::MAX_PERMITS");
        }
        if self.connections_max == 0 {
            return bad("connections_max is 0");
        }
        if self.poll_spin > POLL_SPIN_MAX {
            return bad("poll_spin is above POLL_SPIN_MAX");
        }
        if self.call_timeout.is_zero() || self.handshake_timeout.is_zero() {
            return bad("a timeout is zero");
        }
        Ok(())
    }
}

/// Serves the requests of authenticated peers.
pub trait Handler: Send + Sync + 'static {
    /// Answers a request from node `from`. Runs on the connection's network task: it must not
    /// block or run application code (hand long work to another thread and answer later with
    /// a one-way message).
    fn request(&self, from: u64, body: Body) -> Body;

    /// Receives a one-way message from node `from`; the default drops it. Same rules as
    /// [`Handler::request`].
    fn one_way(&self, _from: u64, _body: Body) {}
}

/// A transport failure; each names the peer (address, and node id once known).
#[derive(thiserror::Error, Debug)]
pub enum TransportError {
    /// A socket operation failed.
    #[error("{addr}: {source}")]
    Io {
        /// The remote (or, for bind, local) address.
        addr: SocketAddr,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A frame could not be encoded, or one received could not be decoded.
    #[error("{addr}: bad frame: {source}")]
    Wire {
        /// The remote address.
        addr: SocketAddr,
        /// What was wrong.
        #[source]
        source: WireError,
    },
    /// The remote end refused our handshake.
    #[error("{addr}: refused by the remote end: {reason}")]
    Refused {
        /// The remote address.
        addr: SocketAddr,
        /// Its reason.
        reason: String,
    },
    /// We refused the remote end's handshake (or it sent us nonsense during it).
    #[error("{addr}: authentication failed: {source}")]
    Auth {
        /// The remote address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: AuthError,
    },
    /// A frame of the wrong kind for the connection's state.
    #[error("{addr}: expected {expected}, got {found}")]
    Unexpected {
        /// The remote address.
        addr: SocketAddr,
        /// What was expected.
        expected: &'static str,
        /// What came.
        found: String,
    },
    /// Connecting and authenticating took longer than `Limits::handshake_timeout`.
    #[error("{addr}: handshake not finished after {after_ms} ms")]
    HandshakeTimeout {
        /// The remote address.
        addr: SocketAddr,
        /// The timeout.
        after_ms: u64,
    },
    /// A call got no answer in time.
    #[error("node {peer} at {addr}: no answer after {after_ms} ms")]
    Timeout {
        /// The remote node.
        peer: u64,
        /// Its address.
        addr: SocketAddr,
        /// The timeout.
        after_ms: u64,
    },
    /// The connection broke (EOF, I/O error, malformed frame, remote shutdown).
    #[error("node {peer} at {addr}: connection lost")]
    PeerGone {
        /// The remote node.
        peer: u64,
        /// Its address.
        addr: SocketAddr,
    },
    /// The connection was closed on our side ([`Peer::close`]).
    #[error("node {peer} at {addr}: connection closed locally")]
    Closed {
        /// The remote node.
        peer: u64,
        /// Its address.
        addr: SocketAddr,
    },
    /// The address answered as another node.
    #[error("{addr}: expected node {expected}, found node {found}")]
    WrongPeer {
        /// The address dialled.
        addr: SocketAddr,
        /// The node id the pool expected there.
        expected: u64,
        /// The node id that answered.
        found: u64,
    },
    /// [`PeerPool`] knows no address for the node.
    #[error("node {peer}: no address known")]
    UnknownPeer {
        /// The node.
        peer: u64,
    },
    /// [`PeerPool`] is waiting before reconnecting to the node.
    #[error("node {peer}: {failures} failed connection attempts, next in {retry_in_ms} ms")]
    Backoff {
        /// The node.
        peer: u64,
        /// Consecutive failed attempts.
        failures: u32,
        /// Time until the next attempt is allowed.
        retry_in_ms: u64,
    },
    /// [`Limits`] that cannot be honoured.
    #[error("bad limits: {what}")]
    BadLimits {
        /// What is wrong.
        what: &'static str,
    },
    /// A server cannot have node id 0, which is reserved for tools.
    #[error("node id 0 is reserved for tools and cannot serve")]
    ReservedNodeId,
}

/// Milliseconds in `d`, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
