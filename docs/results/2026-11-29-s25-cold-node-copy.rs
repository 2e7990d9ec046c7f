// Cold-node copy costs: random 1 KiB "nodes" (stride 1088 B, as a 1 KiB object plus header in its
// size class) in a 1 GiB arena; per node: load the header word, then copy N bytes into a scratch
// buffer. Variants: full 1024 B copy, 704 B copy (a node ~70 % full: copy up to its data end),
// and 4 independent nodes per step, serially vs with all 4 prefetched first (a batched descent).
use std::time::Instant;
const STRIDE: usize = 1088;
fn main() {
    let bytes: usize = 1 << 30;
    let n = bytes / STRIDE;
    let mut arena = vec![0u8; bytes];
    for i in 0..n {
        arena[i * STRIDE] = (i % 251) as u8;
    }
    let mut x: u64 = 0x9E3779B97F4A7C15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x as usize) % n
    };
    let idx: Vec<usize> = (0..2_000_000).map(|_| next()).collect();
    let mut scratch = vec![0u8; 1024];
    let mut sink = 0u64;
    let copy = |arena: &[u8], scratch: &mut [u8], i: usize, len: usize| -> u64 {
        let p = i * STRIDE;
        // SAFETY: `p < n * STRIDE <= arena.len()`, so the byte is inside the arena; a volatile
        // read keeps the header load that the seqlock read makes first.
        let h = unsafe { std::ptr::read_volatile(arena.as_ptr().add(p)) } as u64;
        scratch[..len].copy_from_slice(&arena[p + 16..p + 16 + len]);
        h + scratch[len - 1] as u64
    };
    #[cfg(target_arch = "x86_64")]
    let pf = |arena: &[u8], i: usize, len: usize| {
        let p = i * STRIDE;
        for l in (0..len + 16).step_by(64) {
            // SAFETY: a prefetch is a hint that never faults; the address is inside the arena
            // (`p + l < (i + 1) * STRIDE`), and SSE is baseline on x86-64.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    arena.as_ptr().add(p + l) as *const i8,
                )
            };
        }
    };
    let mut res: Vec<(String, Vec<f64>)> = vec![];
    for name in ["full1024", "part704", "serial4x1024", "prefetch4x1024"] {
        res.push((name.into(), vec![]));
    }
    for _round in 0..7 {
        for (k, (_, v)) in res.iter_mut().enumerate() {
            let t = Instant::now();
            match k {
                0 => {
                    for &i in &idx {
                        sink += copy(&arena, &mut scratch, i, 1024);
                    }
                }
                1 => {
                    for &i in &idx {
                        sink += copy(&arena, &mut scratch, i, 704);
                    }
                }
                2 => {
                    for c in idx.chunks(4) {
                        for &i in c {
                            sink += copy(&arena, &mut scratch, i, 1024);
                        }
                    }
                }
                _ => {
                    for c in idx.chunks(4) {
                        for &i in c {
                            pf(&arena, i, 1024);
                        }
                        for &i in c {
                            sink += copy(&arena, &mut scratch, i, 1024);
                        }
                    }
                }
            }
            v.push(t.elapsed().as_nanos() as f64 / idx.len() as f64);
        }
    }
    for (name, mut v) in res {
        v.sort_by(f64::total_cmp);
        println!("{name:>16}: median {:.1} ns/node [{:.1}-{:.1}]", v[3], v[0], v[6]);
    }
    println!("(sink {sink})");
}
