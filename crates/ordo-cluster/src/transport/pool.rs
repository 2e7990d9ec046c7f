//! [`PeerPool`]: one [`Peer`] per node id (and, for the transaction path, one [`PolledPeer`]),
//! connected on first use and reconnected after a failure with bounded exponential back-off.
//!
//! # Invariants
//! * At most one connection attempt per node at a time (a per-node async lock); callers that
//!   arrive during an attempt wait for it and share its result.
//! * After `n` consecutive failed attempts the next is allowed only `min(min · 2^(n-1), max)`
//!   later; until then [`PeerPool::get`] fails at once with [`TransportError::Backoff`]
//!   rather than waiting, so no caller (the lease thread in particular) blocks on a dead node.
//!   A success resets the count; a connection that dies after working is retried at once.
//! * A node that answers with another id is a failure ([`TransportError::WrongPeer`]).
//! * The pool holds one slot per node given an address ([`PeerPool::set_addr`]); it never
//!   grows on its own.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::{Limits, Peer, PolledPeer, TransportError, millis};
use crate::auth::Secret;
use crate::wire::Body;

/// Default wait after the first failed attempt.
pub const BACKOFF_MIN_DEFAULT: Duration = Duration::from_millis(50);
/// Default longest wait between attempts.
pub const BACKOFF_MAX_DEFAULT: Duration = Duration::from_secs(5);

/// Connections to the nodes of a cluster, by node id.
#[derive(Debug)]
pub struct PeerPool {
    me: u64,
    cluster: String,
    secret: Secret,
    limits: Limits,
    backoff_min: Duration,
    backoff_max: Duration,
    slots: Mutex<HashMap<u64, Arc<Slot>>>,
}

#[derive(Debug)]
struct Slot {
    state: Mutex<SlotState>,
    /// Held during a connection attempt.
    connecting: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct SlotState {
    addr: SocketAddr,
    peer: Option<Peer>,
    /// The polled connection for the transaction path ([`PeerPool::get_polled`]).
    polled: Option<Arc<PolledPeer>>,
    failures: u32,
    retry_at: Option<Instant>,
}

impl SlotState {
    fn new(addr: SocketAddr) -> Self {
        SlotState { addr, peer: None, polled: None, failures: 0, retry_at: None }
    }

