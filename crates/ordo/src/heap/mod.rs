//! The heap: regions of slabs of equal-sized object slots (FaRM's allocator, FaRMv2 §4.8).
//!
//! * A **region** is `region_bytes` of zero-filled memory with a 16-bit id; regions are created on
//!   demand up to `regions_max` and never move, so an [`Addr`] stays valid forever.
//! * A **slab** (1 MiB) gets a size class when it is first used. Its slots are tracked by a
//!   `FreeBitmap` (`crate::bitmap`); its class is also written into the slab header in region memory so that
//!   recovery can rebuild the bitmaps from object headers.
//! * A slab whose objects are all free is **reclaimed** for any size class once the GC safe point
//!   passes its last free (FaRMv2 §4.8, `reclaim_slabs`): then no transaction can still read its
//!   old objects. An allocation in the meantime keeps it. `live` counts reserved and allocated
//!   slots (and allocators pinned on the slab); the reclaim swaps it from 0 to a sentinel, so it
//!   cannot race an allocation; a generation number lets workers and candidate lists recognise
//!   references to a slab that was reclaimed under them. A reclaimed slab is zeroed, so the next
//!   class finds clean headers.
//! * Each worker thread **owns** at most one slab per class for allocation, so the common path
//!   touches no shared state but the slab's bitmap. When its slab fills up the worker *abandons* it
//!   and takes another from the class's list of slabs with free slots, or an empty slab. A free into
//!   an abandoned slab puts the slab back on its class's list.
//!
//! Allocation is transactional one level up: the transaction reserves a slot here (`reserve`),
//! makes the object allocated by installing its first version at commit, and `release`s the slot
//! again if it aborts — or, for a free, after installing the unallocated version.
//!
//! A durable heap's regions are files: a new region's file is made through `RegionFiles`, a
//! seam defined here and implemented by the durable layer above (`crate::durable`'s heap
//! files), so the heap never names that layer.
//!
//! # Invariants
//! * A slot reserved by one transaction is never reserved by another until released.
//! * `object()` returns a view only for slot-aligned addresses inside a slab with a class; it never
//!   reads outside the region.

mod class;
pub(crate) mod memory;
mod prefault;

use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

pub(crate) use class::{CLASS_COUNT, GEOMETRY, class_for};
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
    /// Whether an in-memory heap's regions (and a multi-version database's old-version blocks)
    /// ask for transparent huge pages (`MADV_HUGEPAGE`; advice only, and only where THP is set
    /// to `madvise` or `always`). Default `true`. Durable heaps map their region files and
    /// ignore this.
    ///
    /// Huge pages pay where work wanders over a heap larger than the TLB's reach: STAMP
    /// vacation's `--size large` client phase (four trees of 1 M rows) ran 0.83× as fast at 2
    /// threads without them, and TPC-C NewOrder+Payment with its heap faulted in ahead
    /// ([`crate::Ordo::pretouch_heap`]) 0.72–0.96×. They can cost where the heap *grows* while
    /// it works and nothing was faulted in ahead: each fresh huge page is 2 MiB zeroed in one
    /// fault, and on a VM whose host backs guest memory lazily that fault is the host's too. On
    /// a 2-vCPU Firecracker guest one TPC-C profile spent a quarter of its CPU zeroing fresh huge
    /// pages, and runs without huge pages were 0.98–1.4× as fast, varying with the host's state.
    /// (Session 27, `docs/results/2026-11-29-s27-huge-pages.txt`.)
    pub huge_pages: bool,
}

impl Default for HeapConfig {
    fn default() -> Self {
        HeapConfig { region_bytes: 64 << 20, regions_max: 1024, huge_pages: true }
    }
}

