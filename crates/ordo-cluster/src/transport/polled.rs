//! [`PolledPeer`]: a second connection to a node, for one caller at a time, whose waiting is
//! done by polling.
//!
//! A [`super::Peer`] lives on the tokio runtime: a call hands its frame to the writer task and
//! sleeps until the reader task hands back the answer; the server's runtime thread sleeps in
//! `epoll_wait` between requests. On a virtual machine whose idle vCPU has halted, each of
//! those wake-ups costs more than the loopback round trip itself (measured on the 2-vCPU
//! development VM: 57 µs for a blocking ping-pong between two threads, 21 µs when one side
//! polls, 7 µs when both do). The server keeps its runtime: a thread per connection polling
//! there too was measured slower on 2 cores (the pollers take the cores of the callers). FaRM's threads poll their queues for the same reason. Under load
//! the runtime's hand-offs pay for themselves (one wake-up serves a batch of frames); alone, a
//! caller is better off doing the I/O itself. So the remote participant keeps both:
//! * a caller that [`PolledPeer::claim`]s the polled connection writes its request and reads
//!   the answer itself: `recv` with `MSG_DONTWAIT` for up to `Limits::poll_spin`, then a
//!   blocking `recv` bounded by the call's deadline — no thread hand-off at all;
//! * a caller that finds it claimed (another call is in flight on it) uses the node's
//!   [`super::Peer`], whose writer coalesces the frames of many callers.
//!
//! # Invariants
//! * One call at a time: the claim is the connection's mutex, taken with `try_lock`.
//! * An answer whose request id is not the claimant's is a late answer to a call that timed
//!   out; it is dropped with a debug log (ids are never reused on a connection).
//! * Frames are checked as the runtime's reader checks them: the length prefix against
//!   `frame_bytes_max` before the body is waited for; the buffer grows only by bytes received.
//! * A read or write error, EOF, a malformed frame or [`PolledPeer::close`] closes the
//!   connection: the socket is shut down and every later claim fails, so the pool connects
//!   anew. A timed-out call leaves the connection open.
//! * A write that cannot finish within the call timeout (the peer stopped reading) closes the
//!   connection: a partly written frame cannot be taken back.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use super::peer::dial;
use super::{Limits, TransportError};
use crate::auth::Secret;
use crate::wire::{Body, Kind, Message, error_code, next_frame};

/// Bytes asked of the socket per `recv`.
const READ_CHUNK_BYTES: usize = 64 << 10;

/// A read buffer grown above this by one large frame is released once it is drained.
const RETAINED_BUFFER_BYTES_MAX: usize = 256 << 10;

/// An authenticated socket driven by the caller that claims it (see the module docs).
pub struct PolledPeer {
    peer: u64,
    addr: SocketAddr,
    limits: Limits,
    conn: Mutex<Conn>,
    /// The socket, duplicated, to shut it down while a claimant is blocked in `recv`.
    control: TcpStream,
    /// Set once closed; `Some(true)` when we closed it.
    closed: Mutex<Option<bool>>,
    next_id: AtomicU64,
    /// Requests written.
    calls_issued: AtomicU64,
}

struct Conn {
    stream: TcpStream,
    /// Bytes received and not parsed yet (a partial frame).
    buf: Vec<u8>,
    /// The read timeout set on the socket (changed only when it must be).
    read_timeout: Option<Duration>,
}

impl std::fmt::Debug for PolledPeer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolledPeer")
            .field("peer", &self.peer)
            .field("addr", &self.addr)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks; the state stays consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The polled connection, claimed by one caller ([`PolledPeer::claim`]).
pub struct Claim<'a> {
    peer: &'a PolledPeer,
    conn: MutexGuard<'a, Conn>,
}

impl PolledPeer {
    /// Connects to `addr` and authenticates as node `me` of `cluster`, as
    /// [`super::Peer::connect`] does (on the caller's runtime), then leaves the runtime.
    ///
    /// # Errors
    /// As [`super::Peer::connect`].
    pub async fn connect(
        addr: SocketAddr,
        me: u64,
        cluster: &str,
        secret: Secret,
        limits: Limits,
    ) -> Result<Self, TransportError> {
        let (rd, wr, peer) = dial(addr, me, cluster, secret, limits).await?;
        if !rd.buffer().is_empty() {
            return Err(TransportError::Unexpected {
                addr,
                expected: "nothing before our first request",
                found: format!("{} bytes", rd.buffer().len()),
            });
        }
        let io = |source| TransportError::Io { addr, source };
        let stream = rd.into_inner().reunite(wr).map_err(|e| io(std::io::Error::other(e)))?;
        let stream = stream.into_std().map_err(io)?;
        stream.set_nonblocking(false).map_err(io)?;
        stream.set_write_timeout(Some(limits.call_timeout)).map_err(io)?;
        tracing::debug!(peer, peer_addr = %addr, "connected (polled)");
        let control = stream.try_clone().map_err(io)?;
        let conn = Conn { stream, buf: Vec::new(), read_timeout: None };
        Ok(Self {
            peer,
            addr,
            limits,
            conn: Mutex::new(conn),
            control,
            closed: Mutex::new(None),
            next_id: AtomicU64::new(1),
            calls_issued: AtomicU64::new(0),
        })
    }

