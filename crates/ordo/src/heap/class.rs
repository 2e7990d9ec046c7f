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

const _: () = assert!(SLAB_BYTES.is_multiple_of(4096));
const _: () = assert!(SLAB_HEADER_BYTES.is_multiple_of(8));
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
    /// `floor(2^RECIPROCAL_SHIFT / stride bytes) + 1`: [`Geometry::slot_of`] divides by a
    /// multiplication (every address check did a hardware division: a tenth of `Heap::object`).
    reciprocal: u64,
}

/// The shift of [`Geometry::reciprocal`]. With offsets below `2^20` and strides below `2^19`
/// bytes, `(n * reciprocal) >> 40` is exactly `n / stride` (Granlund and Montgomery 1994: the
/// reciprocal's error `e <= 1` adds `n * e / 2^40 < 1 / stride` to `n / stride`, too little to
/// reach the next integer) and `n * reciprocal < 2^57` does not overflow.
const RECIPROCAL_SHIFT: u32 = 40;
const _: () = assert!(SLAB_BYTES <= 1 << 20);
const _: () = assert!((OBJECT_BYTES_MAX + 16) < 1 << 19);

impl Geometry {
    pub(crate) const fn of(class: usize) -> Geometry {
        let stride_words = 2 + class_bytes(class) / 8;
        let stride_bytes = stride_words * 8;
        Geometry {
            stride_words,
            slots: (SLAB_BYTES - SLAB_HEADER_BYTES) / stride_bytes,
            reciprocal: (1u64 << RECIPROCAL_SHIFT) / stride_bytes as u64 + 1,
        }
    }

    /// The slot that starts exactly `in_slab` bytes past the slab header (`in_slab <
    /// SLAB_BYTES`), or `None` when `in_slab` is inside a slot or past the last one.
    #[inline]
    pub(crate) fn slot_of(&self, in_slab: usize) -> Option<usize> {
        debug_assert!(in_slab < SLAB_BYTES);
        let slot = ((in_slab as u64 * self.reciprocal) >> RECIPROCAL_SHIFT) as usize;
        (slot * self.stride_words * 8 == in_slab && slot < self.slots).then_some(slot)
    }
}

/// Slot geometry of every class.
pub(crate) static GEOMETRY: [Geometry; CLASS_COUNT] = geometry_table();

const fn geometry_table() -> [Geometry; CLASS_COUNT] {
    let mut t = [Geometry { stride_words: 0, slots: 0, reciprocal: 0 }; CLASS_COUNT];
    let mut i = 0;
    while i < CLASS_COUNT {
        t[i] = Geometry::of(i);
        i += 1;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `slot_of` agrees with division at every offset of a slab, for every class (fails if the
    /// reciprocal is one lower, or with a smaller shift).
    #[test]
    fn slot_of_is_division() {
        for g in GEOMETRY.iter() {
            let stride_bytes = g.stride_words * 8;
            for in_slab in 0..SLAB_BYTES {
                let want = (in_slab % stride_bytes == 0 && in_slab / stride_bytes < g.slots)
                    .then_some(in_slab / stride_bytes);
                if g.slot_of(in_slab) != want {
                    panic!("stride {stride_bytes}, offset {in_slab}: {:?}", g.slot_of(in_slab));
                }
            }
        }
    }

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
        assert!(GEOMETRY.iter().enumerate().all(|(c, g)| *g == Geometry::of(c)));
        assert_eq!(class_for(OBJECT_BYTES_MAX + 1), None);
    }
}
