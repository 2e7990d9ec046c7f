//! The field encoding: a [`Writer`] that appends little-endian fields and a [`Reader`] whose
//! every read is bounds-checked, plus the [`Field`] trait that ties a Rust type to its bytes.
//!
//! | type | bytes |
//! |---|---|
//! | `u8`, `u16`, `u32`, `u64` | 1, 2, 4, 8, little-endian |
//! | `f64` | the IEEE-754 bits as a little-endian `u64` |
//! | `bool` | one byte, 0 or 1 (anything else is [`WireError::BadBool`]) |
//! | `[u8; N]` | the `N` bytes |
//! | `String` | `u32` byte length (at most [`STRING_BYTES_MAX`]), then UTF-8 |
//! | `Option<T>` | one flag byte, 0 (absent) or 1 (present, then `T`) |
//! | `(A, B)` | `A` then `B` |
//! | `Vec<T>` | `u32` count, then the elements |
//!
//! # Invariants
//! * A read never looks past the end of its input: each returns [`WireError::Truncated`]
//!   (naming the field, offset and lengths) instead.
//! * Nothing is allocated that the input does not pay for: a string's length is checked
//!   against the limit and the remaining bytes, and a sequence's count times the smallest
//!   encoding of its element ([`Field::WIRE_BYTES_MIN`]) against the remaining bytes, before
//!   the string or vector is allocated. A decoded `Vec<T>` therefore occupies at most
//!   `size_of::<T>() / T::WIRE_BYTES_MIN` times the bytes it was decoded from: under 3 for
//!   every sequence in [`super::Body`] (`(String, f64)`: 32 bytes from at least 12).
//! * Integer conversions go through `try_from` with a typed error, never `as`.

use super::{STRING_BYTES_MAX, WireError};

/// Appends fields to a byte buffer.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer that appends to `buf` (which may already hold bytes, e.g. a frame prefix).
    pub fn from_vec(buf: Vec<u8>) -> Self {
        Self { buf }
    }

    /// Bytes written so far (including any the buffer started with).
    pub fn position(&self) -> usize {
        self.buf.len()
    }

    /// The bytes written.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    /// The bytes written, mutably (to patch a length prefix).
    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// Appends raw bytes.
    pub fn bytes(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }

    /// Appends a byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    /// Appends a little-endian `u16`.
    pub fn u16(&mut self, v: u16) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends a little-endian `u32`.
    pub fn u32(&mut self, v: u32) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends a little-endian `u64`.
    pub fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }

    /// Appends an `f64` as its bits, so every value (NaN payloads included) round-trips.
    pub fn f64(&mut self, v: f64) {
        self.u64(v.to_bits());
    }

    /// Appends a bool as 0 or 1.
    pub fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }

    /// Appends a `u32` length prefix.
    ///
    /// # Errors
    /// [`WireError::LengthOverflow`] if `len` does not fit in a `u32`.
    pub fn len_prefix(&mut self, field: &'static str, len: usize) -> Result<(), WireError> {
        let at = self.position();
        let len = u32::try_from(len).map_err(|_| WireError::LengthOverflow { field, at, len })?;
        self.u32(len);
        Ok(())
    }

    /// Appends a length-prefixed UTF-8 string.
    ///
    /// # Errors
    /// [`WireError::StringTooLong`] above [`STRING_BYTES_MAX`] bytes.
    pub fn str(&mut self, field: &'static str, s: &str) -> Result<(), WireError> {
        if s.len() > STRING_BYTES_MAX {
            return Err(WireError::StringTooLong {
                field,
                at: self.position(),
                len: u64::try_from(s.len()).unwrap_or(u64::MAX),
                max: STRING_BYTES_MAX,
            });
        }
        self.len_prefix(field, s.len())?;
        self.bytes(s.as_bytes());
        Ok(())
    }
}

/// Reads fields from a byte slice; every read is bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Offset of the next byte to read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if fewer remain.
    pub fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], WireError> {
        let at = self.pos;
        let have = self.remaining();
        if n > have {
            return Err(WireError::Truncated { field, at, need: n, have });
        }
        let out = &self.buf[at..at + n];
        self.pos = at + n;
        debug_assert!(self.pos <= self.buf.len());
        Ok(out)
    }

    /// The next `N` bytes as an array.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if fewer remain.
    pub fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(field, N)?);
        Ok(out)
    }

    /// A byte.
    ///
    /// # Errors
    /// [`WireError::Truncated`] at the end of the input.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        let [b] = self.array::<1>(field)?;
        Ok(b)
    }

    /// A little-endian `u16`.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if fewer than 2 bytes remain.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, WireError> {
        self.array(field).map(u16::from_le_bytes)
    }

    /// A little-endian `u32`.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if fewer than 4 bytes remain.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        self.array(field).map(u32::from_le_bytes)
    }

    /// A little-endian `u64`.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if fewer than 8 bytes remain.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, WireError> {
        self.array(field).map(u64::from_le_bytes)
    }

    /// An `f64` from its bits.
    ///
    /// # Errors
    /// [`WireError::Truncated`] if fewer than 8 bytes remain.
    pub fn f64(&mut self, field: &'static str) -> Result<f64, WireError> {
        self.u64(field).map(f64::from_bits)
    }

    /// A bool (0 or 1).
    ///
    /// # Errors
    /// [`WireError::Truncated`], or [`WireError::BadBool`] for any other byte.
    pub fn bool(&mut self, field: &'static str) -> Result<bool, WireError> {
        let at = self.pos;
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(WireError::BadBool { field, at, value }),
        }
    }

    /// A length-prefixed UTF-8 string, allocated only once its length has been checked against
    /// the limit and the remaining input and its bytes have been validated.
    ///
    /// # Errors
    /// [`WireError::Truncated`], [`WireError::StringTooLong`] or [`WireError::BadUtf8`].
    pub fn str(&mut self, field: &'static str) -> Result<String, WireError> {
        let at = self.pos;
        let len = self.u32(field)?;
        let len_bytes = usize::try_from(len).unwrap_or(usize::MAX);
        if len_bytes > STRING_BYTES_MAX {
            return Err(WireError::StringTooLong {
                field,
                at,
                len: u64::from(len),
                max: STRING_BYTES_MAX,
            });
        }
        let bytes_at = self.pos;
        let bytes = self.take(field, len_bytes)?;
        let s = std::str::from_utf8(bytes).map_err(|e| WireError::BadUtf8 {
            field,
            at: bytes_at,
            valid_up_to: e.valid_up_to(),
        })?;
        Ok(s.to_owned())
    }

    /// A sequence's `u32` element count, checked so that `count * element_bytes_min` bytes
    /// remain: the caller may then reserve `count` elements.
    ///
    /// # Errors
    /// [`WireError::Truncated`] or [`WireError::SequenceTooLong`].
    pub fn seq_len(
        &mut self,
        field: &'static str,
        element_bytes_min: usize,
    ) -> Result<usize, WireError> {
        debug_assert!(element_bytes_min > 0, "a zero-sized element would make any count fit");
        let at = self.pos;
        let count = self.u32(field)?;
        let have = self.remaining();
        let too_long = WireError::SequenceTooLong {
            field,
            at,
            count: u64::from(count),
            element_bytes_min,
            have,
        };
        let count = usize::try_from(count).map_err(|_| too_long)?;
        match count.checked_mul(element_bytes_min) {
            Some(need) if need <= have => Ok(count),
            _ => Err(too_long),
        }
    }
}