impl HeapConfig {
    pub(crate) fn check(&self) -> Result<(), Error> {
        if self.region_bytes == 0 || !self.region_bytes.is_multiple_of(SLAB_BYTES) {
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

/// `SlabMeta::class` of a slab without a size class.
const NO_CLASS: u32 = u32::MAX;
/// `SlabMeta::live` of a slab being reclaimed: pins fail while it is set.
const RECLAIMING: u64 = 1 << 62;

struct SlabMeta {
    /// The size class, or `NO_CLASS`. Changes only while the slab is reclaimed.
    class: AtomicU32,
    /// Bumped by every reclaim, so stale references (worker caches, candidates) are recognised.
    generation: AtomicU32,
    /// Slots reserved or allocated, plus one per allocator pinned on the slab; `RECLAIMING`
    /// while reclaimed.
    live: AtomicU64,
    /// The largest write timestamp of a free in this slab: when it became empty, at the latest.
    last_free_ts: AtomicU64,
    state: AtomicU8,
    /// Sized for the smallest class on first use, then reset for each class.
    bitmap: OnceLock<FreeBitmap>,
}

impl Default for SlabMeta {
    fn default() -> Self {
        SlabMeta {
            class: AtomicU32::new(NO_CLASS),
            generation: AtomicU32::new(0),
            live: AtomicU64::new(0),
            last_free_ts: AtomicU64::new(0),
            state: AtomicU8::new(SLAB_OWNED),
            bitmap: OnceLock::new(),
        }
    }
}

impl SlabMeta {
    /// Counts one more user unless the slab is being reclaimed.
    fn pin(&self) -> bool {
        // Acquire: pairs with the Release store that ends a reclaim, so a pinned allocator sees
        // the new class, generation and bitmap.
        self.live
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |v| {
                if v >= RECLAIMING { None } else { Some(v + 1) }
            })
            .is_ok()
    }

    fn bitmap(&self) -> &FreeBitmap {
        self.bitmap.get_or_init(|| FreeBitmap::new_all_taken(GEOMETRY[0].slots))
    }
}

struct Region {
    /// Shared with the prefaulter while it advises it.
    memory: std::sync::Arc<RegionMemory>,
    slabs: Box<[SlabMeta]>,
}

/// Identifies a slab: region and slab index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlabId {
    region: u16,
    slab: u32,
}

/// A worker's slabs: at most one owned slab per class, with the generation it was adopted in.
#[derive(Debug)]
pub(crate) struct AllocCache {
    owned: [Option<(SlabId, u32)>; CLASS_COUNT],
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
    /// Empty slabs without a class: never used, or reclaimed (slow path only).
    fresh: Mutex<Vec<SlabId>>,
    /// Per class, slabs that were abandoned full and have had slots freed since.
    partial: Box<[Mutex<Vec<SlabId>>]>,
    /// Slabs that became empty, with their generation then: reclaim candidates.
    emptied: Mutex<Vec<(SlabId, u32)>>,
    reclaimed: AtomicU64,
    /// Heap files of a durable database: new regions get a file each.
    backing: Option<std::sync::Arc<dyn RegionFiles>>,
    /// A cluster node's home regions (those it is primary of), in the order allocation uses
    /// them; `None` creates regions 0, 1, 2, … (the embedded engine).
    home: Mutex<Option<Vec<u16>>>,
    /// Faults fresh slabs in ahead of their adoption (started with the first fresh slab).
    prefaulter: OnceLock<Option<prefault::Prefaulter>>,
}

/// Where a durable heap's new regions come from: one file per region, made and recorded
/// before the region is used. The heap defines the seam and the durable layer above it
/// implements it (`crate::durable`'s heap files), so the heap never names that layer.
pub(crate) trait RegionFiles: Send + Sync {
    /// Creates region `id`'s file of `bytes` zeros, makes it durable, and returns its working
    /// copy.
    fn create_region(&self, id: u16, bytes: usize) -> Result<RegionMemory, Error>;
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What [`rebuild_slab`] found a slab to be.
enum SlabState {
    /// No class: a fresh slab.
    Fresh,
    /// Classed, with free slots: listed as partial.
    Partial(usize),
    /// Classed and full.
    Full,
}

/// Rebuilds slab `slab` of `region`'s allocator state from its memory: the class from the slab
/// header word, the free bitmap and the live count from the object headers' ALLOC bits. Only
/// for a region nobody allocates in yet (a durable heap being opened, a backup copy being
/// promoted).
fn rebuild_slab(region: &Region, slab: usize) -> SlabState {
    let word = region.memory.words()[slab * SLAB_BYTES / 8].load(Ordering::Relaxed);
    let class = (word & 0xFFFF_FFFF) as usize;
    if word & !0xFFFF_FFFF != SLAB_MAGIC || class >= CLASS_COUNT {
        return SlabState::Fresh;
    }
    let meta = &region.slabs[slab];
    let g = GEOMETRY[class];
    let bitmap = meta.bitmap();
    bitmap.reset_all_free(g.slots);
    for _ in 0..g.slots {
        bitmap.take();
    }
    let mut live = 0;
    for i in 0..g.slots {
        let first = (slab * SLAB_BYTES + SLAB_HEADER_BYTES) / 8 + i * g.stride_words;
        let w0 = region.memory.words()[first].load(Ordering::Relaxed);
        if crate::object::Header::from_raw(w0).is_allocated() {
            live += 1;
        } else {
            bitmap.put(i);
        }
    }
    meta.live.store(live, Ordering::Relaxed);
    // Release: pairs with the Acquire class loads in object()/release().
    meta.class.store(class as u32, Ordering::Release);
    if (live as usize) < g.slots {
        meta.state.store(SLAB_LISTED, Ordering::Release);
        SlabState::Partial(class)
    } else {
        meta.state.store(SLAB_ABANDONED, Ordering::Release);
        SlabState::Full
    }
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
            emptied: Mutex::new(Vec::new()),
            reclaimed: AtomicU64::new(0),
            backing: None,
            home: Mutex::new(None),
            prefaulter: OnceLock::new(),
        };
        Ok(heap)
    }

