//! [`PeerPool`]: one [`Peer`] per node id, connected on first use and reconnected after a
//! failure with bounded exponential back-off.
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

use super::{Limits, Peer, TransportError, millis};
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
    failures: u32,
    retry_at: Option<Instant>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // No code panics while holding these locks; the state stays consistent.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Slot {
    /// A live connection (`Ok(Some)`), the back-off error, or `Ok(None)`: time to connect.
    fn ready(&self, id: u64) -> Result<Option<Peer>, TransportError> {
        let mut st = lock(&self.state);
        if let Some(peer) = &st.peer {
            if !peer.is_closed() {
                return Ok(Some(peer.clone()));
            }
            st.peer = None;
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
            if let Some(peer) = st.peer.take() {
                peer.close();
            }
            *st = SlotState { addr, peer: None, failures: 0, retry_at: None };
            return;
        }
        let state = SlotState { addr, peer: None, failures: 0, retry_at: None };
        let slot = Slot { state: Mutex::new(state), connecting: tokio::sync::Mutex::new(()) };
        slots.insert(id, Arc::new(slot));
    }

    /// Forgets node `id`, closing its connection.
    pub fn remove(&self, id: u64) {
        let slot = lock(&self.slots).remove(&id);
        if let Some(slot) = slot {
            if let Some(peer) = lock(&slot.state).peer.take() {
                peer.close();
            }
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
        let slot = lock(&self.slots).get(&id).cloned();
        let slot = slot.ok_or(TransportError::UnknownPeer { peer: id })?;
        if let Some(peer) = slot.ready(id)? {
            return Ok(peer);
        }
        let _attempt = slot.connecting.lock().await;
        // Another caller may have connected, or failed, while we waited.
        if let Some(peer) = slot.ready(id)? {
            return Ok(peer);
        }
        let addr = lock(&slot.state).addr;
        let secret = self.secret.clone();
        let result = match Peer::connect(addr, self.me, &self.cluster, secret, self.limits).await {
            Ok(peer) if peer.remote_id() != id => {
                peer.close();
                Err(TransportError::WrongPeer { addr, expected: id, found: peer.remote_id() })
            }
            other => other,
        };
        let mut st = lock(&slot.state);
        if st.addr != addr {
            // The address changed during the attempt: its result is about the old one.
            if let Ok(peer) = &result {
                peer.close();
            }
            return result;
        }
        match result {
            Ok(peer) => {
                st.peer = Some(peer.clone());
                st.failures = 0;
                st.retry_at = None;
                Ok(peer)
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
