//! The [`crate::auth`] handshake over a socket, for either side.
//!
//! Frames are held to [`HANDSHAKE_FRAME_BYTES_MAX`] and must be `Handshake` frames carrying
//! the message expected next. A side that fails the handshake for a reason the other side
//! can use (wrong proof or cluster, a message out of order, a malformed frame) writes
//! `Refused { reason }` before it returns the error; the caller closes the socket. The caller
//! also bounds the whole exchange with `Limits::handshake_timeout`.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncWrite};

use super::TransportError;
use super::frame_io::{read_message, write_message};
use crate::auth::{AuthError, ClientHandshake, Secret, ServerHandshake};
use crate::wire::{Body, HANDSHAKE_FRAME_BYTES_MAX, Kind, Message};

/// Runs the client side as node `me`; returns the server's node id.
pub(super) async fn client<R, W>(
    rd: &mut R,
    wr: &mut W,
    addr: SocketAddr,
    me: u64,
    cluster: &str,
    secret: Secret,
) -> Result<u64, TransportError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = Vec::new();
    let (hs, hello) = ClientHandshake::start(me, cluster, secret);
    send(wr, hello, addr).await?;
    let challenge = expect(rd, &mut buf, addr, "Challenge").await?;
    let (hs, auth) = match hs.on_challenge(challenge) {
        Ok(next) => next,
        Err(e) => return Err(refuse(wr, addr, auth_error(addr, e)).await),
    };
    send(wr, auth, addr).await?;
    let outcome = expect(rd, &mut buf, addr, "Welcome").await?;
    hs.on_outcome(outcome).map_err(|e| auth_error(addr, e))
}

/// Runs the server side; returns the client's node id.
pub(super) async fn server<R, W>(
    rd: &mut R,
    wr: &mut W,
    addr: SocketAddr,
    hs: &ServerHandshake,
) -> Result<u64, TransportError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = Vec::new();
    let steps = async {
        let hello = expect(rd, &mut buf, addr, "Hello").await?;
        let (pending, challenge) = hs.on_hello(hello).map_err(|e| auth_error(addr, e))?;
        send(wr, challenge, addr).await?;
        let auth = expect(rd, &mut buf, addr, "Auth").await?;
        hs.on_auth(pending, auth).map_err(|e| auth_error(addr, e))
    };
    let client_id = match steps.await {
        Ok(id) => id,
        Err(e) => return Err(refuse(wr, addr, e).await),
    };
    send(wr, Body::Welcome, addr).await?;
    Ok(client_id)
}

async fn send<W: AsyncWrite + Unpin>(
    wr: &mut W,
    body: Body,
    addr: SocketAddr,
) -> Result<(), TransportError> {
    write_message(wr, &Message::handshake(body), HANDSHAKE_FRAME_BYTES_MAX, addr).await
}

/// The next frame, which must be a `Handshake` frame (its message is checked by the caller's
/// state machine).
async fn expect<R: AsyncRead + Unpin>(
    rd: &mut R,
    buf: &mut Vec<u8>,
    addr: SocketAddr,
    expected: &'static str,
) -> Result<Body, TransportError> {
    match read_message(rd, HANDSHAKE_FRAME_BYTES_MAX, buf, addr).await? {
        Some(Message { kind: Kind::Handshake, body, .. }) => Ok(body),
        Some(msg) => Err(TransportError::Unexpected {
            addr,
            expected,
            found: format!("{} in a {:?} frame", msg.body.name(), msg.kind),
        }),
        None => Err(TransportError::Io {
            addr,
            source: io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("connection closed while waiting for {expected}"),
            ),
        }),
    }
}

/// A refusal by the other side becomes [`TransportError::Refused`]; anything we detected,
/// [`TransportError::Auth`].
fn auth_error(addr: SocketAddr, e: AuthError) -> TransportError {
    match e {
        AuthError::Refused { reason } => TransportError::Refused { addr, reason },
        source => TransportError::Auth { addr, source },
    }
}

/// Tells the other side why, if it can use it (best effort), and returns `e`.
async fn refuse<W: AsyncWrite + Unpin>(
    wr: &mut W,
    addr: SocketAddr,
    e: TransportError,
) -> TransportError {
    let reason = match &e {
        TransportError::Auth { source, .. } => source.refusal_reason(),
        TransportError::Wire { source, .. } => format!("malformed frame: {source}"),
        TransportError::Unexpected { expected, found, .. } => {
            format!("expected {expected}, got {found}")
        }
        // The other side refused, or the socket is broken: nothing to say.
        _ => return e,
    };
    // Best effort: the connection is closed either way.
    let _ = send(wr, Body::Refused { reason }, addr).await;
    e
}