/// A type with a fixed wire encoding, usable as a message field.
pub trait Field: Sized {
    /// The fewest bytes any value of the type encodes to (at least 1); a sequence of `n`
    /// elements needs at least `n * WIRE_BYTES_MIN` bytes, which bounds what decoding it may
    /// allocate.
    const WIRE_BYTES_MIN: usize;

    /// Appends the value.
    ///
    /// # Errors
    /// A string or sequence too long for its prefix or limit.
    fn put(&self, w: &mut Writer, field: &'static str) -> Result<(), WireError>;

    /// Reads a value.
    ///
    /// # Errors
    /// Truncated or malformed input, naming `field`.
    fn get(r: &mut Reader<'_>, field: &'static str) -> Result<Self, WireError>;
}

macro_rules! int_field {
    ($($ty:ident),*) => {$(
        impl Field for $ty {
            const WIRE_BYTES_MIN: usize = std::mem::size_of::<$ty>();
            fn put(&self, w: &mut Writer, _field: &'static str) -> Result<(), WireError> {
                w.$ty(*self);
                Ok(())
            }
            fn get(r: &mut Reader<'_>, field: &'static str) -> Result<Self, WireError> {
                r.$ty(field)
            }
        }
    )*};
}

int_field!(u8, u16, u32, u64, f64, bool);

impl<const N: usize> Field for [u8; N] {
    const WIRE_BYTES_MIN: usize = {
        assert!(N > 0, "a zero-length array field carries nothing");
        N
    };
    fn put(&self, w: &mut Writer, _field: &'static str) -> Result<(), WireError> {
        w.bytes(self);
        Ok(())
    }
    fn get(r: &mut Reader<'_>, field: &'static str) -> Result<Self, WireError> {
        r.array(field)
    }
}

impl Field for String {
    const WIRE_BYTES_MIN: usize = 4;
    fn put(&self, w: &mut Writer, field: &'static str) -> Result<(), WireError> {
        w.str(field, self)
    }
    fn get(r: &mut Reader<'_>, field: &'static str) -> Result<Self, WireError> {
        r.str(field)
    }
}

impl<T: Field> Field for Option<T> {
    const WIRE_BYTES_MIN: usize = 1;
    fn put(&self, w: &mut Writer, field: &'static str) -> Result<(), WireError> {
        match self {
            None => {
                w.u8(0);
                Ok(())
            }
            Some(v) => {
                w.u8(1);
                v.put(w, field)
            }
        }
    }
    fn get(r: &mut Reader<'_>, field: &'static str) -> Result<Self, WireError> {
        let at = r.position();
        match r.u8(field)? {
            0 => Ok(None),
            1 => T::get(r, field).map(Some),
            value => Err(WireError::BadOption { field, at, value }),
        }
    }
}

impl<A: Field, B: Field> Field for (A, B) {
    const WIRE_BYTES_MIN: usize = A::WIRE_BYTES_MIN + B::WIRE_BYTES_MIN;
    fn put(&self, w: &mut Writer, field: &'static str) -> Result<(), WireError> {
        self.0.put(w, field)?;
        self.1.put(w, field)
    }
    fn get(r: &mut Reader<'_>, field: &'static str) -> Result<Self, WireError> {
        Ok((A::get(r, field)?, B::get(r, field)?))
    }
}

impl<T: Field> Field for Vec<T> {
    const WIRE_BYTES_MIN: usize = 4;
    fn put(&self, w: &mut Writer, field: &'static str) -> Result<(), WireError> {
        w.len_prefix(field, self.len())?;
        self.iter().try_for_each(|v| v.put(w, field))
    }
    fn get(r: &mut Reader<'_>, field: &'static str) -> Result<Self, WireError> {
        let count = r.seq_len(field, T::WIRE_BYTES_MIN)?;
        // Bounded: seq_len checked count * WIRE_BYTES_MIN <= remaining input.
        let mut out = Vec::with_capacity(count);
        for _ in 0..count {
            out.push(T::get(r, field)?);
        }
        Ok(out)
    }
}
