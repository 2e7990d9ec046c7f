//! [`Peer`]: one authenticated outgoing connection, shared by cheap clones.

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};

use super::conn::{Responder, Shared, read_loop, write_loop};
use super::{Limits, TransportError, handshake, millis};
use crate::auth::Secret;
use crate::wire::{Body, Kind, Message};

/// Connects to `addr` and authenticates as node `me` of `cluster`, all within
/// `limits.handshake_timeout`: the halves of the socket and the server's node id.
pub(super) async fn dial(
    addr: SocketAddr,
    me: u64,
    cluster: &str,
    secret: Secret,
    limits: Limits,
) -> Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf, u64), TransportError> {
    limits.validate()?;
    let io = |source| TransportError::Io { addr, source };
    let connecting = async {
        let stream = TcpStream::connect(addr).await.map_err(io)?;
        stream.set_nodelay(true).map_err(io)?;
        let (rd, mut wr) = stream.into_split();
        let mut rd = BufReader::new(rd);
        let remote = handshake::client(&mut rd, &mut wr, addr, me, cluster, secret).await?;
        Ok::<_, TransportError>((rd, wr, remote))
    };
    let (rd, wr, remote) =
        tokio::time::timeout(limits.handshake_timeout, connecting).await.map_err(|_| {
            TransportError::HandshakeTimeout { addr, after_ms: millis(limits.handshake_timeout) }
        })??;
    Ok((rd, wr, remote))
}

/// A connection to one node, after authentication. Clones share the connection; it closes
/// when the last clone is dropped, on [`Peer::close`], or when the peer or network ends it.
///
/// ```no_run
/// # async fn demo(secret: ordo_cluster::auth::Secret) -> Result<(), Box<dyn std::error::Error>> {
/// use ordo_cluster::transport::{Limits, Peer};
/// use ordo_cluster::wire::Body;
/// let peer = Peer::connect("127.0.0.1:7000".parse()?, 1, "prod", secret, Limits::default()).await?;
/// let pong = peer.call(Body::Ping { payload: 7 }).await?;
/// assert_eq!(pong, Body::Pong { payload: 7 });
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Peer {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    tx: mpsc::Sender<Vec<u8>>,
    next_id: AtomicU64,
    limits: Limits,
}

impl fmt::Debug for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Peer")
            .field("remote_id", &self.remote_id())
            .field("remote_addr", &self.remote_addr())
            .field("closed", &self.is_closed())
            .finish()
    }
}

impl Peer {
    /// Connects to `addr` and authenticates as node `me` of `cluster`, all within
    /// `limits.handshake_timeout`.
    ///
    /// # Errors
    /// [`TransportError::Io`] (cannot connect), [`TransportError::Refused`] (the server refused
    /// us: wrong secret or cluster), [`TransportError::Auth`] (the server's proof is wrong: it
    /// does not hold our secret), [`TransportError::HandshakeTimeout`], [`TransportError::Wire`]
    /// or [`TransportError::Unexpected`] (it does not speak the protocol),
    /// [`TransportError::BadLimits`].
    pub async fn connect(
        addr: SocketAddr,
        me: u64,
        cluster: &str,
        secret: Secret,
        limits: Limits,
    ) -> Result<Peer, TransportError> {
        let (rd, wr, remote) = dial(addr, me, cluster, secret, limits).await?;
        tracing::debug!(peer = remote, peer_addr = %addr, "connected");

        let shared = Shared::new(remote, addr, limits.in_flight_max);
        let (tx, rx) = mpsc::channel(limits.queue_depth);
        tokio::spawn(write_loop(wr, rx, Arc::clone(&shared)));
        let reader_shared = Arc::clone(&shared);
        let responder = Responder::Client { tx: tx.downgrade() };
        tokio::spawn(async move {
            if let Err(e) = read_loop(rd, &reader_shared, limits, responder).await {
                tracing::warn!(peer = remote, peer_addr = %addr, error = %e,
                    "closing the connection");
            }
            reader_shared.close(false);
        });
        Ok(Peer { inner: Arc::new(Inner { shared, tx, next_id: AtomicU64::new(1), limits }) })
    }