    /// The node at the other end.
    pub fn remote_id(&self) -> u64 {
        self.peer
    }

    /// Whether the connection is closed.
    pub fn is_closed(&self) -> bool {
        lock(&self.closed).is_some()
    }

    /// Requests written on this connection so far.
    pub fn calls_issued(&self) -> u64 {
        // Relaxed: a statistic.
        self.calls_issued.load(Ordering::Relaxed)
    }

    /// Closes the connection; idempotent. A call in flight fails when its read returns.
    pub fn close(&self) {
        self.close_as(true);
    }

    fn close_as(&self, locally: bool) {
        let mut closed = lock(&self.closed);
        if closed.is_none() {
            *closed = Some(locally);
            // A claimant blocked in `recv` returns.
            let _ = self.control.shutdown(Shutdown::Both);
        }
    }

    fn gone(&self) -> TransportError {
        let (peer, addr) = (self.peer, self.addr);
        if lock(&self.closed).unwrap_or(false) {
            TransportError::Closed { peer, addr }
        } else {
            TransportError::PeerGone { peer, addr }
        }
    }

    /// The connection, if no other call is in flight on it and it is open.
    pub fn claim(&self) -> Option<Claim<'_>> {
        let conn = self.conn.try_lock().ok()?;
        if self.is_closed() {
            return None;
        }
        Some(Claim { peer: self, conn })
    }
}

impl PolledPeer {
    /// The connection, waiting for a call in flight on it to end; `None` if it is closed.
    pub fn claim_waiting(&self) -> Option<Claim<'_>> {
        let conn = lock(&self.conn);
        if self.is_closed() {
            return None;
        }
        Some(Claim { peer: self, conn })
    }
}

impl Claim<'_> {
    /// Sends a request and reads its answer, for at most `after`; with `poll`, polls for
    /// `Limits::poll_spin` before sleeping in `recv` (leave it off when other threads of the
    /// process are busy: polling would take their core).
    ///
    /// # Errors
    /// [`TransportError::Timeout`]; [`TransportError::PeerGone`] if the connection breaks;
    /// [`TransportError::Closed`] after [`PolledPeer::close`]; [`TransportError::Wire`] if
    /// `body` cannot be encoded or a malformed frame arrives.
    pub fn call(mut self, body: Body, after: Duration, poll: bool) -> Result<Body, TransportError> {
        let deadline = Instant::now() + after;
        let p = self.peer;
        // Relaxed: ids need only be distinct.
        let id = p.next_id.fetch_add(1, Ordering::Relaxed);
        let frame = Message::new(Kind::Request, id, body)
            .encode_frame(p.limits.frame_bytes_max)
            .map_err(|source| TransportError::Wire { addr: p.addr, source })?;
        self.write(&frame)?;
        // Relaxed: a statistic.
        p.calls_issued.fetch_add(1, Ordering::Relaxed);
        match self.read_answer(id, deadline, poll) {
            Ok(Some(answer)) => Ok(answer),
            Ok(None) => {
                let after_ms = u64::try_from(after.as_millis()).unwrap_or(u64::MAX);
                Err(TransportError::Timeout { peer: p.peer, addr: p.addr, after_ms })
            }
            Err(e) => {
                if !p.is_closed() {
                    tracing::warn!(peer = p.peer, peer_addr = %p.addr, error = %e,
                        "closing the polled connection");
                }
                self.fail();
                Err(match e {
                    TransportError::Wire { .. } => e,
                    _ => p.gone(),
                })
            }
        }
    }

    /// Sends a one-way message.
    ///
    /// # Errors
    /// [`TransportError::PeerGone`] / [`TransportError::Closed`] if the connection is closed
    /// or the write fails, [`TransportError::Wire`] if `body` cannot be encoded.
    pub fn send(mut self, body: Body) -> Result<(), TransportError> {
        let p = self.peer;
        let frame = Message::new(Kind::OneWay, 0, body)
            .encode_frame(p.limits.frame_bytes_max)
            .map_err(|source| TransportError::Wire { addr: p.addr, source })?;
        self.write(&frame)
    }

    fn fail(&mut self) {
        self.peer.close_as(false);
    }

    fn write(&mut self, frame: &[u8]) -> Result<(), TransportError> {
        let p = self.peer;
        if p.is_closed() {
            return Err(p.gone());
        }
        if let Err(e) = self.conn.stream.write_all(frame) {
            tracing::warn!(peer = p.peer, peer_addr = %p.addr, error = %e,
                "write failed; closing the polled connection");
            self.fail();
            return Err(p.gone());
        }
        Ok(())
    }

    /// Reads until the answer to `id` (`Ok(Some)`) or the deadline (`Ok(None)`).
    fn read_answer(
        &mut self,
        id: u64,
        deadline: Instant,
        poll: bool,
    ) -> Result<Option<Body>, TransportError> {
        let p = self.peer;
        let io = |source| TransportError::Io { addr: p.addr, source };
        loop {
            if let Some(answer) = self.parse_frames(id)? {
                return Ok(Some(answer));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let conn = &mut *self.conn;
            // Sleep in `recv` for the rest of the call (at least 1 ms: the setting is kept
            // while calls are shorter).
            let want = left.max(Duration::from_millis(1));
            if conn.read_timeout.is_none_or(|t| t > want) {
                conn.stream.set_read_timeout(Some(want)).map_err(io)?;
                conn.read_timeout = Some(want);
            }
            let spin = if poll { p.limits.poll_spin } else { Duration::ZERO };
            match receive(&conn.stream, &mut conn.buf, spin).map_err(io)? {
                Received::Bytes => {}
                Received::Eof => return Err(p.gone()),
                Received::Nothing => {}
            }
        }
    }

    /// Parses the complete frames buffered (and drops them from the buffer); the answer to
    /// `id` if it is among them.
    fn parse_frames(&mut self, id: u64) -> Result<Option<Body>, TransportError> {
        let p = self.peer;
        let wire = |source| TransportError::Wire { addr: p.addr, source };
        let mut answer = None;
        let mut used = 0;
        let result = loop {
            let conn = &mut *self.conn;
            let next = next_frame(&conn.buf[used..], p.limits.frame_bytes_max).map_err(wire);
            let (message, len) = match next {
                Ok(Some(frame)) => frame,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            };
            used += len;
            match message.kind {
                Kind::Response if message.request_id == id => {
                    answer = Some(message.body);
                    break Ok(());
                }
                Kind::Response => tracing::debug!(peer = p.peer, peer_addr = %p.addr,
                    id = message.request_id, "late answer to a call that timed out"),
                Kind::Request => {
                    let text = format!("node {} cannot serve {}", p.peer, message.body.name());
                    let refusal = Body::Error { code: error_code::NOT_SERVED, message: text };
                    let frame = Message::new(Kind::Response, message.request_id, refusal)
                        .encode_frame(p.limits.frame_bytes_max)
                        .map_err(wire);
                    if let Err(e) = frame.and_then(|f| self.write(&f)) {
                        break Err(e);
                    }
                }
                Kind::OneWay => tracing::debug!(peer = p.peer, peer_addr = %p.addr,
                    message = message.body.name(), "one-way message to a client connection dropped"),
                Kind::Handshake => {
                    break Err(TransportError::Unexpected {
                        addr: p.addr,
                        expected: "Request, Response or OneWay",
                        found: format!("{} in a Handshake frame", message.body.name()),
                    });
                }
            }
        };
        consume(&mut self.conn.buf, used);
        result.map(|()| answer)
    }
}

