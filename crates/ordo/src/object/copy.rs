//! Bulk copies of an object's payload words while other threads may store to them: the
//! seqlock read's copy out ([`load_words`]) and a commit's install ([`store_words`]).
//!
//! The header protocol (see [`crate::object`]) never needs a payload copy to be atomic as a
//! whole: a reader compares word 0 before and after its copy and discards a torn one, and a
//! writer stores the payload while it holds the lock, between the lock (an `AcqRel` CAS and a
//! `Release` fence) and the `Release` store of word 0 that publishes it. What it needs of each
//! copy is only that it happens *between* those header accesses.
//!
//! Word by word through `AtomicU64` (relaxed loads and stores) the compiler cannot combine the
//! accesses, so a copy costs a load, a store and loop overhead per word; payload copies were
//! about a tenth of the instructions of a TPC-C transaction. On x86-64 (outside loom and Miri)
//! the copies here move 64 bytes per step with SSE2 (baseline on x86-64) in inline assembly,
//! then finish the last words one at a time.
//!
//! # Why the assembly is sound
//! - The compiler treats an `asm!` block that may access memory as an opaque call: it neither
//!   assumes what the block reads is unchanged by other threads nor moves other memory accesses
//!   (the atomic loads of word 0, the fences) across it. So the block sits exactly where the
//!   word-by-word loop sat in program order.
//! - On the hardware, `movdqu` loads and stores are ordinary (not streaming, not string)
//!   accesses, so x86-64's ordering rules (TSO) hold for them as for the `mov`s the atomic loop
//!   compiles to: loads are not reordered with other loads, stores not with other stores. The
//!   reader's payload loads therefore stay between its two loads of word 0, and the writer's
//!   payload stores between its lock and its publishing store.
//! - A 16-byte access may tear between its 8-byte halves under a concurrent store. Relaxed
//!   atomic loads of each word promise no more than that across words either; the reader's
//!   header check discards any copy a store overlapped, torn or not.
//! - Every address touched lies inside the slices passed in (whole 64-byte blocks of them), and
//!   the destination of a load is this thread's own buffer, reserved first.

use crate::sync::{AtomicU64, Ordering};

/// Words per 64-byte step of the assembly copy.
#[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
const BLOCK_WORDS: usize = 8;

/// Replaces `out`'s contents with a copy of `src` (relaxed loads; see the module docs).
#[inline]
pub(crate) fn load_words(src: &[AtomicU64], out: &mut Vec<u64>) {
    out.clear();
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    let done = {
        let blocks = src.len() / BLOCK_WORDS;
        out.reserve(src.len());
        if blocks > 0 {
            let dst = out.spare_capacity_mut().as_mut_ptr().cast::<u64>();
            // SAFETY: `src` holds `blocks * 64` readable bytes from `src.as_ptr()` and `out` has
            // room for `src.len() >= blocks * 8` words (reserved above) from `dst`; the two do
            // not overlap (`out` is this thread's own vector). SSE2 is part of x86-64's baseline.
            // The loads may race with relaxed atomic stores of a writer: see the module docs
            // for why that is sound here (the caller's seqlock check discards a torn copy).
            unsafe { copy_blocks(src.as_ptr().cast::<u64>(), dst, blocks) };
            // SAFETY: the first `blocks * 8` words were just written (initialised) and fit the
            // capacity reserved above.
            unsafe { out.set_len(blocks * BLOCK_WORDS) };
        }
        blocks * BLOCK_WORDS
    };
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    let done = 0;
    out.extend(src[done..].iter().map(|w| w.load(Ordering::Relaxed)));
}

