//! A running connection: the state its tasks share, the writer task and the reader task.
//!
//! [`Shared`] holds the map from request id to waiting caller, behind one mutex together with
//! the `closed` flag: a call registers under that mutex and [`Shared::close`] drains under it,
//! so a call either is drained (and told [`TransportError::PeerGone`]) or sees `closed` and
//! fails at once — none can wait on a dead connection until its timeout. Entries are removed
//! by the caller's [`PendingGuard`] however the call ends, and registering needs a permit of
//! the `in_flight` semaphore, so the map never holds more than `Limits::in_flight_max`.
//!
//! The writer owns the socket's write half and the receiving end of the bounded frame queue;
//! the reader owns the read half. Either ends the connection through `close`, which wakes
//! the other through the `stop` watch.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use super::frame_io::read_message;
use super::{Handler, Limits, TransportError};
use crate::wire::{Body, Kind, Message, error_code};

/// What a waiting call receives.
pub(super) type Answer = Result<Body, TransportError>;

/// The read half as the reader task uses it (buffered; the same buffer served the handshake,
/// so no byte read ahead is lost).
pub(super) type ReadHalf = BufReader<OwnedReadHalf>;

/// The writer coalesces queued frames into one write up to this many bytes.
const WRITE_BATCH_BYTES_MAX: usize = 256 << 10;

struct Pending {
    closed: bool,
    closed_locally: bool,
    waiting: HashMap<u64, oneshot::Sender<Answer>>,
}

/// State shared by a connection's tasks and handles.
pub(super) struct Shared {
    peer: u64,
    addr: SocketAddr,
    pending: Mutex<Pending>,
    stop: watch::Sender<bool>,
    /// Permits for outstanding calls; closed with the connection.
    pub(super) in_flight: Semaphore,
    in_flight_max: usize,
}

impl Shared {
    pub(super) fn new(peer: u64, addr: SocketAddr, in_flight_max: usize) -> Arc<Self> {
        Arc::new(Self {
            peer,
            addr,
            pending: Mutex::new(Pending {
                closed: false,
                closed_locally: false,
                waiting: HashMap::new(),
            }),
            stop: watch::channel(false).0,
            in_flight: Semaphore::new(in_flight_max),
            in_flight_max,
        })
    }

    pub(super) fn peer(&self) -> u64 {
        self.peer
    }

    pub(super) fn addr(&self) -> SocketAddr {
        self.addr
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        // No code panics while holding the lock; a poisoned map is still consistent.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(super) fn is_closed(&self) -> bool {
        *self.stop.borrow()
    }

    /// Calls waiting for an answer.
    pub(super) fn waiting(&self) -> usize {
        self.lock().waiting.len()
    }

    /// The error for a call on this connection once it is closed.
    pub(super) fn gone(&self) -> TransportError {
        let (peer, addr) = (self.peer, self.addr);
        if self.lock().closed_locally {
            TransportError::Closed { peer, addr }
        } else {
            TransportError::PeerGone { peer, addr }
        }
    }

    /// Registers a call waiting for the answer to request `id`.
    pub(super) fn register(
        &self,
        id: u64,
        tx: oneshot::Sender<Answer>,
    ) -> Result<PendingGuard<'_>, TransportError> {
        let mut p = self.lock();
        if p.closed {
            drop(p);
            return Err(self.gone());
        }
        let previous = p.waiting.insert(id, tx);
        debug_assert!(previous.is_none(), "request id {id} reused");
        // Each registered call holds an `in_flight` permit.
        debug_assert!(p.waiting.len() <= self.in_flight_max);
        Ok(PendingGuard { shared: self, id })
    }

    /// Hands the answer to request `id` to its caller, if it is still waiting.
    fn complete(&self, id: u64, body: Body) {
        let tx = self.lock().waiting.remove(&id);
        match tx {
            // The caller may have just given up: its loss.
            Some(tx) => drop(tx.send(Ok(body))),
            None => tracing::debug!(peer = self.peer, peer_addr = %self.addr, id,
                "answer to a call no longer waiting (timed out, or never made)"),
        }
    }

    /// Closes the connection: fails every waiting call, wakes both tasks, refuses new calls.
    /// Idempotent; `locally` says whether we (not the peer or the network) chose to close.
    pub(super) fn close(&self, locally: bool) {
        let drained = {
            let mut p = self.lock();
            if p.closed {
                return;
            }
            p.closed = true;
            p.closed_locally = locally;
            std::mem::take(&mut p.waiting)
        };
        let (peer, addr) = (self.peer, self.addr);
        for (_, tx) in drained {
            let gone = if locally {
                TransportError::Closed { peer, addr }
            } else {
                TransportError::PeerGone { peer, addr }
            };
            drop(tx.send(Err(gone)));
        }
        self.in_flight.close();
        self.stop.send_replace(true);
    }

    /// A receiver that sees `true` once the connection is closed.
    pub(super) fn stopped(&self) -> watch::Receiver<bool> {
        self.stop.subscribe()
    }
}

/// Removes a call's entry from the map when the call ends, however it ends.
pub(super) struct PendingGuard<'a> {
    shared: &'a Shared,
    id: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.shared.lock().waiting.remove(&self.id);
    }
}

