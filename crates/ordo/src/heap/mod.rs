//! The heap: regions of slabs of equal-sized object slots (FaRM's allocator, FaRMv2 §4.8).
//!
//! * A **region** is `region_bytes` of zero-filled memory with a 16-bit id; regions are created on
//!   demand up to `regions_max` and never move, so an [`Addr`] stays valid forever.
//! * A **slab** (1 MiB) gets a size class the first time it is used and keeps it (slab reuse for
//!   another class waits for the GC safe point, a later issue). Its slots are tracked by a
//!   [`FreeBitmap`]; its class is also written into the slab header in region memory so that
//!   recovery can rebuild the bitmaps from object headers.
//! * Each worker thread **owns** at most one slab per class for allocation, so the common path
//!   touches no shared state but the slab's bitmap. When its slab fills up the worker *abandons* it
//!   and takes another from the class's list of slabs with free slots, or an empty slab. A free into
//!   an abandoned slab puts the slab back on its class's list.
//!
//! Allocation is transactional one level up: the transaction reserves a slot here (`reserve`),
//! makes the object allocated by installing its first version at commit, and `release`s the slot
//! again if it aborts — or, for a free, after installing the unallocated version.
//!
//! # Invariants
//! * A slot reserved by one transaction is never reserved by another until released.
//! * `object()` returns a view only for slot-aligned addresses inside a slab with a class; it never
//!   reads outside the region.

mod class;
pub(crate) mod memory;

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

pub(crate) use class::{CLASS_COUNT, Geometry, class_for};
pub use class::{OBJECT_BYTES_MAX, SLAB_BYTES};

use crate::addr::Addr;
use crate::bitmap::FreeBitmap;
use crate::error::Error;
use crate::object::ObjectRef;
use class::{SLAB_HEADER_BYTES, SLAB_MAGIC};
use memory::RegionMemory;

/// Where slabs come from and how many regions may exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeapConfig {
    /// Bytes per region; a multiple of the 1 MiB slab size. Default 64 MiB.
    pub region_bytes: usize,
    /// The most regions the heap may create. Default 1024 (64 GiB of address space).
    pub regions_max: usize,
}

impl Default for HeapConfig {
    fn default() -> Self {
        HeapConfig { region_bytes: 64 << 20, regions_max: 1024 }
    }
}

impl HeapConfig {
    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.region_bytes == 0 || self.region_bytes % SLAB_BYTES != 0 {
            return Err(Error::Config(format!(
                "region_bytes = {} is not a positive multiple of the slab size {SLAB_BYTES}",
                self.region_bytes
            )));
        }
        if self.region_bytes > 1 << 40 {
            return Err(Error::Config(format!(
                "region_bytes = {} exceeds 1 TiB",
                self.region_bytes
            )));
        }
        if self.regions_max == 0 || self.regions_max > u16::MAX as usize {
            return Err(Error::Config(format!(
                "regions_max = {} is not in 1..={}",
                self.regions_max,
                u16::MAX
            )));
        }
        Ok(())
    }
}

/// Slab allocation states (see the module docs).
const SLAB_OWNED: u8 = 0;
const SLAB_ABANDONED: u8 = 1;
const SLAB_LISTED: u8 = 2;

struct SlabLayout {
    class: usize,
    geometry: Geometry,
    bitmap: FreeBitmap,
}

#[derive(Default)]
struct SlabMeta {
    layout: OnceLock<SlabLayout>,
    state: AtomicU8,
}

struct Region {
    memory: RegionMemory,
    slabs: Box<[SlabMeta]>,
}

/// Identifies a slab: region and slab index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlabId {
    region: u16,
    slab: u32,
}

/// A worker's slabs: at most one owned slab per class.
#[derive(Debug)]
pub(crate) struct AllocCache {
    owned: [Option<SlabId>; CLASS_COUNT],
}

impl Default for AllocCache {
    fn default() -> Self {
        AllocCache { owned: [None; CLASS_COUNT] }
    }
}

/// The heap. See the module docs.
pub(crate) struct Heap {
    config: HeapConfig,
    regions: Box<[OnceLock<Region>]>,
    region_count: AtomicUsize,
    /// Empty slabs never given a class, in creation order (slow path only).
    fresh: Mutex<Vec<SlabId>>,
    /// Per class, slabs that were abandoned full and have had slots freed since.
    partial: Box<[Mutex<Vec<SlabId>>]>,
}

