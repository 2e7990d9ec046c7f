//! The wire format: length-prefixed binary frames carrying versioned messages.
//!
//! ```text
//! frame   = len: u32 LE | body[len]                    len <= Limits::frame_bytes_max
//! body    = version: u8 (= 1) | kind: u8 | request_id: u64 LE | tag: u8 | fields
//! kind    = 1 Request | 2 Response | 3 OneWay | 4 Handshake
//! ```
//!
//! A `Request` carries a fresh non-zero `request_id`, and its `Response` echoes it; `OneWay`
//! and `Handshake` frames carry 0. The fields of each message (the [`Body`] variants, tags
//! in [`tag`]) follow in declaration order with the fixed little-endian encodings of
//! [`codec`]: integers, `f64` bits, `bool` as 0/1, `[u8; N]` raw, strings and sequences
//! behind a `u32` length.
//!
//! # Invariants (what decoding guarantees on hostile input)
//! * **Frame limit first.** [`frame_body_len`] checks the 4-byte prefix against the limit
//!   before a byte of the body is buffered: a declared 4 GiB frame costs nothing.
//! * **No panics, no unchecked reads.** Every read goes through [`Reader`], which returns
//!   [`WireError::Truncated`] (field, offset, lengths) past the end.
//! * **No allocation the input does not pay for.** Strings are checked against
//!   [`STRING_BYTES_MAX`] and the remaining bytes, sequence counts against the remaining bytes
//!   times the element's smallest encoding, before anything is allocated.
//! * **Exactness.** A body must be exactly one message: another version, an unknown kind or
//!   tag, a handshake message outside a `Handshake` frame (or the reverse), an invalid
//!   `bool`/option byte, invalid UTF-8 and trailing bytes are each a typed [`WireError`].
//!
//! Offsets in body errors count from the version byte; the frame functions name the frame
//! parts (`frame length`, `frame body`) with offsets from the first byte of the frame.

mod body;
pub mod codec;
mod error;

pub use body::{Body, HANDSHAKE_TAG_MAX, is_handshake_tag, tag};
pub use codec::{Field, Reader, Writer};
pub use error::WireError;

/// The protocol version this build speaks (byte 0 of every body).
pub const PROTOCOL_VERSION: u8 = 4;

/// Bytes of the frame's length prefix.
pub const FRAME_HEADER_BYTES: usize = 4;

/// Bytes of a body's header: version, kind, request id, tag.
pub const BODY_HEADER_BYTES: usize = 1 + 1 + 8 + 1;

/// Default of `Limits::frame_bytes_max`: 16 MiB.
pub const FRAME_BYTES_MAX_DEFAULT: u32 = 16 << 20;

/// The longest string field, in bytes (64 KiB).
pub const STRING_BYTES_MAX: usize = 64 << 10;

/// The largest body any handshake message can have: a `Hello` with the longest cluster name.
/// Frames before authentication are held to this, whatever `frame_bytes_max` says.
pub const HANDSHAKE_FRAME_BYTES_MAX: u32 = {
    let n = BODY_HEADER_BYTES + 8 + 4 + STRING_BYTES_MAX + 32;
    assert!(n <= u32::MAX as usize);
    n as u32 // lossless: asserted just above (`try_from` is not `const`)
};

const _: () = assert!(HANDSHAKE_FRAME_BYTES_MAX <= FRAME_BYTES_MAX_DEFAULT);

/// Codes carried by [`Body::Error`].
pub mod error_code {
    /// The receiving end serves no requests on this connection.
    pub const NOT_SERVED: u16 = 1;
    /// The handler does not serve this message.
    pub const UNSUPPORTED: u16 = 2;
    /// The handler's answer was too large to encode within the frame limit.
    pub const RESPONSE_TOO_LARGE: u16 = 3;
}

/// What a frame is for (byte 1 of the body).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Kind {
    /// Expects a `Response` with the same request id.
    Request,
    /// Answers the `Request` with the same request id.
    Response,
    /// Expects no answer; request id 0.
    OneWay,
    /// Authentication, before anything else on a connection; request id 0.
    Handshake,
}

impl Kind {
    /// The kind's byte.
    pub const fn code(self) -> u8 {
        match self {
            Kind::Request => 1,
            Kind::Response => 2,
            Kind::OneWay => 3,
            Kind::Handshake => 4,
        }
    }

    /// The kind with byte `code`.
    ///
    /// # Errors
    /// [`WireError::UnknownKind`].
    pub const fn from_code(code: u8) -> Result<Kind, WireError> {
        match code {
            1 => Ok(Kind::Request),
            2 => Ok(Kind::Response),
            3 => Ok(Kind::OneWay),
            4 => Ok(Kind::Handshake),
            kind => Err(WireError::UnknownKind { kind }),
        }
    }
}

/// A decoded frame: its header fields and message.
#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    /// What the frame is for.
    pub kind: Kind,
    /// Pairs a `Response` with its `Request`; 0 for `OneWay` and `Handshake`.
    pub request_id: u64,
    /// The message.
    pub body: Body,
}

impl Message {
    /// A message.
    pub fn new(kind: Kind, request_id: u64, body: Body) -> Self {
        Self { kind, request_id, body }
    }

    /// A `Handshake` message (request id 0).
    pub fn handshake(body: Body) -> Self {
        Self::new(Kind::Handshake, 0, body)
    }