/// Resolves once `stop` is `true` (or its sender is gone).
async fn until_stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// The writer task: drains the frame queue into the socket until the queue's senders are all
/// gone, the connection is closed, or a write fails; then closes the connection and the
/// socket's write side.
pub(super) async fn write_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::Receiver<Vec<u8>>,
    shared: Arc<Shared>,
) {
    let mut stop = shared.stopped();
    let mut batch = Vec::new();
    let mut locally = true; // the queue's senders were all dropped
    loop {
        let first = tokio::select! {
            biased;
            () = until_stopped(&mut stop) => break,
            frame = rx.recv() => match frame {
                Some(frame) => frame,
                None => break,
            },
        };
        let bytes = match rx.try_recv() {
            Err(_) => first,
            Ok(second) => {
                batch.clear();
                batch.extend_from_slice(&first);
                batch.extend_from_slice(&second);
                while batch.len() < WRITE_BATCH_BYTES_MAX {
                    match rx.try_recv() {
                        Ok(frame) => batch.extend_from_slice(&frame),
                        Err(_) => break,
                    }
                }
                std::mem::take(&mut batch)
            }
        };
        let written = tokio::select! {
            biased;
            () = until_stopped(&mut stop) => break,
            written = wr.write_all(&bytes) => written,
        };
        if let Err(e) = written {
            tracing::warn!(peer = shared.peer, peer_addr = %shared.addr, error = %e,
                "write failed; closing the connection");
            locally = false;
            break;
        }
        if bytes.capacity() <= WRITE_BATCH_BYTES_MAX * 2 {
            batch = bytes; // keep the buffer for the next batch
        }
    }
    shared.close(locally);
    let _ = wr.shutdown().await;
}

/// What the reader does with requests and one-way messages.
pub(super) enum Responder {
    /// A server connection: the handler answers, through the connection's queue.
    Server {
        /// The application's handler.
        handler: Arc<dyn Handler>,
        /// The connection's frame queue.
        tx: mpsc::Sender<Vec<u8>>,
    },
    /// A client connection serves nothing; a weak sender, so that dropping every `Peer`
    /// handle still ends the writer.
    Client {
        /// The connection's frame queue.
        tx: mpsc::WeakSender<Vec<u8>>,
    },
}

/// The reader task: reads frames until EOF (`Ok`), the connection is closed (`Ok`), or a
/// frame is malformed, oversized, truncated or of the wrong kind (`Err`). The caller closes
/// the connection afterwards.
pub(super) async fn read_loop(
    mut rd: ReadHalf,
    shared: &Shared,
    limits: Limits,
    responder: Responder,
) -> Result<(), TransportError> {
    let mut stop = shared.stopped();
    let mut buf = Vec::new();
    let (peer, addr) = (shared.peer, shared.addr);
    loop {
        let msg = tokio::select! {
            biased;
            () = until_stopped(&mut stop) => return Ok(()),
            msg = read_message(&mut rd, limits.frame_bytes_max, &mut buf, addr) => msg?,
        };
        let Some(Message { kind, request_id, body }) = msg else {
            tracing::debug!(peer, peer_addr = %addr, "connection closed by the peer");
            return Ok(());
        };
        match kind {
            Kind::Response => shared.complete(request_id, body),
            Kind::Request => {
                let (answer, tx) = match &responder {
                    Responder::Server { handler, tx } => (handler.request(peer, body), tx.clone()),
                    Responder::Client { tx } => {
                        let Some(tx) = tx.upgrade() else { return Ok(()) };
                        let message = format!("node {peer} cannot serve {}", body.name());
                        (Body::Error { code: error_code::NOT_SERVED, message }, tx)
                    }
                };
                let frame = encode_answer(request_id, answer, limits, shared)?;
                tokio::select! {
                    biased;
                    () = until_stopped(&mut stop) => return Ok(()),
                    sent = tx.send(frame) => if sent.is_err() { return Ok(()) },
                }
            }
            Kind::OneWay => match &responder {
                Responder::Server { handler, .. } => handler.one_way(peer, body),
                Responder::Client { .. } => tracing::debug!(peer, peer_addr = %addr,
                    message = body.name(), "one-way message to a client connection dropped"),
            },
            Kind::Handshake => {
                return Err(TransportError::Unexpected {
                    addr,
                    expected: "Request, Response or OneWay",
                    found: format!("{} in a Handshake frame", body.name()),
                });
            }
        }
    }
}

/// The frame answering request `id`; an answer too large to encode becomes an `Error`.
fn encode_answer(
    id: u64,
    answer: Body,
    limits: Limits,
    shared: &Shared,
) -> Result<Vec<u8>, TransportError> {
    let name = answer.name();
    let wire = |source| TransportError::Wire { addr: shared.addr, source };
    match Message::new(Kind::Response, id, answer).encode_frame(limits.frame_bytes_max) {
        Ok(frame) => Ok(frame),
        Err(e) => {
            tracing::warn!(peer = shared.peer, peer_addr = %shared.addr, answer = name, error = %e,
                "the handler's answer cannot be encoded");
            let message = format!("answer {name} cannot be encoded: {e}");
            let error = Body::Error { code: error_code::RESPONSE_TOO_LARGE, message };
            Message::new(Kind::Response, id, error)
                .encode_frame(limits.frame_bytes_max)
                .map_err(wire)
        }
    }
}
