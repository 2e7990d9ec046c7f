//! Reading and writing whole frames on a socket.
//!
//! [`read_message`] checks the length prefix against the limit ([`frame_body_len`]) before it
//! buffers any of the body, and then lets the buffer grow only as bytes arrive (`take` +
//! `read_to_end`), so a peer that declares a large frame and sends little costs little. A
//! frame cut short by EOF is [`WireError::Truncated`]; EOF between frames is a clean end.

use std::net::SocketAddr;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::TransportError;
use crate::wire::{FRAME_HEADER_BYTES, Message, WireError, frame_body_len};

/// A read buffer grown above this by one large frame is released before the next frame.
const RETAINED_BUFFER_BYTES_MAX: usize = 64 << 10;

/// Reads the next frame's body into `buf`; `Ok(None)` at EOF between frames.
pub(super) async fn read_message<R: AsyncRead + Unpin>(
    rd: &mut R,
    frame_bytes_max: u32,
    buf: &mut Vec<u8>,
    addr: SocketAddr,
) -> Result<Option<Message>, TransportError> {
    let wire = |source| TransportError::Wire { addr, source };
    let io = |source| TransportError::Io { addr, source };

    let mut prefix = [0u8; FRAME_HEADER_BYTES];
    let mut got = 0;
    while got < FRAME_HEADER_BYTES {
        let n = rd.read(&mut prefix[got..]).await.map_err(io)?;
        if n == 0 {
            if got == 0 {
                return Ok(None);
            }
            let need = FRAME_HEADER_BYTES;
            return Err(wire(WireError::Truncated {
                field: "frame length",
                at: 0,
                need,
                have: got,
            }));
        }
        got += n;
    }
    // The limit is checked here, before the body has a buffer.
    let len = frame_body_len(prefix, frame_bytes_max).map_err(wire)?;

    if buf.capacity() > RETAINED_BUFFER_BYTES_MAX {
        *buf = Vec::new();
    }
    buf.clear();
    let len_u64 = u64::try_from(len).unwrap_or(u64::MAX);
    let have = (&mut *rd).take(len_u64).read_to_end(buf).await.map_err(io)?;
    if have < len {
        let at = FRAME_HEADER_BYTES;
        return Err(wire(WireError::Truncated { field: "frame body", at, need: len, have }));
    }
    debug_assert_eq!(buf.len(), len);
    Message::decode_body(buf).map(Some).map_err(wire)
}

/// Encodes `msg` and writes it.
pub(super) async fn write_message<W: AsyncWrite + Unpin>(
    wr: &mut W,
    msg: &Message,
    frame_bytes_max: u32,
    addr: SocketAddr,
) -> Result<(), TransportError> {
    let frame = msg
        .encode_frame(frame_bytes_max)
        .map_err(|source| TransportError::Wire { addr, source })?;
    wr.write_all(&frame).await.map_err(|source| TransportError::Io { addr, source })
}
