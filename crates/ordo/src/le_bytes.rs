//! Bounds-checked little-endian reads of on-heap layouts.
//!
//! The indexes' decoders ([`crate::map`]'s buckets and directory, [`crate::tree`]'s nodes) read
//! integers at offsets that come from bytes they do not trust. These readers return `None`
//! instead of panicking when the integer does not lie wholly inside the slice (an offset near
//! `usize::MAX` included); each caller turns `None` into its own corruption error, naming the
//! object it was decoding.

/// The `N` bytes at `off`, or `None` if they do not lie wholly inside `b`.
#[inline]
fn get_array<const N: usize>(b: &[u8], off: usize) -> Option<[u8; N]> {
    b.get(off..off.checked_add(N)?)?.try_into().ok()
}

/// The little-endian `u64` at `off`, or `None` if it does not lie wholly inside `b`.
#[inline]
pub(crate) fn get_u64(b: &[u8], off: usize) -> Option<u64> {
    get_array(b, off).map(u64::from_le_bytes)
}

/// The little-endian `u32` at `off`, or `None` if it does not lie wholly inside `b`.
#[inline]
pub(crate) fn get_u32(b: &[u8], off: usize) -> Option<u32> {
    get_array(b, off).map(u32::from_le_bytes)
}

/// The little-endian `u16` at `off`, or `None` if it does not lie wholly inside `b`.
#[inline]
pub(crate) fn get_u16(b: &[u8], off: usize) -> Option<u16> {
    get_array(b, off).map(u16::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_inside_and_refuses_outside() {
        let b = [1u8, 2, 3, 4, 5, 6, 7, 8, 9];
        assert_eq!(get_u16(&b, 0), Some(0x0201));
        assert_eq!(get_u32(&b, 1), Some(0x0504_0302));
        assert_eq!(get_u64(&b, 1), Some(0x0908_0706_0504_0302));
        assert_eq!(get_u16(&b, 7), Some(0x0908));
        assert_eq!(get_u16(&b, 8), None);
        assert_eq!(get_u32(&b, 6), None);
        assert_eq!(get_u64(&b, 2), None);
        assert_eq!(get_u64(&b, usize::MAX - 3), None);
        assert_eq!(get_u16(&[], 0), None);
    }
}