    /// A durable heap over `regions` (mapped heap files, recovered, by region id; `None` for an
    /// id this heap never created): slab classes come from the slab header words, free bitmaps
    /// and live counts from the object headers' ALLOC bits.
    pub(crate) fn durable(
        config: HeapConfig,
        files: std::sync::Arc<dyn RegionFiles>,
        regions: Vec<Option<RegionMemory>>,
    ) -> Result<Self, Error> {
        let mut heap = Heap::new(config)?;
        heap.backing = Some(files);
        if regions.len() > config.regions_max {
            return Err(Error::Config(format!(
                "the database has {} regions, more than regions_max = {}",
                regions.len(),
                config.regions_max
            )));
        }
        let slab_count = config.region_bytes / SLAB_BYTES;
        let mut fresh = Vec::new();
        for (id, memory) in regions.into_iter().enumerate() {
            let Some(memory) = memory else { continue };
            let region = Region {
                memory: std::sync::Arc::new(memory),
                slabs: (0..slab_count).map(|_| SlabMeta::default()).collect(),
            };
            for slab in (0..slab_count).rev() {
                let sid = SlabId { region: id as u16, slab: slab as u32 };
                match rebuild_slab(&region, slab) {
                    SlabState::Fresh => fresh.push(sid),
                    SlabState::Partial(class) => lock(&heap.partial[class]).push(sid),
                    SlabState::Full => {}
                }
            }
            if heap.regions[id].set(region).is_err() {
                unreachable!("each region is installed once");
            }
        }
        heap.region_count
            .store(heap.regions.iter().filter(|r| r.get().is_some()).count(), Ordering::Release);
        *lock(&heap.fresh) = fresh;
        Ok(heap)
    }

    /// The slab header word of the slab holding `addr` and its address (logged with allocations
    /// so recovery knows the slab's class).
    pub(crate) fn slab_word(&self, addr: Addr) -> Option<(Addr, u64)> {
        let region = self.region(addr.region())?;
        let slab = addr.offset() as usize / SLAB_BYTES;
        let word = region.memory.words().get(slab * SLAB_BYTES / 8)?.load(Ordering::Relaxed);
        Some((Addr::new(addr.region(), (slab * SLAB_BYTES) as u64), word))
    }

    fn region(&self, id: u16) -> Option<&Region> {
        self.regions.get(id as usize)?.get()
    }

    fn slab_meta(&self, id: SlabId) -> &SlabMeta {
        let region = self.region(id.region).expect("slab ids name existing regions");
        &region.slabs[id.slab as usize]
    }

    /// Asks the CPU to start loading the object slot at `addr` (header and payload capacity)
    /// into its caches; nothing when `addr` names no slot here. See `RegionMemory::prefetch`.
    #[inline]
    pub(crate) fn prefetch(&self, addr: Addr) {
        if let Ok(words) = self.slot_words(addr) {
            memory::RegionMemory::prefetch(words);
        }
    }

