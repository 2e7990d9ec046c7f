//! [`View`]: in-place, read-only access to an object's payload for [`super::Tx::read_view`].
//!
//! A view over the head version reads the shared words with `Relaxed` atomic loads inside the
//! seqlock check of `ObjectRef::read_view`, so reading a field of a large object touches only the
//! cache lines of that field. A view over buffered or old-version data reads a private copy.

use std::sync::atomic::{AtomicU64, Ordering};

/// Read-only access to one version of an object's payload.
#[derive(Clone, Copy)]
pub struct View<'a> {
    repr: Repr<'a>,
    len_bytes: usize,
}

#[derive(Clone, Copy)]
enum Repr<'a> {
    Shared(&'a [AtomicU64]),
    Owned(&'a [u64]),
}

impl<'a> View<'a> {
    pub(crate) fn shared(words: &'a [AtomicU64], len_bytes: usize) -> Self {
        View { repr: Repr::Shared(words), len_bytes }
    }

    pub(crate) fn owned(words: &'a [u64], len_bytes: usize) -> Self {
        View { repr: Repr::Owned(words), len_bytes }
    }

    /// Payload length in bytes.
    pub fn len(&self) -> usize {
        self.len_bytes
    }

    /// Whether the payload is empty.
    pub fn is_empty(&self) -> bool {
        self.len_bytes == 0
    }

    /// Payload word `i` (bytes `8i..8i+8`, little-endian, zero-padded past the length).
    #[inline]
    pub fn word(&self, i: usize) -> Option<u64> {
        match self.repr {
            // Relaxed: ordered by the seqlock fences of ObjectRef::read_view.
            Repr::Shared(w) => w.get(i).map(|w| w.load(Ordering::Relaxed)),
            Repr::Owned(w) => w.get(i).copied(),
        }
    }

    /// Copies bytes `offset..offset + dst.len()` into `dst`; `None` when out of range.
    pub fn copy_to(&self, offset: usize, dst: &mut [u8]) -> Option<()> {
        let end = offset.checked_add(dst.len())?;
        if end > self.len_bytes {
            return None;
        }
        for (k, byte) in dst.iter_mut().enumerate() {
            let at = offset + k;
            *byte = self.word(at / 8)?.to_le_bytes()[at % 8];
        }
        Some(())
    }
}

impl std::fmt::Debug for View<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("View").field("len_bytes", &self.len_bytes).finish_non_exhaustive()
    }
}