/// What [`receive`] got.
enum Received {
    /// Bytes, appended to the buffer.
    Bytes,
    /// End of stream.
    Eof,
    /// Nothing before the socket's read timeout.
    Nothing,
}

/// Appends what the socket has to `buf`: polls (`recv` with `MSG_DONTWAIT`) for `spin`, then
/// blocks in `recv` (until the socket's read timeout, if one is set).
fn receive(stream: &TcpStream, buf: &mut Vec<u8>, spin: Duration) -> std::io::Result<Received> {
    let start = buf.len();
    buf.resize(start + READ_CHUNK_BYTES, 0);
    let spin_until = Instant::now() + spin;
    let got = loop {
        let chunk = &mut buf[start..];
        match rustix::net::recv(stream, &mut *chunk, rustix::net::RecvFlags::DONTWAIT) {
            Ok((n, _)) => break Ok(n),
            Err(rustix::io::Errno::AGAIN) if Instant::now() < spin_until => {
                std::hint::spin_loop();
            }
            Err(rustix::io::Errno::AGAIN) => match (&*stream).read(chunk) {
                Ok(n) => break Ok(n),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    break Ok(usize::MAX);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            },
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => break Err(e.into()),
        }
    };
    match got {
        Ok(usize::MAX) => {
            buf.truncate(start);
            Ok(Received::Nothing)
        }
        Ok(0) => {
            buf.truncate(start);
            Ok(Received::Eof)
        }
        Ok(n) => {
            buf.truncate(start + n);
            Ok(Received::Bytes)
        }
        Err(e) => {
            buf.truncate(start);
            Err(e)
        }
    }
}

/// Drops the first `used` bytes of `buf` (parsed frames), keeping a partial frame's bytes.
fn consume(buf: &mut Vec<u8>, used: usize) {
    if used == buf.len() {
        buf.clear();
        if buf.capacity() > RETAINED_BUFFER_BYTES_MAX {
            *buf = Vec::new();
        }
    } else if used > 0 {
        buf.drain(..used);
    }
}

impl Drop for PolledPeer {
    fn drop(&mut self) {
        let _ = self.control.shutdown(Shutdown::Both);
    }
}