    /// A view of the object slot at `addr`, if `addr` names one.
    #[inline]
    pub(crate) fn object(&self, addr: Addr) -> Result<ObjectRef<'_>, Error> {
        self.slot_words(addr).map(ObjectRef::new)
    }

    /// The words of the object slot at `addr`, if `addr` names one.
    #[inline]
    fn slot_words(&self, addr: Addr) -> Result<&[AtomicU64], Error> {
        let bad = || Error::InvalidAddress { addr };
        let region = self.region(addr.region()).ok_or_else(bad)?;
        let offset = addr.offset() as usize;
        let slab = offset / SLAB_BYTES;
        let meta = region.slabs.get(slab).ok_or_else(bad)?;
        // Acquire: pairs with the Release store of the class in adopt_slab().
        let class = meta.class.load(Ordering::Acquire);
        let geometry = GEOMETRY.get(class as usize).ok_or_else(bad)?;
        let in_slab = (offset % SLAB_BYTES).checked_sub(SLAB_HEADER_BYTES).ok_or_else(bad)?;
        geometry.slot_of(in_slab).ok_or_else(bad)?;
        let first = offset / 8;
        Ok(&region.memory.words()[first..first + geometry.stride_words])
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
            if let Some((id, generation)) = cache.owned[class] {
                let meta = self.slab_meta(id);
                if meta.pin() {
                    if meta.generation.load(Ordering::Acquire) == generation {
                        if let Some(slot) = meta.bitmap().take() {
                            // The pin becomes the reserved slot's count.
                            return Ok(self.slot_addr(id, class, slot));
                        }
                        // Full: abandon it. A free that lands after this store lists it again.
                        meta.state.store(SLAB_ABANDONED, Ordering::Release);
                        // A free between take() and the store above did not list the slab;
                        // re-check once so such a slot is not stranded.
                        if meta.bitmap().count_free() > 0 {
                            self.list_partial(id, class);
                        }
                    }
                    self.unpin(id, meta, generation);
                }
                cache.owned[class] = None;
            }
            cache.owned[class] = Some(self.adopt_slab(class)?);
        }
    }

    /// Drops one count from `live` on behalf of a user of generation `generation`; the slab is
    /// a reclaim candidate when none is left and that generation is still current. A pin taken
    /// on a slab reclaimed since (a stale worker cache) is dropped without making it one, so a
    /// slab is never reclaimed twice for one emptying.
    fn unpin(&self, id: SlabId, meta: &SlabMeta, generation: u32) {
        // AcqRel: pairs with the reclaimer's CAS from 0; the bitmap update before this is seen.
        if meta.live.fetch_sub(1, Ordering::AcqRel) == 1
            && meta.generation.load(Ordering::Acquire) == generation
            && meta.class.load(Ordering::Acquire) != NO_CLASS
        {
            lock(&self.emptied).push((id, generation));
        }
    }

    /// Returns the slot at `addr` to its slab's free set; `freed_at` is the write timestamp of
    /// the free (`None` when an allocation was abandoned before it became visible).
    pub(crate) fn release(&self, addr: Addr, freed_at: Option<ordo_clock::Timestamp>) {
        let region = self.region(addr.region()).expect("released addresses were reserved");
        let offset = addr.offset() as usize;
        let slab = (offset / SLAB_BYTES) as u32;
        let id = SlabId { region: addr.region(), slab };
        let meta = &region.slabs[slab as usize];
        let class = meta.class.load(Ordering::Acquire) as usize;
        let geometry = GEOMETRY[class];
        let slot = (offset % SLAB_BYTES - SLAB_HEADER_BYTES) / (geometry.stride_words * 8);
        meta.bitmap().put(slot);
        if let Some(ts) = freed_at {
            meta.last_free_ts.fetch_max(ts.as_nanos(), Ordering::AcqRel);
        }
        if meta.state.load(Ordering::Acquire) == SLAB_ABANDONED {
            self.list_partial(id, class);
        }
        // The slot was reserved in the current generation: a slab with live slots is never
        // reclaimed.
        self.unpin(id, meta, meta.generation.load(Ordering::Acquire));
    }

    fn list_partial(&self, id: SlabId, class: usize) {
        let meta = self.slab_meta(id);
        if meta
            .state
            .compare_exchange(SLAB_ABANDONED, SLAB_LISTED, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            lock(&self.partial[class]).push(id);
        }
    }

    fn slot_addr(&self, id: SlabId, class: usize, slot: usize) -> Addr {
        let offset = id.slab as usize * SLAB_BYTES
            + SLAB_HEADER_BYTES
            + slot * GEOMETRY[class].stride_words * 8;
        Addr::new(id.region, offset as u64)
    }

    /// Takes a listed partial slab of `class`, or gives a fresh slab that class.
    fn adopt_slab(&self, class: usize) -> Result<(SlabId, u32), Error> {
        if let Some(id) = lock(&self.partial[class]).pop() {
            let meta = self.slab_meta(id);
            meta.state.store(SLAB_OWNED, Ordering::Release);
            return Ok((id, meta.generation.load(Ordering::Acquire)));
        }
        let id = self.fresh_slab()?;
        let region = self.region(id.region).expect("fresh slabs name existing regions");
        let meta = &region.slabs[id.slab as usize];
        // The slab is ours alone: unclassed, live == 0, on no list.
        meta.bitmap().reset_all_free(GEOMETRY[class].slots);
        meta.state.store(SLAB_OWNED, Ordering::Relaxed);
        let header_word = id.slab as usize * SLAB_BYTES / 8;
        region.memory.words()[header_word].store(SLAB_MAGIC | class as u64, Ordering::Relaxed);
        // Release: pairs with the Acquire class loads in object()/release().
        meta.class.store(class as u32, Ordering::Release);
        Ok((id, meta.generation.load(Ordering::Acquire)))
    }

    fn fresh_slab(&self) -> Result<SlabId, Error> {
        let mut fresh = lock(&self.fresh);
        if fresh.is_empty() {
            fresh.extend(self.new_region_slabs()?);
            // The slabs the next adoptions take (the one taken below faults on first use).
            let top = fresh.len().saturating_sub(prefault::PREFAULT_AHEAD_SLABS)..fresh.len() - 1;
            for &ahead in &fresh[top] {
                self.prefault(ahead);
            }
        }
        let taken = fresh.pop().expect("refilled above");
        // The slab adopted PREFAULT_AHEAD_SLABS adoptions from now (module docs of `prefault`).
        if let Some(i) = fresh.len().checked_sub(prefault::PREFAULT_AHEAD_SLABS) {
            self.prefault(fresh[i]);
        }
        Ok(taken)
    }

    /// Creates the next region and returns its slabs as the fresh stack holds them: the last
    /// one is taken first, so slab 0 comes last.
    fn new_region_slabs(&self) -> Result<impl Iterator<Item = SlabId> + use<>, Error> {
        let id = self.next_region()?;
        self.create_region(id)?;
        let slab_count = (self.config.region_bytes / SLAB_BYTES) as u32;
        Ok((0..slab_count).rev().map(move |slab| SlabId { region: id as u16, slab }))
    }

    /// Faults in fresh slabs now, on the calling thread, until at least `bytes` of them wait
    /// for allocation (creating regions ahead of need for it); returns the fresh bytes faulted
    /// in. See [`crate::Ordo::pretouch_heap`]. Allocation waits meanwhile (the fresh stack's
    /// lock is held): call it before the work.
    pub(crate) fn pretouch(&self, bytes: usize) -> Result<usize, Error> {
        let mut fresh = lock(&self.fresh);
        while fresh.len() * SLAB_BYTES < bytes {
            // Below the slabs already waiting: the stack is taken from its end, in region order.
            let ahead = self.new_region_slabs()?;
            fresh.splice(0..0, ahead);
        }
        for slab in fresh.iter() {
            if let Some(region) = self.region(slab.region) {
                region.memory.prefault(slab.slab as usize * SLAB_BYTES, SLAB_BYTES);
            }
        }
        Ok(fresh.len() * SLAB_BYTES)
    }

    /// Asks the prefaulter to fault `slab` in ahead of its first store.
    fn prefault(&self, slab: SlabId) {
        let Some(prefaulter) = self.prefaulter.get_or_init(prefault::Prefaulter::start) else {
            return;
        };
        if let Some(region) = self.region(slab.region) {
            let offset = slab.slab as usize * SLAB_BYTES;
            prefaulter.request(region.memory.clone(), offset, SLAB_BYTES);
        }
    }

    /// Fresh slabs the prefaulter has faulted in so far (tests).
    #[cfg(test)]
    fn prefaulted_slabs(&self) -> u64 {
        self.prefaulter.get().and_then(Option::as_ref).map_or(0, prefault::Prefaulter::done)
    }

    /// The id of the next region allocation may open: the next unused one in order, or — on a
    /// cluster node — the next home region not yet created.
    fn next_region(&self) -> Result<usize, Error> {
        let created = self.region_count.load(Ordering::Acquire);
        let out_of_memory =
            || Error::OutOfMemory { regions: created, region_bytes: self.config.region_bytes };
        match &*lock(&self.home) {
            None if created >= self.config.regions_max => Err(out_of_memory()),
            None => Ok(created),
            Some(home) => home
                .iter()
                .map(|&r| r as usize)
                .find(|&r| r < self.regions.len() && self.regions[r].get().is_none())
                .ok_or_else(out_of_memory),
        }
    }

    /// Creates region `id` (zero-filled, no slab classed). Callers hold the fresh-slab lock or
    /// the backup lock; the `OnceLock` makes a second creation of one id harmless.
    fn create_region(&self, id: usize) -> Result<&Region, Error> {
        let Some(cell) = self.regions.get(id) else {
            return Err(Error::InvalidAddress { addr: Addr::new(id as u16, 0) });
        };
        if let Some(region) = cell.get() {
            return Ok(region);
        }
        let bytes = self.config.region_bytes;
        let memory = match &self.backing {
            Some(files) => files.create_region(id as u16, bytes)?,
            None => RegionMemory::anonymous(bytes, self.config.huge_pages).map_err(|e| {
                Error::RegionMap { region: id as u16, bytes, reason: e.to_string() }
            })?,
        };
        let slab_count = bytes / SLAB_BYTES;
        let region = Region {
            memory: std::sync::Arc::new(memory),
            slabs: (0..slab_count).map(|_| SlabMeta::default()).collect(),
        };
        if cell.set(region).is_ok() {
            self.region_count.fetch_add(1, Ordering::AcqRel);
        }
        Ok(cell.get().expect("set above or by the racing creator"))
    }

    /// Makes this heap a cluster node's: allocation opens only `home` regions (those the node
    /// is primary of), in that order. Regions already created stay.
    pub(crate) fn set_home_regions(&self, home: Vec<u16>) {
        // A recovered heap listed the free slabs of every region it holds, backups included:
        // allocation keeps only the home regions'.
        lock(&self.fresh).retain(|s| home.contains(&s.region));
        for class in self.partial.iter() {
            lock(class).retain(|s| home.contains(&s.region));
        }
        *lock(&self.home) = Some(home);
    }

    /// Creates region `id` here if it does not exist yet (a backup's copy: in a durable
    /// database, its heap file exists before any record for it is logged, so the checkpointer
    /// has somewhere to write its images).
    pub(crate) fn ensure_region(&self, id: u16) -> Result<(), Error> {
        self.create_region(id as usize).map(drop)
    }

    /// Makes region `id` — a backup copy until now — a home region of this node: its
    /// allocator state is rebuilt from the objects' headers ([`rebuild_slab`]) and allocation
    /// may use it. The caller guarantees no backup write lands in it any more.
    pub(crate) fn promote_region(&self, id: u16) -> Result<(), Error> {
        let region = self.create_region(id as usize)?;
        let mut fresh = Vec::new();
        for slab in (0..region.slabs.len()).rev() {
            let sid = SlabId { region: id, slab: slab as u32 };
            match rebuild_slab(region, slab) {
                SlabState::Fresh => fresh.push(sid),
                SlabState::Partial(class) => lock(&self.partial[class]).push(sid),
                SlabState::Full => {}
            }
        }
        // Fresh slabs go below the ones already listed: the home regions in use fill first.
        let mut listed = lock(&self.fresh);
        fresh.append(&mut listed);
        *listed = fresh;
        if let Some(home) = lock(&self.home).as_mut()
            && !home.contains(&id)
        {
            home.push(id);
        }
        Ok(())
    }

    /// The slab header word an allocation of `len_bytes` at `addr` implies, and the slab's
    /// address: what a backup logs with it (it has no allocator state of the primary's).
    pub(crate) fn implied_slab_word(addr: Addr, len_bytes: usize) -> Option<(Addr, u64)> {
        let class = class_for(len_bytes)?;
        let slab = addr.offset() as usize / SLAB_BYTES;
        Some((Addr::new(addr.region(), (slab * SLAB_BYTES) as u64), SLAB_MAGIC | class as u64))
    }

    /// Whether allocation may open regions here: always in the embedded engine; on a cluster
    /// member, when it is primary of some region (a client is of none).
    pub(crate) fn has_home_regions(&self) -> bool {
        lock(&self.home).as_ref().is_none_or(|h| !h.is_empty())
    }

    /// Applies one write of a transaction this node backs up (Cluster II, FaRMv2 §3: backups
    /// apply at truncation and keep no old versions): the object image at `addr` becomes
    /// version `wts` (unallocated for a free) with `payload`, unless the slot already holds a
    /// newer version (truncations of two transactions may arrive out of order). The length
    /// names the slab's size class; a slab the primary reclaimed for another class since is
    /// zeroed first, as the primary's reclaim did.
    ///
    /// Checks everything it is given: a region outside `regions_max`, an offset that is not a
    /// slot of the class, or a payload that does not fit is an error and changes nothing.
    pub(crate) fn apply_backup(
        &self,
        addr: Addr,
        alloc: bool,
        allocated: bool,
        wts: ordo_clock::Timestamp,
        len_bytes: usize,
        payload: &[u64],
    ) -> Result<(), Error> {
        let bad = || Error::InvalidAddress { addr };
        if payload.len() != len_bytes.div_ceil(8) {
            return Err(Error::CorruptObject { addr, len_bytes });
        }
        let region = self.create_region(addr.region() as usize)?;
        let offset = addr.offset() as usize;
        let slab = offset / SLAB_BYTES;
        let meta = region.slabs.get(slab).ok_or_else(bad)?;
        // The slab's class follows from the object's length. A slab this copy never classed
        // takes it (writes of one transaction may be applied before its allocation's, when
        // truncations arrive out of order); an allocation into a slab of another class means
        // the primary reclaimed and reclassed it: zero it as the reclaim did. Any other write
        // into a slab of another class is older than that reclaim and is dropped.
        let class = class_for(len_bytes).ok_or_else(bad)?;
        let have = meta.class.load(Ordering::Acquire);
        if have != class as u32 {
            if have != NO_CLASS && !alloc {
                return Ok(());
            }
            let first = slab * SLAB_BYTES / 8;
            let words = &region.memory.words()[first..first + SLAB_BYTES / 8];
            if have != NO_CLASS {
                for w in words {
                    w.store(0, Ordering::Relaxed);
                }
            }
            words[0].store(SLAB_MAGIC | class as u64, Ordering::Relaxed);
            // Release: pairs with the Acquire class load in object().
            meta.class.store(class as u32, Ordering::Release);
        }
        let obj = self.object(addr)?;
        if obj.capacity_bytes() < len_bytes {
            return Err(Error::CorruptObject { addr, len_bytes });
        }
        // Skipped when a newer version arrived first; checked and installed as one step.
        obj.overwrite_if_newer(wts, allocated, len_bytes, payload);
        Ok(())
    }

    /// The addresses of region `id`'s allocated objects, ascending (empty when the region does
    /// not exist here). A scan of the headers as they are: an object allocated or freed
    /// meanwhile may be listed or not.
    pub(crate) fn allocated_in(&self, id: u16) -> Vec<Addr> {
        let Some(region) = self.region(id) else { return Vec::new() };
        let mut out = Vec::new();
        for (slab, meta) in region.slabs.iter().enumerate() {
            let class = meta.class.load(Ordering::Acquire) as usize;
            let Some(g) = GEOMETRY.get(class) else { continue };
            for i in 0..g.slots {
                let offset = slab * SLAB_BYTES + SLAB_HEADER_BYTES + i * g.stride_words * 8;
                let w0 = region.memory.words()[offset / 8].load(Ordering::Acquire);
                if crate::object::Header::from_raw(w0).is_allocated() {
                    out.push(Addr::new(id, offset as u64));
                }
            }
        }
        out
    }

    /// A digest of region `id`'s committed contents: every allocated object's address, version,
    /// length and payload (old-version pointers and lock bits left out: a primary keeps old
    /// versions, its backups do not). `None` when the region does not exist here. Equal digests
    /// on a primary and its backups are the replication invariant.
    pub(crate) fn region_digest(&self, id: u16) -> Option<u64> {
        use std::hash::Hasher;
        let region = self.region(id)?;
        let mut h = rustc_hash::FxHasher::default();
        for (slab, meta) in region.slabs.iter().enumerate() {
            let class = meta.class.load(Ordering::Acquire) as usize;
            let Some(g) = GEOMETRY.get(class) else { continue };
            for i in 0..g.slots {
                let first = (slab * SLAB_BYTES + SLAB_HEADER_BYTES) / 8 + i * g.stride_words;
                let words = &region.memory.words()[first..first + g.stride_words];
                let obj = ObjectRef::new(words);
                let header = obj.header();
                if !header.is_allocated() {
                    continue;
                }
                let len = obj.head_len_bytes();
                h.write_u64(first as u64);
                h.write_u64(header.ts().as_nanos());
                h.write_u64(len as u64);
                for w in &words[crate::object::HEADER_WORDS..][..len.div_ceil(8)] {
                    h.write_u64(w.load(Ordering::Relaxed));
                }
            }
        }
        Some(h.finish())
    }

    /// Gives up every slab `cache` owns (its worker is going away).
    pub(crate) fn abandon(&self, cache: &mut AllocCache) {
        for (class, owned) in cache.owned.iter_mut().enumerate() {
            if let Some((id, generation)) = owned.take() {
                let meta = self.slab_meta(id);
                if meta.pin() {
                    if meta.generation.load(Ordering::Acquire) == generation {
                        meta.state.store(SLAB_ABANDONED, Ordering::Release);
                        if meta.bitmap().count_free() > 0 {
                            self.list_partial(id, class);
                        }
                    }
                    self.unpin(id, meta, generation);
                }
            }
        }
    }

    /// Reclaims every emptied slab whose last free is at or below the GC safe point `below` (FaRMv2
    /// §4.8): no transaction can still read its objects, so it may take another size class.
    /// A slab allocated from again in the meantime is kept. Returns how many were reclaimed.
    pub(crate) fn reclaim_slabs(&self, below: ordo_clock::Timestamp) -> usize {
        if self.backing.is_some() {
            // Durable heaps keep slab classes (see crate::durable: a reclaim is not logged).
            return 0;
        }
        let candidates = std::mem::take(&mut *lock(&self.emptied));
        let mut waiting = Vec::new();
        let mut reclaimed = 0;
        for (id, generation) in candidates {
            let meta = self.slab_meta(id);
            if meta.generation.load(Ordering::Acquire) != generation
                || meta.class.load(Ordering::Acquire) == NO_CLASS
            {
                continue; // already reclaimed, or being adopted
            }
            // A reader at `below` or later sees every free in the slab (versions at or below
            // its read timestamp), so it never reads the old objects.
            if meta.last_free_ts.load(Ordering::Acquire) > below.as_nanos() {
                waiting.push((id, generation));
                continue;
            }
            // AcqRel: pairs with unpin()'s fetch_sub; fails if anyone allocated or pinned since.
            if meta
                .live
                .compare_exchange(0, RECLAIMING, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
            {
                continue; // allocation during the wait keeps the slab
            }
            // Check the last free again now that nobody can allocate: the slab may have been
            // allocated from and emptied again since the check above (ABA on `live`).
            if meta.last_free_ts.load(Ordering::Acquire) > below.as_nanos() {
                meta.live.store(0, Ordering::Release);
                waiting.push((id, generation));
                continue;
            }
            let class = meta.class.load(Ordering::Acquire) as usize;
            if class < CLASS_COUNT {
                lock(&self.partial[class]).retain(|s| *s != id);
            }
            meta.generation.fetch_add(1, Ordering::AcqRel);
            meta.class.store(NO_CLASS, Ordering::Release);
            meta.last_free_ts.store(0, Ordering::Relaxed);
            // Zero the slab so the next class finds clean object headers. No transaction reads
            // it: every active read timestamp is above its last free.
            let region = self.region(id.region).expect("slab ids name existing regions");
            let first = id.slab as usize * SLAB_BYTES / 8;
            for w in &region.memory.words()[first..first + SLAB_BYTES / 8] {
                w.store(0, Ordering::Relaxed);
            }
            // Release: ends the reclaim; pairs with pin()'s Acquire.
            meta.live.store(0, Ordering::Release);
            lock(&self.fresh).push(id);
            reclaimed += 1;
        }
        lock(&self.emptied).extend(waiting);
        self.reclaimed.fetch_add(reclaimed as u64, Ordering::Relaxed);
        reclaimed
    }

    /// Slabs reclaimed for reuse so far.
    pub(crate) fn slabs_reclaimed(&self) -> u64 {
        self.reclaimed.load(Ordering::Relaxed)
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
        Heap::new(HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 2, ..Default::default() })
            .unwrap()
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
        assert_eq!(seen.len(), 8 * GEOMETRY[class_for(200_000).unwrap()].slots);
        let a = *seen.iter().next().unwrap();
        heap.release(a, None);
        assert_eq!(heap.reserve(&mut cache, 200_000).unwrap(), a);
    }

    /// The `VmFlags` line of the mapping in `/proc/self/smaps` that holds `addr`.
    #[cfg(target_os = "linux")]
    fn vm_flags_at(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().and_then(|r| r.split_once('-'));
            if let Some((lo, hi)) = range
                && let (Ok(lo), Ok(hi)) =
                    (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
            {
                inside = (lo..hi).contains(&addr);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.to_string();
            }
        }
        panic!("no mapping holds {addr:#x}")
    }

    /// `HeapConfig::huge_pages` decides whether a region's memory is advised for transparent
    /// huge pages (`hg` in the kernel's flags for the mapping), whatever THP's system setting.
    /// A kernel built without THP refuses the advice, so there only `false` is checked.
    #[cfg(target_os = "linux")]
    #[test]
    fn huge_pages_advice_follows_the_config() {
        let thp_built = std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists();
        for huge_pages in [true, false].into_iter().filter(|&h| thp_built || !h) {
            let config = HeapConfig { region_bytes: 4 * SLAB_BYTES, regions_max: 1, huge_pages };
            let heap = Heap::new(config).unwrap();
            heap.reserve(&mut AllocCache::default(), 64).unwrap();
            let words = heap.region(0).unwrap().memory.words().as_ptr().addr();
            let flags = vm_flags_at(words);
            assert_eq!(flags.split_whitespace().any(|f| f == "hg"), huge_pages, "{flags}");
        }
    }

    /// `pretouch` creates regions ahead so that at least the asked bytes of fresh slabs wait,
    /// faults them in keeping their zeros, and allocation then takes the slabs in region order
    /// (the ones already waiting first), creating no region until they are used up; past
    /// `regions_max` it is `OutOfMemory`.
    #[test]
    fn pretouch_creates_regions_ahead_and_allocation_uses_them_in_order() {
        let heap = Heap::new(HeapConfig {
            region_bytes: 4 * SLAB_BYTES,
            regions_max: 3,
            ..Default::default()
        })
        .unwrap();
        let mut cache = AllocCache::default();
        let per_slab = GEOMETRY[class_for(200_000).unwrap()].slots;
        let first = heap.reserve(&mut cache, 200_000).unwrap();
        assert_eq!(slab_of(first), (0, 0));
        assert_eq!(heap.pretouch(5 * SLAB_BYTES).unwrap(), 7 * SLAB_BYTES);
        assert_eq!(heap.region_count(), 2);
        for (region, slab) in [(0u16, 1usize), (1, 3)] {
            let words = heap.region(region).unwrap().memory.words();
            let at = slab * SLAB_BYTES / 8;
            assert!(words[at..at + SLAB_BYTES / 8].iter().all(|w| w.load(Ordering::Relaxed) == 0));
        }
        let mut slabs = vec![slab_of(first)];
        for _ in 1..8 * per_slab {
            let s = slab_of(heap.reserve(&mut cache, 200_000).unwrap());
            if slabs.last() != Some(&s) {
                slabs.push(s);
            }
        }
        assert_eq!(slabs, [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]);
        assert_eq!(heap.region_count(), 2, "a region was created while pretouched ones waited");
        assert!(matches!(
            heap.pretouch(100 * SLAB_BYTES),
            Err(Error::OutOfMemory { regions: 3, .. })
        ));
    }

    /// Adopting fresh slabs asks for the ones a few adoptions ahead to be faulted in, and the
    /// background thread does so without changing what they hold.
    #[test]
    fn fresh_slabs_are_prefaulted_ahead_and_keep_their_zeros() {
        let heap = Heap::new(HeapConfig {
            region_bytes: 16 * SLAB_BYTES,
            regions_max: 1,
            ..Default::default()
        })
        .unwrap();
        let mut cache = AllocCache::default();
        // 8 adoptions of fresh slabs.
        let per_slab = GEOMETRY[class_for(200_000).unwrap()].slots;
        let addrs: Vec<Addr> =
            (0..8 * per_slab).map(|_| heap.reserve(&mut cache, 200_000).unwrap()).collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while heap.prefaulted_slabs() < 8 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(heap.prefaulted_slabs() >= 8, "{} prefaulted", heap.prefaulted_slabs());
        // Slabs prefaulted but not adopted yet still read as zeros past their header word.
        let region = heap.region(0).unwrap();
        let words = region.memory.words();
        for slab in 8..11 {
            let first = slab * SLAB_BYTES / 8;
            assert!(
                words[first..first + SLAB_BYTES / 8].iter().all(|w| w.load(Ordering::Relaxed) == 0)
            );
        }
        assert_eq!(
            addrs.iter().map(|a| slab_of(*a)).collect::<std::collections::BTreeSet<_>>().len(),
            8
        );
    }

    fn slab_of(a: Addr) -> (u16, u64) {
        (a.region(), a.offset() / SLAB_BYTES as u64)
    }

    fn ts(n: u64) -> ordo_clock::Timestamp {
        ordo_clock::Timestamp::from_nanos(n)
    }

    /// A slab emptied twice between GC rounds is listed twice; it must be reclaimed (and handed
    /// out) once, and a stale worker cache naming its old generation must not list it again.
    #[test]
    fn a_slab_emptied_twice_is_reclaimed_once() {
        let heap = small();
        let mut cache = AllocCache::default();
        let a = heap.reserve(&mut cache, 1000).unwrap();
        heap.release(a, Some(ts(5)));
        let b = heap.reserve(&mut cache, 1000).unwrap();
        assert_eq!(slab_of(a), slab_of(b));
        heap.release(b, Some(ts(6)));
        assert_eq!(lock(&heap.emptied).len(), 2, "both emptyings listed the slab");
        assert_eq!(heap.reclaim_slabs(ts(5)), 0, "the last free (6) is above the safe point");
        assert_eq!(heap.reclaim_slabs(ts(6)), 1);
        assert_eq!(heap.reclaim_slabs(ts(100)), 0);
        assert_eq!(heap.slabs_reclaimed(), 1);
        // `cache` still names the slab at its old generation: it must adopt another slab and
        // not list the reclaimed one as a candidate again.
        let c = heap.reserve(&mut cache, 1000).unwrap();
        assert!(lock(&heap.emptied).is_empty());
        // The reclaimed slab is handed out exactly once: two other classes get distinct slabs.
        let (mut c1, mut c2) = (AllocCache::default(), AllocCache::default());
        let x = heap.reserve(&mut c1, 64).unwrap();
        let y = heap.reserve(&mut c2, 128).unwrap();
        let slabs = [slab_of(c), slab_of(x), slab_of(y)];
        assert!(slabs[0] != slabs[1] && slabs[1] != slabs[2] && slabs[0] != slabs[2], "{slabs:?}");
        assert!(slabs.contains(&slab_of(a)), "the reclaimed slab is reused");
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
        let bad = HeapConfig { region_bytes: 1000, regions_max: 1, ..Default::default() };
        assert!(matches!(Heap::new(bad), Err(Error::Config(_))));
    }
}
