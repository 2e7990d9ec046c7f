//! Object addresses: `(region, offset)` packed in a `u64` that never changes for an object's life.
//!
//! ```text
//!  63            48 47                                            0
//! +----------------+-----------------------------------------------+
//! |   region id    |        byte offset of the object header       |
//! +----------------+-----------------------------------------------+
//! ```
//! Offsets are multiples of 8. Address 0 (region 0, offset 0) is the first slab's header and
//! never names an object, so it doubles as the null address of data structures.

use std::fmt;

const OFFSET_BITS: u32 = 48;
const OFFSET_MASK: u64 = (1 << OFFSET_BITS) - 1;

/// The address of an object in the heap.
#[derive(
    Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, bytemuck::Pod, bytemuck::Zeroable,
)]
#[repr(transparent)]
pub struct Addr(u64);

impl Addr {
    /// The null address; no object ever lives there.
    pub const NULL: Addr = Addr(0);

    /// The address of the object whose header is at `offset` bytes into region `region`.
    #[inline]
    pub const fn new(region: u16, offset: u64) -> Self {
        Addr(((region as u64) << OFFSET_BITS) | (offset & OFFSET_MASK))
    }

    /// Reinterprets a raw value (for example one stored inside another object) as an address.
    /// Nothing is checked here; every heap access validates the address it is given.
    #[inline]
    pub const fn from_raw(raw: u64) -> Self {
        Addr(raw)
    }

    /// The raw packed value.
    #[inline]
    pub const fn to_raw(self) -> u64 {
        self.0
    }

    /// The region id.
    #[inline]
    pub const fn region(self) -> u16 {
        (self.0 >> OFFSET_BITS) as u16
    }

    /// The byte offset of the object header inside its region.
    #[inline]
    pub const fn offset(self) -> u64 {
        self.0 & OFFSET_MASK
    }

    /// Whether this is [`Addr::NULL`].
    #[inline]
    pub const fn is_null(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{:#x}", self.region(), self.offset())
    }
}

impl fmt::Display for Addr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packs_and_unpacks() {
        let a = Addr::new(7, 0x1234_5678);
        assert_eq!(a.region(), 7);
        assert_eq!(a.offset(), 0x1234_5678);
        assert_eq!(Addr::from_raw(a.to_raw()), a);
        assert!(Addr::NULL.is_null());
        assert!(!a.is_null());
    }
}
