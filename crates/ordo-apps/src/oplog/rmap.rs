//! A reverse map in the style of Linux's `rmap` (ORDO §6.3): for every physical page, the set of
//! mappings (address space, virtual address) that map it. `fork`, `exit`, `mmap` and `munmap`
//! add and remove mappings all the time; the set is read rarely (swap-out, migration), which is
//! the update-heavy pattern [`Oplog`](super::Oplog) serves.
//!
//! Invariant: a page's mappings hold no duplicates, and a page with no mappings has no entry.
//! Adding a present mapping and removing an absent one change nothing, so the result of a
//! sequence of operations depends on their order (add-then-remove differs from remove-then-add),
//! which is what lets the tests tell a wrong merge order apart.

use std::collections::{BTreeMap, BTreeSet};

use rustc_hash::FxHashMap;

use super::Apply;

/// Where a page is mapped: an address space and a virtual address in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Mapping {
    /// The address space (process) id.
    pub space: u32,
    /// The virtual address.
    pub vaddr: u64,
}

/// An update of the reverse map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmapOp {
    /// `page` is now also mapped at `mapping` (no change if it already was).
    Add {
        /// The physical page number.
        page: u64,
        /// The new mapping.
        mapping: Mapping,
    },
    /// `page` is no longer mapped at `mapping` (no change if it was not).
    Remove {
        /// The physical page number.
        page: u64,
        /// The mapping removed.
        mapping: Mapping,
    },
}

/// Page → set of mappings. See the module docs.
#[derive(Clone, Debug, Default)]
pub struct Rmap {
    pages: FxHashMap<u64, Vec<Mapping>>,
    mappings: usize,
}

impl Rmap {
    /// The mappings of `page`, in no particular order.
    pub fn mappings(&self, page: u64) -> &[Mapping] {
        self.pages.get(&page).map_or(&[], Vec::as_slice)
    }

    /// Pages with at least one mapping.
    pub fn pages(&self) -> usize {
        self.pages.len()
    }

    /// Mappings over all pages.
    pub fn len(&self) -> usize {
        self.mappings
    }

    /// Whether no page is mapped.
    pub fn is_empty(&self) -> bool {
        self.mappings == 0
    }

    /// The whole map in a canonical form, for comparisons.
    pub fn snapshot(&self) -> BTreeMap<u64, BTreeSet<Mapping>> {
        self.pages.iter().map(|(p, m)| (*p, m.iter().copied().collect())).collect()
    }
}

impl Apply for Rmap {
    type Op = RmapOp;

    fn apply(&mut self, op: RmapOp) {
        match op {
            RmapOp::Add { page, mapping } => {
                let set = self.pages.entry(page).or_default();
                if !set.contains(&mapping) {
                    set.push(mapping);
                    self.mappings += 1;
                }
            }
            RmapOp::Remove { page, mapping } => {
                if let Some(set) = self.pages.get_mut(&page)
                    && let Some(i) = set.iter().position(|m| *m == mapping)
                {
                    set.swap_remove(i);
                    self.mappings -= 1;
                    if set.is_empty() {
                        self.pages.remove(&page);
                    }
                }
            }
        }
    }
}