/// Stores `src` into the first `src.len()` words of `dst` (relaxed stores; see the module
/// docs). `dst` must be at least as long as `src`.
#[inline]
pub(crate) fn store_words(dst: &[AtomicU64], src: &[u64]) {
    let dst = &dst[..src.len()];
    #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
    let done = {
        let blocks = src.len() / BLOCK_WORDS;
        if blocks > 0 {
            // SAFETY: both slices hold `src.len() >= blocks * 8` words from their starts and do
            // not overlap (`dst` is heap memory shared only through atomics, `src` a plain
            // buffer borrowed immutably). Storing through the pointer of `&[AtomicU64]` is
            // allowed: `AtomicU64` is an `UnsafeCell`. The stores may race with readers'
            // loads: see the module docs (the caller holds the object's lock, so readers
            // discard what they see until it publishes).
            unsafe { copy_blocks(src.as_ptr(), dst.as_ptr().cast::<u64>().cast_mut(), blocks) };
        }
        blocks * BLOCK_WORDS
    };
    #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
    let done = 0;
    for (d, s) in dst[done..].iter().zip(&src[done..]) {
        d.store(*s, Ordering::Relaxed);
    }
}

/// Copies `blocks` 64-byte blocks from `src` to `dst` with SSE2, in address order.
///
/// # Safety
/// `src` must be valid for reading and `dst` for writing `blocks * 64` bytes, the ranges must
/// not overlap, and `blocks` must be at least 1.
#[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
#[inline(always)]
unsafe fn copy_blocks(src: *const u64, dst: *mut u64, blocks: usize) {
    debug_assert!(blocks > 0);
    // SAFETY: the caller's contract: both ranges are valid for `blocks * 64` bytes and do not
    // overlap; the loop runs `blocks` times (`dec` then `jnz`), advancing 64 bytes each time.
    // Only the named registers and flags change; no stack is used.
    unsafe {
        std::arch::asm!(
            "2:",
            "movdqu {a}, xmmword ptr [{s}]",
            "movdqu {b}, xmmword ptr [{s} + 16]",
            "movdqu {c}, xmmword ptr [{s} + 32]",
            "movdqu {e}, xmmword ptr [{s} + 48]",
            "movdqu xmmword ptr [{d}], {a}",
            "movdqu xmmword ptr [{d} + 16], {b}",
            "movdqu xmmword ptr [{d} + 32], {c}",
            "movdqu xmmword ptr [{d} + 48], {e}",
            "add {s}, 64",
            "add {d}, 64",
            "dec {n}",
            "jnz 2b",
            s = inout(reg) src => _,
            d = inout(reg) dst => _,
            n = inout(reg) blocks => _,
            a = out(xmm_reg) _,
            b = out(xmm_reg) _,
            c = out(xmm_reg) _,
            e = out(xmm_reg) _,
            options(nostack),
        );
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Every length around the 8-word block, from and into slices at every offset: the copy is
    /// the words, nothing past the end is written.
    #[test]
    fn copies_every_length_and_offset() {
        let words: Vec<AtomicU64> =
            (0..64u64).map(|i| AtomicU64::new(i.wrapping_mul(0x9E37_79B9_7F4A_7C15))).collect();
        let mut out = Vec::new();
        for start in 0..9 {
            for len in 0..(64 - start) {
                let src = &words[start..start + len];
                load_words(src, &mut out);
                let want: Vec<u64> = src.iter().map(|w| w.load(Ordering::Relaxed)).collect();
                assert_eq!(out, want, "load start {start} len {len}");

                let dst: Vec<AtomicU64> = (0..len + 3).map(|_| AtomicU64::new(u64::MAX)).collect();
                store_words(&dst[start.min(3)..], &want);
                let got: Vec<u64> = dst.iter().map(|w| w.load(Ordering::Relaxed)).collect();
                let at = start.min(3);
                assert!(got[..at].iter().all(|&w| w == u64::MAX), "store before, len {len}");
                assert_eq!(&got[at..at + len], &want[..], "store start {start} len {len}");
                assert!(got[at + len..].iter().all(|&w| w == u64::MAX), "store after, len {len}");
            }
        }
        // A longer vector shrinks to the copy.
        let mut long = vec![7u64; 100];
        load_words(&words[..9], &mut long);
        assert_eq!(long.len(), 9);
    }
}