    /// The node at the other end (0 for a tool).
    pub fn remote_id(&self) -> u64 {
        self.inner.shared.peer()
    }

    /// Its address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.inner.shared.addr()
    }

    /// Whether the connection is closed (every call now fails at once).
    pub fn is_closed(&self) -> bool {
        self.inner.shared.is_closed()
    }

    /// Closes the connection for every clone; pending calls fail with
    /// [`TransportError::Closed`].
    pub fn close(&self) {
        self.inner.shared.close(true);
    }

    /// Calls waiting for an answer (at most `Limits::in_flight_max`).
    pub fn calls_in_flight(&self) -> usize {
        self.inner.shared.waiting()
    }

    /// Whether `self` and `other` are clones of one connection.
    pub fn same_connection(&self, other: &Peer) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Sends a request and waits for its answer, for at most `Limits::call_timeout`.
    ///
    /// # Errors
    /// As [`Peer::call_timeout`].
    pub async fn call(&self, body: Body) -> Result<Body, TransportError> {
        self.call_timeout(body, self.inner.limits.call_timeout).await
    }

    /// Sends a request and waits for its answer, for at most `after` — waiting for an
    /// in-flight permit and for room in the queue included.
    ///
    /// # Errors
    /// [`TransportError::Timeout`]; [`TransportError::PeerGone`] if the connection breaks
    /// first (or is already broken); [`TransportError::Closed`] after [`Peer::close`];
    /// [`TransportError::Wire`] if `body` cannot be encoded (too large, or a handshake
    /// message).
    ///
    /// # Cancel safety
    /// Dropping the future forgets the call: its map entry and permit are released, and a
    /// late answer is discarded.
    pub async fn call_timeout(&self, body: Body, after: Duration) -> Result<Body, TransportError> {
        let inner = &*self.inner;
        let shared = &*inner.shared;
        let calling = async {
            let _permit = shared.in_flight.acquire().await.map_err(|_| shared.gone())?;
            // Relaxed: ids need only be distinct.
            let id = inner.next_id.fetch_add(1, Ordering::Relaxed);
            let frame = Message::new(Kind::Request, id, body)
                .encode_frame(inner.limits.frame_bytes_max)
                .map_err(|source| TransportError::Wire { addr: shared.addr(), source })?;
            let (answer_tx, answer_rx) = oneshot::channel();
            let _entry = shared.register(id, answer_tx)?;
            inner.tx.send(frame).await.map_err(|_| shared.gone())?;
            answer_rx.await.map_err(|_| shared.gone())?
        };
        tokio::time::timeout(after, calling).await.map_err(|_| TransportError::Timeout {
            peer: shared.peer(),
            addr: shared.addr(),
            after_ms: millis(after),
        })?
    }

    /// Sends a one-way message. Waits for room in the queue: a peer that stops reading stops
    /// its senders (wrap the call in a timeout to bound the wait).
    ///
    /// # Errors
    /// [`TransportError::PeerGone`] / [`TransportError::Closed`] if the connection is closed,
    /// [`TransportError::Wire`] if `body` cannot be encoded.
    ///
    /// # Cancel safety
    /// Dropping the future before it completes sends nothing.
    pub async fn send(&self, body: Body) -> Result<(), TransportError> {
        let shared = &*self.inner.shared;
        if shared.is_closed() {
            return Err(shared.gone());
        }
        let frame = Message::new(Kind::OneWay, 0, body)
            .encode_frame(self.inner.limits.frame_bytes_max)
            .map_err(|source| TransportError::Wire { addr: shared.addr(), source })?;
        self.inner.tx.send(frame).await.map_err(|_| shared.gone())
    }
}
