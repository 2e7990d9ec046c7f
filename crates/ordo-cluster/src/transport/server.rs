//! [`Server`]: accepts connections, authenticates them, and serves requests with a
//! [`Handler`] on each connection's task.
//!
//! Each accepted connection runs in its own task: the handshake (bounded by
//! `Limits::handshake_timeout`), then the reader loop, with a writer task beside it. A
//! connection that fails — refused, timed out, malformed — is logged with its address and
//! reason, counted in [`ServerStats`], and closed; nothing it does reaches the accept loop or
//! any other connection. The counters are updated before the socket is closed, so a client
//! that has seen the close sees them.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::BufReader;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};

use super::conn::{Responder, Shared, read_loop, write_loop};
use super::{Handler, Limits, TransportError, handshake, millis};
use crate::auth::{Secret, ServerHandshake, TOOL_NODE_ID};

/// After a failed `accept` (e.g. out of file descriptors), the accept loop pauses this long.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(20);

/// A listening server. Dropping it (or [`Server::shutdown`]) stops accepting and closes every
/// connection it holds.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    me: u64,
    stop: watch::Sender<bool>,
    counters: Arc<Counters>,
}

/// Counters of a server's connections.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connections closed on accept because `Limits::connections_max` were open.
    pub connections_rejected: u64,
    /// Connections open now (authenticated or not).
    pub connections_open: u64,
    /// Handshakes that succeeded.
    pub handshakes_ok: u64,
    /// Handshakes refused or failed (wrong secret or cluster, malformed frame, timeout).
    pub handshakes_failed: u64,
    /// Authenticated connections closed for an error (malformed frame, I/O error).
    pub connections_failed: u64,
}

#[derive(Debug, Default)]
struct Counters {
    accepted: AtomicU64,
    rejected: AtomicU64,
    open: AtomicU64,
    handshakes_ok: AtomicU64,
    handshakes_failed: AtomicU64,
    failed: AtomicU64,
}

/// What every connection task needs.
struct Context {
    handshake: ServerHandshake,
    limits: Limits,
    handler: Arc<dyn Handler>,
    counters: Arc<Counters>,
}

impl Server {
    /// Listens on `addr` as node `me` of `cluster` (port 0 picks a free port; see
    /// [`Server::local_addr`]).
    ///
    /// # Errors
    /// [`TransportError::Io`] if the address cannot be bound, [`TransportError::BadLimits`],
    /// [`TransportError::ReservedNodeId`] for node id 0.
    pub async fn bind(
        addr: SocketAddr,
        me: u64,
        cluster: &str,
        secret: Secret,
        limits: Limits,
        handler: Arc<dyn Handler>,
    ) -> Result<Server, TransportError> {
        limits.validate()?;
        if me == TOOL_NODE_ID {
            return Err(TransportError::ReservedNodeId);
        }
        let io = |source| TransportError::Io { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(io)?;
        let local_addr = listener.local_addr().map_err(io)?;
        let counters = Arc::new(Counters::default());
        let context = Arc::new(Context {
            handshake: ServerHandshake::new(me, cluster, secret),
            limits,
            handler,
            counters: Arc::clone(&counters),
        });
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(accept_loop(listener, context, stopped));
        tracing::debug!(node = me, %local_addr, "listening");
        Ok(Server { local_addr, me, stop, counters })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Its node id.
    pub fn node_id(&self) -> u64 {
        self.me
    }

    /// Its connection counters.
    pub fn stats(&self) -> ServerStats {
        let c = &*self.counters;
        // Relaxed: independent counters, read for reporting.
        ServerStats {
            connections_accepted: c.accepted.load(Ordering::Relaxed),
            connections_rejected: c.rejected.load(Ordering::Relaxed),
            connections_open: c.open.load(Ordering::Relaxed),
            handshakes_ok: c.handshakes_ok.load(Ordering::Relaxed),
            handshakes_failed: c.handshakes_failed.load(Ordering::Relaxed),
            connections_failed: c.failed.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting and closes every connection (pending calls of their clients fail with
    /// [`TransportError::PeerGone`]).
    pub fn shutdown(&self) {
        self.stop.send_replace(true);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Resolves once the server is shut down (or dropped).
async fn until_stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

async fn accept_loop(
    listener: TcpListener,
    context: Arc<Context>,
    mut stop: watch::Receiver<bool>,
) {
    let counters = &*context.counters;
    loop {
        let accepted = tokio::select! {
            biased;
            () = until_stopped(&mut stop) => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, addr)) => {
                // Relaxed: counters; `open` is only changed here and by `OpenGuard`.
                counters.accepted.fetch_add(1, Ordering::Relaxed);
                let open = counters.open.load(Ordering::Relaxed);
                if usize::try_from(open).unwrap_or(usize::MAX) >= context.limits.connections_max {
                    counters.rejected.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(peer_addr = %addr, open, "too many connections; closing");
                    drop(stream);
                    continue;
                }
                counters.open.fetch_add(1, Ordering::Relaxed);
                let guard = OpenGuard(Arc::clone(&context.counters));
                tokio::spawn(serve(stream, addr, Arc::clone(&context), stop.clone(), guard));
            }
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::select! {
                    () = until_stopped(&mut stop) => return,
                    () = tokio::time::sleep(ACCEPT_ERROR_PAUSE) => {}
                }
            }
        }
    }
}

/// Counts a connection as open while it lives.
struct OpenGuard(Arc<Counters>);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One connection: handshake, then the reader loop here and the writer in its own task.
async fn serve(
    stream: TcpStream,
    addr: SocketAddr,
    context: Arc<Context>,
    mut stop: watch::Receiver<bool>,
    _open: OpenGuard,
) {
    let counters = &*context.counters;
    let limits = context.limits;
    if let Err(e) = stream.set_nodelay(true) {
        tracing::warn!(peer_addr = %addr, error = %e, "cannot set TCP_NODELAY; closing");
        return;
    }
    let (rd, mut wr) = stream.into_split();
    let mut rd = BufReader::new(rd);
    let authenticating = tokio::time::timeout(
        limits.handshake_timeout,
        handshake::server(&mut rd, &mut wr, addr, &context.handshake),
    );
    let outcome = tokio::select! {
        biased;
        () = until_stopped(&mut stop) => return,
        outcome = authenticating => outcome,
    };
    let client = match outcome {
        Ok(Ok(client)) => client,
        Ok(Err(e)) => {
            counters.handshakes_failed.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(peer_addr = %addr, reason = %e, "refused connection");
            return;
        }
        Err(_) => {
            counters.handshakes_failed.fetch_add(1, Ordering::Relaxed);
            let e = TransportError::HandshakeTimeout {
                addr,
                after_ms: millis(limits.handshake_timeout),
            };
            tracing::warn!(peer_addr = %addr, reason = %e, "refused connection");
            return;
        }
    };
    counters.handshakes_ok.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(peer = client, peer_addr = %addr, "authenticated");

    let shared = Shared::new(client, addr, limits.in_flight_max);
    let (tx, rx) = mpsc::channel(limits.queue_depth);
    let writer = tokio::spawn(write_loop(wr, rx, Arc::clone(&shared)));
    let responder = Responder::Server { handler: Arc::clone(&context.handler), tx };
    let served = tokio::select! {
        biased;
        () = until_stopped(&mut stop) => Ok(()),
        served = read_loop(rd, &shared, limits, responder) => served,
    };
    if let Err(e) = served {
        counters.failed.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(peer = client, peer_addr = %addr, error = %e, "closing connection");
    }
    // The socket closes when the writer, woken by `close`, drops the write half.
    shared.close(false);
    let _ = writer.await;
}
