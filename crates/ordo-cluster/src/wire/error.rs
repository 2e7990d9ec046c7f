//! What can be wrong with a frame, and where.
//!
//! Every variant names the field or frame part that failed and its byte offset. Offsets of
//! body errors count from the first byte of the body (the version byte); frame errors
//! (`frame length`, `frame body`) count from the first byte of the frame. No variant owns
//! heap memory, so building one while decoding hostile input allocates nothing.

use super::Kind;

/// A frame or message that cannot be encoded or decoded.
#[derive(thiserror::Error, Clone, Copy, PartialEq, Eq, Debug)]
pub enum WireError {
    /// A frame's declared (or, when encoding, actual) body length is above the limit. Checked
    /// on the 4-byte prefix, before any buffer for the body exists.
    #[error("frame declares {declared} body bytes, above the limit of {max}")]
    FrameTooLarge {
        /// The body length the frame declares (or would declare).
        declared: u64,
        /// The configured limit, `Limits::frame_bytes_max`.
        max: u32,
    },
    /// A read ran past the end of its input.
    #[error("truncated reading {field} at byte {at}: need {need} bytes, {have} remain")]
    Truncated {
        /// The field (or frame part) being read.
        field: &'static str,
        /// Where the read started.
        at: usize,
        /// Bytes the read needed.
        need: usize,
        /// Bytes that remained.
        have: usize,
    },
    /// The body's first byte is not [`super::PROTOCOL_VERSION`].
    #[error("protocol version {found} at byte 0, expected {expected}")]
    BadVersion {
        /// The version byte found.
        found: u8,
        /// The version this build speaks.
        expected: u8,
    },
    /// The kind byte (byte 1) names no [`Kind`].
    #[error("unknown message kind {kind} at byte 1")]
    UnknownKind {
        /// The kind byte found.
        kind: u8,
    },
    /// The tag byte names no message.
    #[error("unknown message tag {tag:#04x} at byte {at}")]
    UnknownTag {
        /// The tag byte found.
        tag: u8,
        /// Its offset.
        at: usize,
    },
    /// A handshake message outside a `Handshake` frame, or an application message inside one.
    #[error("a {kind:?} frame cannot carry {name} (tag {tag:#04x})")]
    KindMismatch {
        /// The frame's kind.
        kind: Kind,
        /// The message's tag.
        tag: u8,
        /// The message's name.
        name: &'static str,
    },
    /// Bytes left over after the last field of a message.
    #[error("{extra} trailing bytes at byte {at} after message {name} (tag {tag:#04x})")]
    TrailingBytes {
        /// The message's tag.
        tag: u8,
        /// The message's name.
        name: &'static str,
        /// Offset of the first extra byte.
        at: usize,
        /// How many bytes were left.
        extra: usize,
    },
    /// A string longer than [`super::STRING_BYTES_MAX`].
    #[error("string {field} at byte {at} is {len} bytes, above the limit of {max}")]
    StringTooLong {
        /// The field.
        field: &'static str,
        /// Offset of its length prefix.
        at: usize,
        /// Its length in bytes.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// A string whose bytes are not UTF-8.
    #[error("string {field} at byte {at} is not UTF-8 (valid for {valid_up_to} bytes)")]
    BadUtf8 {
        /// The field.
        field: &'static str,
        /// Offset of its first byte.
        at: usize,
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// A sequence whose element count cannot fit in the bytes that remain, even at the
    /// smallest encoding of an element. Checked before anything is allocated for it.
    #[error(
        "sequence {field} at byte {at} declares {count} elements of at least \
         {element_bytes_min} bytes each, but {have} bytes remain"
    )]
    SequenceTooLong {
        /// The field.
        field: &'static str,
        /// Offset of its count prefix.
        at: usize,
        /// The declared count.
        count: u64,
        /// The smallest encoding of one element.
        element_bytes_min: usize,
        /// Bytes that remained after the count.
        have: usize,
    },
    /// A boolean byte other than 0 or 1.
    #[error("bool {field} at byte {at} is {value}, neither 0 nor 1")]
    BadBool {
        /// The field.
        field: &'static str,
        /// Its offset.
        at: usize,
        /// The byte found.
        value: u8,
    },
    /// An option flag byte other than 0 (absent) or 1 (present).
    #[error("option flag of {field} at byte {at} is {value}, neither 0 nor 1")]
    BadOption {
        /// The field.
        field: &'static str,
        /// Its offset.
        at: usize,
        /// The byte found.
        value: u8,
    },
    /// Encoding only: a string or sequence too long for its `u32` length prefix.
    #[error("{field} at byte {at} has {len} elements, more than a u32 length prefix can carry")]
    LengthOverflow {
        /// The field.
        field: &'static str,
        /// Offset its prefix would have had.
        at: usize,
        /// Its length.
        len: usize,
    },
}