    /// The whole frame: length prefix and body.
    ///
    /// # Errors
    /// [`WireError::KindMismatch`] for a handshake message outside a `Handshake` frame or the
    /// reverse, [`WireError::StringTooLong`] / [`WireError::LengthOverflow`] for an oversized
    /// field, [`WireError::FrameTooLarge`] if the body exceeds `frame_bytes_max`.
    pub fn encode_frame(&self, frame_bytes_max: u32) -> Result<Vec<u8>, WireError> {
        check_kind(self.kind, self.body.tag())?;
        let mut w = Writer::from_vec(Vec::with_capacity(FRAME_HEADER_BYTES + BODY_HEADER_BYTES));
        w.u32(0); // the length, patched below
        w.u8(PROTOCOL_VERSION);
        w.u8(self.kind.code());
        w.u64(self.request_id);
        w.u8(self.body.tag());
        self.body.put_fields(&mut w)?;
        let body_bytes = w.position() - FRAME_HEADER_BYTES;
        let len = u32::try_from(body_bytes).ok().filter(|&len| len <= frame_bytes_max).ok_or(
            WireError::FrameTooLarge {
                declared: u64::try_from(body_bytes).unwrap_or(u64::MAX),
                max: frame_bytes_max,
            },
        )?;
        w.bytes_mut()[..FRAME_HEADER_BYTES].copy_from_slice(&len.to_le_bytes());
        Ok(w.into_bytes())
    }

    /// Decodes a body (a frame without its length prefix), which must hold exactly one
    /// message.
    ///
    /// # Errors
    /// Any [`WireError`] but `FrameTooLarge` and `LengthOverflow`.
    pub fn decode_body(body: &[u8]) -> Result<Message, WireError> {
        let mut r = Reader::new(body);
        let found = r.u8("version")?;
        if found != PROTOCOL_VERSION {
            return Err(WireError::BadVersion { found, expected: PROTOCOL_VERSION });
        }
        let kind = Kind::from_code(r.u8("kind")?)?;
        let request_id = r.u64("request id")?;
        let tag_at = r.position();
        let tag = r.u8("tag")?;
        let name = tag::name(tag).ok_or(WireError::UnknownTag { tag, at: tag_at })?;
        // Before the fields: a frame of the wrong kind is refused without decoding them.
        check_kind(kind, tag)?;
        let body = Body::get_fields(tag, tag_at, &mut r)?;
        debug_assert_eq!(body.tag(), tag);
        if r.remaining() > 0 {
            return Err(WireError::TrailingBytes {
                tag,
                name,
                at: r.position(),
                extra: r.remaining(),
            });
        }
        Ok(Message { kind, request_id, body })
    }

    /// Decodes the frame at the start of `buf`, returning it and the bytes it took (`buf` may
    /// hold more frames after it).
    ///
    /// # Errors
    /// [`WireError::Truncated`] (`frame length` or `frame body`) if `buf` holds less than a
    /// whole frame, [`WireError::FrameTooLarge`] (checked before anything else), or any error
    /// of [`Message::decode_body`].
    pub fn decode_frame(buf: &[u8], frame_bytes_max: u32) -> Result<(Message, usize), WireError> {
        let prefix: [u8; FRAME_HEADER_BYTES] = Reader::new(buf).array("frame length")?;
        let len = frame_body_len(prefix, frame_bytes_max)?;
        let body = buf.get(FRAME_HEADER_BYTES..).unwrap_or_default();
        let body = body.get(..len).ok_or(WireError::Truncated {
            field: "frame body",
            at: FRAME_HEADER_BYTES,
            need: len,
            have: body.len(),
        })?;
        Ok((Message::decode_body(body)?, FRAME_HEADER_BYTES + len))
    }
}

/// The frame at the start of `buf` and the bytes it took, or `None` while `buf` holds less than
/// a whole frame (for a reader that appends what it receives and parses what is complete).
///
/// # Errors
/// [`WireError::FrameTooLarge`] as soon as the prefix is in (before the body is waited for), or
/// any error of [`Message::decode_body`].
pub fn next_frame(buf: &[u8], frame_bytes_max: u32) -> Result<Option<(Message, usize)>, WireError> {
    let Some(prefix) = buf.first_chunk::<FRAME_HEADER_BYTES>() else { return Ok(None) };
    let len = frame_body_len(*prefix, frame_bytes_max)?;
    let Some(body) = buf.get(FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + len) else {
        return Ok(None);
    };
    Ok(Some((Message::decode_body(body)?, FRAME_HEADER_BYTES + len)))
}

/// The body length a frame's prefix declares, checked against the limit before anything is
/// allocated for the body.
///
/// # Errors
/// [`WireError::FrameTooLarge`].
pub fn frame_body_len(
    prefix: [u8; FRAME_HEADER_BYTES],
    frame_bytes_max: u32,
) -> Result<usize, WireError> {
    let declared = u32::from_le_bytes(prefix);
    let too_large =
        WireError::FrameTooLarge { declared: u64::from(declared), max: frame_bytes_max };
    if declared > frame_bytes_max {
        return Err(too_large);
    }
    usize::try_from(declared).map_err(|_| too_large)
}

/// Handshake messages travel in `Handshake` frames and nothing else does.
fn check_kind(kind: Kind, tag: u8) -> Result<(), WireError> {
    if is_handshake_tag(tag) == (kind == Kind::Handshake) {
        return Ok(());
    }
    Err(WireError::KindMismatch { kind, tag, name: tag::name(tag).unwrap_or("unknown") })
}