    /// Closes both connections.
    fn close(&mut self) {
        if let Some(peer) = self.peer.take() {
            peer.close();
        }
        if let Some(polled) = self.polled.take() {
            polled.close();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks; the state stays consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The two kinds of connection a slot holds.
trait Pooled: Clone {
    /// The slot's connection of this kind.
    fn field(st: &mut SlotState) -> &mut Option<Self>;
    fn is_closed(&self) -> bool;
    fn close(&self);
    fn remote_id(&self) -> u64;
}

impl Pooled for Peer {
    fn field(st: &mut SlotState) -> &mut Option<Self> {
        &mut st.peer
    }
    fn is_closed(&self) -> bool {
        Peer::is_closed(self)
    }
    fn close(&self) {
        Peer::close(self);
    }
    fn remote_id(&self) -> u64 {
        Peer::remote_id(self)
    }
}

impl Pooled for Arc<PolledPeer> {
    fn field(st: &mut SlotState) -> &mut Option<Self> {
        &mut st.polled
    }
    fn is_closed(&self) -> bool {
        PolledPeer::is_closed(self)
    }
    fn close(&self) {
        PolledPeer::close(self);
    }
    fn remote_id(&self) -> u64 {
        PolledPeer::remote_id(self)
    }
}

impl Slot {
    /// A live connection (`Ok(Some)`), the back-off error, or `Ok(None)`: time to connect.
    fn ready<C: Pooled>(&self, id: u64) -> Result<Option<C>, TransportError> {
        let mut st = lock(&self.state);
        let conn = C::field(&mut st);
        if let Some(c) = conn {
            if !c.is_closed() {
                return Ok(Some(c.clone()));
            }
            *conn = None;
        }
        match st.retry_at {
            Some(at) if Instant::now() < at => Err(TransportError::Backoff {
                peer: id,
                failures: st.failures,
                retry_in_ms: millis(at - Instant::now()).max(1),
            }),
            _ => Ok(None),
        }
    }
}

impl PeerPool {
    /// An empty pool that connects as node `me` of `cluster`.
    pub fn new(me: u64, cluster: &str, secret: Secret, limits: Limits) -> Self {
        Self {
            me,
            cluster: cluster.to_owned(),
            secret,
            limits,
            backoff_min: BACKOFF_MIN_DEFAULT,
            backoff_max: BACKOFF_MAX_DEFAULT,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// Sets the back-off bounds (`min` after the first failure, doubling up to `max`).
    pub fn with_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max.max(min);
        self
    }

    /// Sets node `id`'s address. A changed address closes the connection to the old one and
    /// clears the back-off.
    pub fn set_addr(&self, id: u64, addr: SocketAddr) {
        let mut slots = lock(&self.slots);
        if let Some(slot) = slots.get(&id) {
            let mut st = lock(&slot.state);
            if st.addr == addr {
                return;
            }
            st.close();
            *st = SlotState::new(addr);
            return;
        }
        let state = SlotState::new(addr);
        let slot = Slot { state: Mutex::new(state), connecting: tokio::sync::Mutex::new(()) };
        slots.insert(id, Arc::new(slot));
    }

    /// Forgets node `id`, closing its connection.
    pub fn remove(&self, id: u64) {
        let slot = lock(&self.slots).remove(&id);
        if let Some(slot) = slot {
            lock(&slot.state).close();
        }
    }

    /// Node `id`'s address, if known.
    pub fn addr(&self, id: u64) -> Option<SocketAddr> {
        let slot = lock(&self.slots).get(&id).cloned()?;
        let addr = lock(&slot.state).addr;
        Some(addr)
    }

    /// The connection to node `id`, connecting (once, however many callers ask) if there is
    /// none or it broke.
    ///
    /// # Errors
    /// [`TransportError::UnknownPeer`], [`TransportError::Backoff`] while waiting to retry,
    /// [`TransportError::WrongPeer`], or the error of [`Peer::connect`].
    pub async fn get(&self, id: u64) -> Result<Peer, TransportError> {
        let (me, cluster, limits) = (self.me, &self.cluster, self.limits);
        self.get_with(id, |addr, secret| Peer::connect(addr, me, cluster, secret, limits)).await
    }

    /// The polled connection to node `id` ([`PolledPeer`], for calls from application
    /// threads), connecting on `runtime` if there is none or it broke; back-off as
    /// [`PeerPool::get`], shared with the node's other connection.
    ///
    /// # Errors
    /// As [`PeerPool::get`].
    pub async fn get_polled(&self, id: u64) -> Result<Arc<PolledPeer>, TransportError> {
        let (me, cluster, limits) = (self.me, &self.cluster, self.limits);
        self.get_with(id, |addr, secret| async move {
            PolledPeer::connect(addr, me, cluster, secret, limits).await.map(Arc::new)
        })
        .await
    }

    /// The polled connection to node `id` if one is open (no waiting, no runtime).
    pub fn ready_polled(&self, id: u64) -> Option<Arc<PolledPeer>> {
        let slot = lock(&self.slots).get(&id).cloned()?;
        slot.ready(id).ok().flatten()
    }

    async fn get_with<C, F, Fut>(&self, id: u64, connect: F) -> Result<C, TransportError>
    where
        C: Pooled,
        F: FnOnce(SocketAddr, Secret) -> Fut,
        Fut: std::future::Future<Output = Result<C, TransportError>>,
    {
        let slot = lock(&self.slots).get(&id).cloned();
        let slot = slot.ok_or(TransportError::UnknownPeer { peer: id })?;
        if let Some(conn) = slot.ready(id)? {
            return Ok(conn);
        }
        let _attempt = slot.connecting.lock().await;
        // Another caller may have connected, or failed, while we waited.
        if let Some(conn) = slot.ready(id)? {
            return Ok(conn);
        }
        let addr = lock(&slot.state).addr;
        let result = match connect(addr, self.secret.clone()).await {
            Ok(conn) if conn.remote_id() != id => {
                conn.close();
                Err(TransportError::WrongPeer { addr, expected: id, found: conn.remote_id() })
            }
            other => other,
        };
        let mut st = lock(&slot.state);
        if st.addr != addr {
            // The address changed during the attempt: its result is about the old one.
            if let Ok(conn) = &result {
                conn.close();
            }
            return result;
        }
        match result {
            Ok(conn) => {
                *C::field(&mut st) = Some(conn.clone());
                st.failures = 0;
                st.retry_at = None;
                Ok(conn)
            }
            Err(e) => {
                st.failures = st.failures.saturating_add(1);
                let wait = self.backoff(st.failures);
                st.retry_at = Some(Instant::now() + wait);
                tracing::warn!(peer = id, peer_addr = %addr, failures = st.failures,
                    retry_in_ms = millis(wait), error = %e, "cannot connect");
                Err(e)
            }
        }
    }

    /// [`Peer::call`] on node `id`'s connection.
    ///
    /// # Errors
    /// As [`PeerPool::get`] and [`Peer::call`].
    pub async fn call(&self, id: u64, body: Body) -> Result<Body, TransportError> {
        self.get(id).await?.call(body).await
    }

    /// [`Peer::send`] on node `id`'s connection.
    ///
    /// # Errors
    /// As [`PeerPool::get`] and [`Peer::send`].
    pub async fn send(&self, id: u64, body: Body) -> Result<(), TransportError> {
        self.get(id).await?.send(body).await
    }

    /// The wait after `failures` consecutive failures: `min · 2^(failures-1)`, at most `max`.
    fn backoff(&self, failures: u32) -> Duration {
        debug_assert!(failures >= 1);
        let doublings = failures.saturating_sub(1).min(31);
        self.backoff_min.saturating_mul(1 << doublings).min(self.backoff_max)
    }
}
