//! The object header protocol: how one object is read, locked, validated and installed.
//!
//! An object is a 16-byte header followed by its payload, all `AtomicU64` words:
//!
//! ```text
//! word 0:  63: LOCK | 62: ALLOC | 61..0: write timestamp of the head version (ns)
//! word 1:  63..40: payload length in bytes | 39..0: old-version pointer (0 = none)
//! word 2.. payload, ceil(len / 8) words, zero-padded
//! ```
//!
//! Readers never write; they use a seqlock-style check (DESIGN §3): load word 0 (`Acquire`),
//! copy word 1 and the payload with `Relaxed` loads, `fence(Acquire)`, reload word 0 and retry if
//! it changed. Every access is atomic, so a torn copy is a discarded value, never a data race.
//!
//! Writers follow FaRMv2 Alg. 2: `try_lock` (CAS on word 0 setting LOCK, only if the version is
//! what the transaction expects), then — after the coordinator has drawn `wts` and validated —
//! `install` (store payload and word 1, then word 0 = ALLOC | wts with `Release`, which clears
//! LOCK), or `unlock` (restore word 0 exactly) when the transaction aborts.
//!
//! # Invariants
//! * Word 0 changes only by the lock holder, and only `unlocked -> locked -> unlocked`.
//! * While word 0 is unchanged and unlocked, words 1.. are unchanged: every payload store sits
//!   between a LOCK acquisition and the `Release` store that ends it.
//! * The write timestamps of one object's successive versions strictly increase (the next
//!   writer's `wts` is drawn after it observed the previous version unlocked).
//!
//! This file holds the layout and [`Header`]; the steps themselves are `ObjectRef`'s
//! (`object/object_ref.rs`), which only the crate calls (and, in the loom build, its models).

use ordo_clock::Timestamp;

mod copy;
#[cfg_attr(not(loom), allow(unreachable_pub))]
mod object_ref;
// The reader and writer steps are the engine's own: heap, old versions and participants call
// them. Only the loom build makes them public, for its models of the protocol
// (`tests/loom_object.rs`); that build is the crate as those models see it.
#[cfg(not(loom))]
pub(crate) use object_ref::{LockFail, ObjectRef, ReadFail};
#[cfg(loom)]
pub use object_ref::{LockFail, ObjectRef, ReadFail, Snapshot};

/// Bit 63 of word 0: the object is locked by a committing transaction.
pub(crate) const LOCK_BIT: u64 = 1 << 63;
/// Bit 62 of word 0: the object is allocated.
pub(crate) const ALLOC_BIT: u64 = 1 << 62;
/// Bits 0..62 of word 0: the write timestamp.
pub(crate) const TS_MASK: u64 = ALLOC_BIT - 1;
/// Words of header in front of every payload.
pub const HEADER_WORDS: usize = 2;

/// How many of a payload's bytes are in use, given its first word (little-endian bytes 0..8):
/// for reads that may skip an unused tail (`ObjectRef::read_used`). Answers past the payload
/// are capped; the answer for a torn word is discarded by the seqlock check.
pub type UsedBytes = fn(u64) -> usize;

pub(crate) const LEN_SHIFT: u32 = 40;
const OVP_MASK: u64 = (1 << LEN_SHIFT) - 1;
/// The largest payload length word 1 can describe.
pub const PAYLOAD_BYTES_MAX: usize = (1 << (64 - LEN_SHIFT)) - 1;

/// Timestamps must leave the two flag bits free.
const _: () = assert!(TS_MASK == (1 << 62) - 1);

/// Splits word 1 into (payload length in bytes, old-version pointer).
#[inline]
pub(crate) fn split_word1(w1: u64) -> (usize, u64) {
    ((w1 >> LEN_SHIFT) as usize, w1 & OVP_MASK)
}

/// A decoded word 0.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Header(u64);

impl Header {
    /// Decodes a raw word 0.
    #[inline]
    pub const fn from_raw(raw: u64) -> Self {
        Header(raw)
    }
    /// The raw word.
    #[inline]
    pub const fn raw(self) -> u64 {
        self.0
    }
    /// Whether a committing transaction holds the lock.
    #[inline]
    pub const fn is_locked(self) -> bool {
        self.0 & LOCK_BIT != 0
    }
    /// Whether the object is allocated in its head version.
    #[inline]
    pub const fn is_allocated(self) -> bool {
        self.0 & ALLOC_BIT != 0
    }
    /// The write timestamp of the head version.
    #[inline]
    pub const fn ts(self) -> Timestamp {
        Timestamp::from_nanos(self.0 & TS_MASK)
    }
    /// The unlocked header of a version written at `ts`.
    #[inline]
    pub fn version(ts: Timestamp, allocated: bool) -> Self {
        debug_assert!(ts.as_nanos() <= TS_MASK, "timestamp {ts:?} does not fit a header");
        Header((ts.as_nanos() & TS_MASK) | if allocated { ALLOC_BIT } else { 0 })
    }
}

/// What a writer requires of the head version before it locks the object.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Expect {
    /// The object was read at exactly this version (and was allocated).
    Version(Timestamp),
    /// A blind write: allocated, version no newer than the read timestamp.
    NotAfter(Timestamp),
    /// An allocation: the slot is free (the allocator reserved it for this transaction).
    Free,
}
