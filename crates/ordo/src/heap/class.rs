//! Size classes and slab layout.
//!
//! A region is cut into 1 MiB slabs. A slab starts with a 64-byte slab header
//! (word 0 = `SLAB_MAGIC | class`), followed by equal slots of `16 + class bytes`: an object header
//! and its payload capacity. Classes grow by quarters of a power of two, so at most ~25% of a slot
//! is padding, and the largest class still fits four objects in a slab.

/// Bytes in a slab.
pub const SLAB_BYTES: usize = 1 << 20;
/// Bytes reserved at the start of every slab for its header.
pub(crate) const SLAB_HEADER_BYTES: usize = 64;
/// The largest object payload, in bytes.
pub const OBJECT_BYTES_MAX: usize = 256 * 1024;
/// Marks a slab header word that names a size class.
pub(crate) const SLAB_MAGIC: u64 = 0x0D0_51AB << 32;

const _: () = assert!(SLAB_BYTES % 4096 == 0);
const _: () = assert!(SLAB_HEADER_BYTES % 8 == 0);
const _: () = assert!((SLAB_BYTES - SLAB_HEADER_BYTES) / (OBJECT_BYTES_MAX + 16) >= 3);

/// Payload capacities of the size classes, ascending.
pub(crate) static CLASSES: [u32; CLASS_COUNT] = class_table();
/// Number of size classes.
pub(crate) const CLASS_COUNT: usize = count_classes();

const fn class_bytes(i: usize) -> usize {
    // 8, 16, 24, 32, 40, 48, 56, 64, then 4 steps per doubling: 80, 96, 112, 128, 160, ...
    if i < 8 {
        (i + 1) * 8
    } else {
        let k = i - 8;
        let base = 64usize << (k / 4);
        base + (base / 4) * (k % 4 + 1)
    }
}

const fn count_classes() -> usize {
    let mut i = 0;
    while class_bytes(i) < OBJECT_BYTES_MAX {
        i += 1;
    }
    i + 1
}

const fn class_table() -> [u32; CLASS_COUNT] {
    let mut t = [0u32; CLASS_COUNT];
    let mut i = 0;
    while i < CLASS_COUNT {
        t[i] = class_bytes(i) as u32;
        i += 1;
    }
    t
}

const _: () = assert!(class_bytes(count_classes() - 1) == OBJECT_BYTES_MAX);

/// The smallest class whose capacity holds `len_bytes`.
pub(crate) fn class_for(len_bytes: usize) -> Option<usize> {
    if len_bytes == 0 || len_bytes > OBJECT_BYTES_MAX {
        return None;
    }
    Some(CLASSES.partition_point(|&c| (c as usize) < len_bytes))
}

/// Slot geometry of a class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Words per slot: header plus payload capacity.
    pub(crate) stride_words: usize,
    /// Slots in one slab.
    pub(crate) slots: usize,
}

impl Geometry {
    pub(crate) fn of(class: usize) -> Geometry {
        let stride_words = 2 + CLASSES[class] as usize / 8;
        Geometry { stride_words, slots: (SLAB_BYTES - SLAB_HEADER_BYTES) / (stride_words * 8) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_ascend_and_cover() {
        assert!(CLASSES.windows(2).all(|w| w[0] < w[1]));
        assert!(CLASSES.iter().all(|c| c % 8 == 0));
        for len in [1usize, 8, 9, 100, 1000, 4096, 100_000, OBJECT_BYTES_MAX] {
            let c = class_for(len).unwrap();
            assert!(CLASSES[c] as usize >= len);
            assert!(c == 0 || (CLASSES[c - 1] as usize) < len);
            assert!(Geometry::of(c).slots >= 3);
        }
        assert_eq!(class_for(0), None);
        assert_eq!(class_for(OBJECT_BYTES_MAX + 1), None);
    }
}