impl Heap {
    pub(crate) fn new(config: HeapConfig) -> Result<Self, Error> {
        config.check()?;
        let heap = Heap {
            config,
            regions: (0..config.regions_max).map(|_| OnceLock::new()).collect(),
            region_count: AtomicUsize::new(0),
            fresh: Mutex::new(Vec::new()),
            partial: (0..CLASS_COUNT).map(|_| Mutex::new(Vec::new())).collect(),
        };
        Ok(heap)
    }

    fn region(&self, id: u16) -> Option<&Region> {
        self.regions.get(id as usize)?.get()
    }

    fn slab_meta(&self, id: SlabId) -> &SlabMeta {
        let region = self.region(id.region).expect("slab ids name existing regions");
        &region.slabs[id.slab as usize]
    }

    /// A view of the object slot at `addr`, if `addr` names one.
    #[inline]
    pub(crate) fn object(&self, addr: Addr) -> Result<ObjectRef<'_>, Error> {
        let bad = || Error::InvalidAddress { addr };
        let region = self.region(addr.region()).ok_or_else(bad)?;
        let offset = addr.offset() as usize;
        let slab = offset / SLAB_BYTES;
        let meta = region.slabs.get(slab).ok_or_else(bad)?;
        let layout = meta.layout.get().ok_or_else(bad)?;
        let in_slab = (offset % SLAB_BYTES).checked_sub(SLAB_HEADER_BYTES).ok_or_else(bad)?;
        let stride_bytes = layout.geometry.stride_words * 8;
        if in_slab % stride_bytes != 0 || in_slab / stride_bytes >= layout.geometry.slots {
            return Err(bad());
        }
        let first = offset / 8;
        let words = &region.memory.words()[first..first + layout.geometry.stride_words];
        Ok(ObjectRef::new(words))
    }

    /// Reserves a free slot for an object of `len_bytes`, preferring the worker's own slab.
    pub(crate) fn reserve(&self, cache: &mut AllocCache, len_bytes: usize) -> Result<Addr, Error> {
        let class = match class_for(len_bytes) {
            Some(c) => c,
            None if len_bytes == 0 => return Err(Error::ZeroSize),
            None => {
                return Err(Error::TooLarge { len_bytes, max_bytes: OBJECT_BYTES_MAX });
            }
        };
        loop {
            if let Some(id) = cache.owned[class] {
                let layout = self.layout(id);
                if let Some(slot) = layout.bitmap.take() {
                    return Ok(self.slot_addr(id, layout, slot));
                }
                // Full: abandon it. A free that lands after this store lists it again.
                self.slab_meta(id).state.store(SLAB_ABANDONED, Ordering::Release);
                cache.owned[class] = None;
                // A free may have happened between take() and the store above without listing
                // the slab; re-check once so such a slot is not stranded.
                if layout.bitmap.count_free() > 0 {
                    self.list_partial(id, class);
                }
            }
            cache.owned[class] = Some(self.adopt_slab(class)?);
        }
    }

    /// Returns the slot at `addr` to its slab's free set.
    pub(crate) fn release(&self, addr: Addr) {
        let region = self.region(addr.region()).expect("released addresses were reserved");
        let offset = addr.offset() as usize;
        let slab = (offset / SLAB_BYTES) as u32;
        let id = SlabId { region: addr.region(), slab };
        let meta = &region.slabs[slab as usize];
        let layout = meta.layout.get().expect("released addresses lie in classed slabs");
        let slot = (offset % SLAB_BYTES - SLAB_HEADER_BYTES) / (layout.geometry.stride_words * 8);
        layout.bitmap.put(slot);
        if meta.state.load(Ordering::Acquire) == SLAB_ABANDONED {
            self.list_partial(id, layout.class);
        }
    }

    fn list_partial(&self, id: SlabId, class: usize) {
        let meta = self.slab_meta(id);
        if meta
            .state
            .compare_exchange(SLAB_ABANDONED, SLAB_LISTED, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            self.partial[class].lock().unwrap_or_else(|e| e.into_inner()).push(id);
        }
    }

    fn layout(&self, id: SlabId) -> &SlabLayout {
        self.slab_meta(id).layout.get().expect("owned slabs have a layout")
    }

    fn slot_addr(&self, id: SlabId, layout: &SlabLayout, slot: usize) -> Addr {
        let offset = id.slab as usize * SLAB_BYTES
            + SLAB_HEADER_BYTES
            + slot * layout.geometry.stride_words * 8;
        Addr::new(id.region, offset as u64)
    }

    /// Takes a listed partial slab of `class`, or gives a fresh slab that class.
    fn adopt_slab(&self, class: usize) -> Result<SlabId, Error> {
        {
            let mut list = self.partial[class].lock().unwrap_or_else(|e| e.into_inner());
            if let Some(id) = list.pop() {
                self.slab_meta(id).state.store(SLAB_OWNED, Ordering::Release);
                return Ok(id);
            }
        }
        let id = self.fresh_slab()?;
        let region = self.region(id.region).expect("fresh slabs name existing regions");
        let geometry = Geometry::of(class);
        let meta = &region.slabs[id.slab as usize];
        let installed = meta.layout.set(SlabLayout {
            class,
            geometry,
            bitmap: FreeBitmap::new_all_free(geometry.slots),
        });
        debug_assert!(installed.is_ok(), "fresh slabs have no layout yet");
        meta.state.store(SLAB_OWNED, Ordering::Release);
        let header_word = id.slab as usize * SLAB_BYTES / 8;
        region.memory.words()[header_word].store(SLAB_MAGIC | class as u64, Ordering::Release);
        Ok(id)
    }

    fn fresh_slab(&self) -> Result<SlabId, Error> {
        let mut fresh = self.fresh.lock().unwrap_or_else(|e| e.into_inner());
        if fresh.is_empty() {
            let id = self.region_count.load(Ordering::Acquire);
            if id >= self.config.regions_max {
                return Err(Error::OutOfMemory {
                    regions: id,
                    region_bytes: self.config.region_bytes,
                });
            }
            let bytes = self.config.region_bytes;
            let memory = RegionMemory::anonymous(bytes).map_err(|e| Error::RegionMap {
                region: id as u16,
                bytes,
                reason: e.to_string(),
            })?;
            let slab_count = bytes / SLAB_BYTES;
            let region =
                Region { memory, slabs: (0..slab_count).map(|_| SlabMeta::default()).collect() };
            if self.regions[id].set(region).is_err() {
                unreachable!("region ids are handed out under the fresh-slab lock");
            }
            self.region_count.store(id + 1, Ordering::Release);
            fresh.extend(
                (0..slab_count as u32).rev().map(|slab| SlabId { region: id as u16, slab }),
            );
        }
        Ok(fresh.pop().expect("refilled above"))
    }

    /// Gives up every slab `cache` owns (its worker is going away).
    pub(crate) fn abandon(&self, cache: &mut AllocCache) {
        for (class, owned) in cache.owned.iter_mut().enumerate() {
            if let Some(id) = owned.take() {
                self.slab_meta(id).state.store(SLAB_ABANDONED, Ordering::Release);
                if self.layout(id).bitmap.count_free() > 0 {
                    self.list_partial(id, class);
                }
            }
        }
    }

    /// Number of regions created so far.
    pub(crate) fn region_count(&self) -> usize {
        self.region_count.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Heap {
        Heap::new(HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 2 }).unwrap()
    }

    #[test]
    fn reserve_gives_distinct_valid_slots_and_runs_out_cleanly() {
        let heap = small();
        let mut cache = AllocCache::default();
        let mut seen = std::collections::BTreeSet::new();
        loop {
            match heap.reserve(&mut cache, 200_000) {
                Ok(a) => {
                    assert!(seen.insert(a));
                    assert!(heap.object(a).is_ok());
                    assert!(heap.object(Addr::from_raw(a.to_raw() + 8)).is_err());
                }
                Err(Error::OutOfMemory { regions, .. }) => {
                    assert_eq!(regions, 2);
                    break;
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert_eq!(seen.len(), 8 * Geometry::of(class_for(200_000).unwrap()).slots);
        let a = *seen.iter().next().unwrap();
        heap.release(a);
        assert_eq!(heap.reserve(&mut cache, 200_000).unwrap(), a);
    }

    #[test]
    fn bad_sizes_and_addresses_are_errors() {
        let heap = small();
        let mut cache = AllocCache::default();
        assert_eq!(heap.reserve(&mut cache, 0), Err(Error::ZeroSize));
        assert!(matches!(
            heap.reserve(&mut cache, OBJECT_BYTES_MAX + 1),
            Err(Error::TooLarge { .. })
        ));
        for raw in
            [0u64, 8, 64, u64::MAX, Addr::new(1, 64).to_raw(), Addr::new(0, 1 << 40).to_raw()]
        {
            assert!(matches!(heap.object(Addr::from_raw(raw)), Err(Error::InvalidAddress { .. })));
        }
        let bad = HeapConfig { region_bytes: 1000, regions_max: 1 };
        assert!(matches!(Heap::new(bad), Err(Error::Config(_))));
    }
}
