//! A list-append workload over engine objects, recorded for `ordo-check`.
//!
//! Each key is one object holding `[len, v0, v1, ... v(CAP-1)]` as u64 words. An append is a
//! read-modify-write of that object; a read returns the list. Values are unique per attempt
//! (`thread << 40 | counter`), so every dependency can be recovered from the lists alone.
#![allow(dead_code, unreachable_pub)] // shared by the modules of one test binary

use ordo::{Addr, Error, Options, Ordo, Tx};
use ordo_check::{Recorder, TxnRecorder};
use ordo_clock::Clock;
use rand::{Rng, SeedableRng, rngs::SmallRng};

/// Values one list object can hold.
pub const CAP: usize = 1_000;

/// Records how a scripted attempt ended: committed, or aborted (a conflict); any other error
/// fails the test.
pub fn record_end<T>(outcome: Result<T, Error>, r: TxnRecorder<'_>) {
    match outcome {
        Ok(_) => r.commit(),
        Err(Error::Aborted(_)) => r.abort(),
        Err(e) => panic!("{e}"),
    }
}

/// Creates `n` empty lists.
pub fn make_lists<C: Clock>(db: &Ordo<C>, n: usize) -> Vec<Addr> {
    db.run(|tx| (0..n).map(|_| tx.alloc_bytes(&vec![0u8; 8 * (CAP + 1)])).collect())
        .expect("creating lists")
}

/// Reads a list object.
pub fn read_list<C: Clock>(tx: &mut Tx<'_, C>, addr: Addr) -> Result<Vec<u64>, Error> {
    tx.read_with(addr, |b| {
        let words: Vec<u64> =
            b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        let len = (words[0] as usize).min(CAP);
        words[1..=len].to_vec()
    })
}

/// Appends `value` to a list object; `Ok(false)` when it is full.
pub fn append<C: Clock>(tx: &mut Tx<'_, C>, addr: Addr, value: u64) -> Result<bool, Error> {
    let mut list = read_list(tx, addr)?;
    if list.len() >= CAP {
        return Ok(false);
    }
    list.push(value);
    let mut words = vec![0u64; CAP + 1];
    words[0] = list.len() as u64;
    words[1..=list.len()].copy_from_slice(&list);
    tx.write_bytes(addr, bytemuck::cast_slice(&words))?;
    Ok(true)
}

/// One planned operation.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// Read key.
    Read(usize),
    /// Append to key.
    Append(usize),
}

/// Runs one attempt of `ops`, recording it. Returns `true` when it committed.
pub fn attempt<C: Clock>(
    db: &Ordo<C>,
    keys: &[Addr],
    rec: &Recorder,
    process: u32,
    options: Options,
    ops: &[Op],
    next_value: &mut u64,
) -> bool {
    let mut r: TxnRecorder<'_> = rec.begin(process);
    let mut tx = db.begin_with(options).expect("begin");
    for op in ops {
        let ok = match *op {
            Op::Read(k) => match read_list(&mut tx, keys[k]) {
                Ok(list) => {
                    r.read_list(k as u64, &list);
                    true
                }
                Err(Error::Aborted(_)) => false,
                Err(e) => panic!("unexpected error {e}"),
            },
            Op::Append(k) => {
                *next_value += 1;
                let v = ((process as u64) << 40) | *next_value;
                match append(&mut tx, keys[k], v) {
                    Ok(true) => {
                        r.append(k as u64, v);
                        true
                    }
                    Ok(false) => true, // full: the op becomes a no-op
                    Err(Error::Aborted(_)) => false,
                    Err(e) => panic!("unexpected error {e}"),
                }
            }
        };
        if !ok {
            drop(tx);
            r.abort();
            return false;
        }
    }
    match tx.commit() {
        Ok(_) => {
            r.commit();
            true
        }
        Err(Error::Aborted(_)) => {
            r.abort();
            false
        }
        Err(e) => panic!("unexpected commit error {e}"),
    }
}

/// Random transactions of 1–4 operations over `keys`, from `threads` threads, each running
/// `txns` transactions to commit (aborted attempts are retried and recorded too).
pub fn run_random<C: Clock>(
    db: &Ordo<C>,
    keys: &[Addr],
    rec: &Recorder,
    threads: u32,
    txns: usize,
    options: Options,
    seed: u64,
) {
    run_random_as(db, keys, rec, 0..threads, txns, options, seed);
}

/// [`run_random`] with one thread per process id in `processes` (several databases — the
/// coordinators of a cluster — recording into one history need disjoint ids).
pub fn run_random_as<C: Clock>(
    db: &Ordo<C>,
    keys: &[Addr],
    rec: &Recorder,
    processes: std::ops::Range<u32>,
    txns: usize,
    options: Options,
    seed: u64,
) {
    let start = std::sync::Barrier::new(processes.len());
    std::thread::scope(|s| {
        for t in processes {
            let start = &start;
            s.spawn(move || {
                start.wait();
                let mut rng = SmallRng::seed_from_u64(seed ^ ((t as u64 + 1) * 0x9E37_79B9));
                let mut next_value = 0;
                for _ in 0..txns {
                    let n = rng.random_range(1..=4);
                    let ops: Vec<Op> = (0..n)
                        .map(|_| {
                            let k = rng.random_range(0..keys.len());
                            if rng.random_bool(0.5) { Op::Read(k) } else { Op::Append(k) }
                        })
                        .collect();
                    for i in 0..10_000u32 {
                        if attempt(db, keys, rec, t, options, &ops, &mut next_value) {
                            break;
                        }
                        // Randomised exponential back-off, as `Ordo::run` does.
                        let ceiling_us = 1u64 << i.min(10);
                        let pause = rng.random_range(0..ceiling_us);
                        std::thread::sleep(std::time::Duration::from_micros(pause));
                    }
                }
            });
        }
    });
}

/// Reads every key in one recorded transaction (so the final state is part of the history).
pub fn final_read<C: Clock>(db: &Ordo<C>, keys: &[Addr], rec: &Recorder) {
    let ops: Vec<Op> = (0..keys.len()).map(Op::Read).collect();
    let mut v = 0;
    assert!(attempt(db, keys, rec, 999, Options::default(), &ops, &mut v), "final read");
}

/// The checker `isolation` promises: opacity for strict serializability, serializability, or
/// (strict) snapshot isolation.
pub fn check_isolation(
    isolation: ordo::Isolation,
    h: &ordo_check::History,
) -> Result<(), ordo_check::Violation> {
    match isolation {
        ordo::Isolation::StrictSerializable => ordo_check::check_opacity(h),
        ordo::Isolation::Serializable => ordo_check::check_serializable(h),
        ordo::Isolation::StrictSnapshot => ordo_check::check_strict_snapshot_isolation(h),
        ordo::Isolation::Snapshot => ordo_check::check_snapshot_isolation(h),
    }
}
