//! Unit tests of the storage backends: [`MemStorage`] against a reference model and against
//! the OS ([`RealStorage`]) under the same random operations, its mappings, its locks, and
//! [`FaultStorage`]'s power loss giving the same files over both backends.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;

/// SplitMix64: a replayable stream of choices from a printed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn os_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "ordo-io-{}-{name}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every file of `dir` with its bytes, read through `s`.
fn files(s: &dyn Storage, dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for name in s.list(dir).unwrap() {
        let f = s.open(&dir.join(&name), false).unwrap();
        let mut b = vec![0; f.len_bytes().unwrap() as usize];
        f.read_at(&mut b, 0).unwrap();
        out.insert(name, b);
    }
    out
}

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

/// Applies one random operation to `stores` (each in its own directory) and to the reference
/// `model`, checking every result against the model. Offsets cross page boundaries and go past
/// the end.
fn step(rng: &mut Rng, stores: &[(&dyn Storage, &Path)], model: &mut BTreeMap<String, Vec<u8>>) {
    let name = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
    let offset = rng.below(3 * 4096) + if rng.below(4) == 0 { 4096 - 3 } else { 0 };
    let len = rng.below(6000) as usize;
    let fill = rng.next() as u8;
    match rng.below(8) {
        0 => {
            for (s, dir) in stores {
                s.create(&dir.join(&name)).unwrap();
            }
            model.insert(name, Vec::new());
        }
        1 | 2 => {
            let Some(m) = model.get_mut(&name) else { return };
            let bytes: Vec<u8> = (0..len).map(|i| fill.wrapping_add(i as u8)).collect();
            for (s, dir) in stores {
                s.open(&dir.join(&name), true).unwrap().write_at(&bytes, offset).unwrap();
            }
            // An empty write extends nothing (and writes nothing, past the end too).
            if len > 0 {
                let end = offset as usize + len;
                if m.len() < end {
                    m.resize(end, 0);
                }
                m[offset as usize..end].copy_from_slice(&bytes);
            }
        }
        3 => {
            let Some(m) = model.get_mut(&name) else { return };
            let new_len = rng.below(4 * 4096);
            for (s, dir) in stores {
                s.open(&dir.join(&name), true).unwrap().set_len(new_len).unwrap();
            }
            m.resize(new_len as usize, 0);
        }
        4 => {
            let to = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
            let Some(m) = model.remove(&name) else { return };
            for (s, dir) in stores {
                s.rename(&dir.join(&name), &dir.join(&to)).unwrap();
            }
            model.insert(to, m);
        }
        5 => {
            if model.remove(&name).is_none() {
                return;
            }
            for (s, dir) in stores {
                s.remove(&dir.join(&name)).unwrap();
            }
        }
        _ => {
            for (s, dir) in stores {
                let r = s.open(&dir.join(&name), false);
                let Some(m) = model.get(&name) else {
                    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::NotFound);
                    continue;
                };
                let f = r.unwrap();
                assert_eq!(f.len_bytes().unwrap(), m.len() as u64);
                let mut buf = vec![0xAA; len];
                let r = f.read_at(&mut buf, offset);
                // An empty read succeeds anywhere, past the end too (as `read_exact` does).
                if len == 0 {
                    r.unwrap();
                } else if offset as usize + len <= m.len() {
                    r.unwrap();
                    assert_eq!(buf, m[offset as usize..offset as usize + len]);
                } else {
                    assert_eq!(r.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
                }
            }
        }
    }
}

/// Empty reads and writes past the end: the OS backend's `read_exact_at` succeeds and its
/// `write_all_at` changes nothing; the in-memory backend must do the same (it refused the
/// read and extended the file on the write, which a fresh seed of the model test found).
#[test]
fn empty_reads_and_writes_past_the_end_match_the_os() {
    let mem = MemStorage::new();
    let mem_dir = Path::new("/empty");
    mem.create_dir_all(mem_dir).unwrap();
    let os_dir = os_dir("empty");
    let stores: [(&dyn Storage, &Path); 2] = [(&mem, mem_dir), (&RealStorage, &os_dir)];
    for (s, dir) in stores {
        let f = s.create(&dir.join("f")).unwrap();
        f.write_at(&[7; 10], 0).unwrap();
        f.write_at(&[], 5000).unwrap();
        assert_eq!(f.len_bytes().unwrap(), 10);
        f.read_at(&mut [], 5000).unwrap();
        assert_eq!(f.read_at(&mut [0; 1], 10).unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
    }
    let _ = std::fs::remove_dir_all(&os_dir);
}

#[test]
fn mem_storage_matches_a_model_and_the_os() {
    let run = ordo_seed::Seed::new("mem_storage_matches_a_model_and_the_os");
    let seed = run.value();
    let mut rng = Rng(seed);
    let mem = MemStorage::new();
    let mem_dir = Path::new("/model");
    mem.create_dir_all(mem_dir).unwrap();
    let os_dir = os_dir("model");
    let mut model = BTreeMap::new();
    for i in 0..2_000 {
        step(&mut rng, &[(&mem, mem_dir), (&RealStorage, &os_dir)], &mut model);
        if i % 100 == 99 {
            assert_eq!(files(&mem, mem_dir), model, "seed {seed}, step {i}: memory");
            assert_eq!(files(&RealStorage, &os_dir), model, "seed {seed}, step {i}: OS");
        }
    }
    let _ = std::fs::remove_dir_all(&os_dir);
}

#[test]
fn a_handle_follows_its_file_through_rename_and_removal() {
    let mem = MemStorage::new();
    mem.create_dir_all(Path::new("/d")).unwrap();
    let f = mem.create(Path::new("/d/x")).unwrap();
    let id = f.file_id().unwrap();
    f.write_at(b"one", 0).unwrap();
    mem.rename(Path::new("/d/x"), Path::new("/d/y")).unwrap();
    f.write_at(b"two", 3).unwrap();
    let g = mem.open(Path::new("/d/y"), false).unwrap();
    assert_eq!(g.file_id().unwrap(), id);
    assert_eq!(mem.read(Path::new("/d/y")).unwrap(), b"onetwo");
    assert_eq!(g.write_at(b"!", 0).unwrap_err().raw_os_error(), Some(libc::EBADF));
    mem.remove(Path::new("/d/y")).unwrap();
    let mut b = [0; 6];
    g.read_at(&mut b, 0).unwrap();
    assert_eq!(&b, b"onetwo", "an open handle outlives its name");
    assert_eq!(mem.list(Path::new("/d")).unwrap(), Vec::<String>::new());
    let e = mem.open(Path::new("/d/y"), false).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    let e = mem.create(Path::new("/nodir/z")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    assert_eq!(mem.list(Path::new("/")).unwrap(), vec!["d".to_string()]);
}

#[test]
fn private_memory_is_a_copy_neither_way_shared() {
    let mem = MemStorage::new();
    mem.create_dir_all(Path::new("/d")).unwrap();
    let f = mem.create(Path::new("/d/r")).unwrap();
    f.set_len(3 * 4096).unwrap();
    f.write_at(&[7; 10], 4096 - 5).unwrap();
    let m = f.map_private(3 * 4096).unwrap();
    assert_eq!(m.len_bytes(), 3 * 4096);
    let r = crate::heap::memory::RegionMemory::new(m);
    let w = r.words();
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(w[0].load(Relaxed), 0);
    assert_eq!(w[511].load(Relaxed).to_le_bytes(), [0, 0, 0, 7, 7, 7, 7, 7]);
    assert_eq!(w[512].load(Relaxed).to_le_bytes(), [7, 7, 7, 7, 7, 0, 0, 0]);
    // Stores stay in the memory; later file writes stay in the file.
    w[0].store(u64::MAX, Relaxed);
    f.write_at(&[9; 8], 8).unwrap();
    assert_eq!(w[1].load(Relaxed), 0);
    let mut b = [0; 8];
    f.read_at(&mut b, 0).unwrap();
    assert_eq!(b, [0; 8]);
    // Asking for more than the file has is refused, as the OS would fault on it.
    let e = f.map_private(4 * 4096).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    let e = f.map_read(3 * 4096 + 1).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    let bytes = f.map_read(4096).unwrap();
    assert_eq!(bytes.bytes()[4090..], [0, 7, 7, 7, 7, 7]);
}

#[test]
fn private_memory_of_a_real_file_is_copy_on_write() {
    let dir = os_dir("map");
    let f = RealStorage.create(&dir.join("r")).unwrap();
    f.set_len(2 * 4096).unwrap();
    f.write_at(&[5; 8], 4096).unwrap();
    let r = crate::heap::memory::RegionMemory::new(f.map_private(2 * 4096).unwrap());
    use std::sync::atomic::Ordering::Relaxed;
    assert_eq!(r.words()[512].load(Relaxed), u64::from_le_bytes([5; 8]));
    r.words()[512].store(1, Relaxed);
    let mut b = [0; 8];
    f.read_at(&mut b, 4096).unwrap();
    assert_eq!(b, [5; 8], "a store to private memory reached the file");
    assert_eq!(f.map_read(4096 + 8).unwrap().bytes()[4096..], [5; 8]);
    drop(r);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn dir_locks_conflict_as_flock_does_and_drop_releases_them() {
    let mem = MemStorage::new();
    let d = Path::new("/db");
    assert_eq!(mem.lock_dir(d, true).unwrap_err().kind(), io::ErrorKind::NotFound);
    mem.create_dir_all(d).unwrap();
    let x = mem.lock_dir(d, true).unwrap();
    let other = mem.clone();
    assert_eq!(other.lock_dir(d, true).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    assert_eq!(other.lock_dir(d, false).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    drop(x);
    let s1 = other.lock_dir(d, false).unwrap();
    let s2 = mem.lock_dir(Path::new("/db/."), false).unwrap();
    assert_eq!(mem.lock_dir(d, true).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    drop(s1);
    assert_eq!(mem.lock_dir(d, true).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    drop(s2);
    drop(mem.lock_dir(d, true).unwrap());
}

#[test]
fn sparse_pages_cost_only_what_was_written() {
    let mem = MemStorage::new();
    mem.create_dir_all(Path::new("/d")).unwrap();
    let f = mem.create(Path::new("/d/big")).unwrap();
    f.set_len(1 << 30).unwrap();
    f.write_at(&[1; 3], (1 << 29) - 1).unwrap();
    assert_eq!(mem.page_bytes(), 2 * 4096);
    f.set_len(1 << 29).unwrap();
    assert_eq!(mem.page_bytes(), 4096);
    f.set_len(1 << 30).unwrap();
    let mut b = [9; 2];
    f.read_at(&mut b, (1 << 29) - 1).unwrap();
    assert_eq!(b, [1, 0], "growth after a cut reads zeros");
}

/// One random history over a [`FaultStorage`]: writes, syncs, creations, renames, removals and
/// directory syncs, then a power loss that keeps the unsynced writes `keep` picks (by file
/// name and offset, so the same on any backend).
fn fault_history(fs: &FaultStorage, dir: &Path, seed: u64, keep: u64) -> usize {
    fault_history_then(fs, dir, seed, |fs| {
        fs.power_loss_keeping_writes(|p, offset| {
            let name = p.file_name().map_or(0, |n| n.as_encoded_bytes()[0] as u64);
            keep != 0 && Rng(keep ^ name ^ offset).next() & 1 == 1
        })
        .unwrap()
    })
}

/// [`fault_history`], ending with the power loss `loss`.
fn fault_history_then(
    fs: &FaultStorage,
    dir: &Path,
    seed: u64,
    loss: impl FnOnce(&FaultStorage) -> usize,
) -> usize {
    let mut rng = Rng(seed);
    fs.create_dir_all(dir).unwrap();
    fs.sync_dir(dir).unwrap();
    let mut live: Vec<String> = Vec::new();
    for i in 0..300 {
        let name = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
        let path = dir.join(&name);
        let exists = live.contains(&name);
        match rng.below(9) {
            0 => {
                fs.create(&path).unwrap();
                if !exists {
                    live.push(name);
                }
            }
            1..=3 if exists => {
                let offset = rng.below(3 * 4096);
                let bytes = vec![i as u8; rng.below(5000) as usize + 1];
                fs.open(&path, true).unwrap().write_at(&bytes, offset).unwrap();
            }
            4 if exists => fs.open(&path, true).unwrap().sync_data().unwrap(),
            5 if exists => fs.open(&path, true).unwrap().set_len(rng.below(4 * 4096)).unwrap(),
            6 if exists => {
                let to = NAMES[rng.below(NAMES.len() as u64) as usize].to_string();
                if to == name {
                    continue;
                }
                fs.rename(&path, &dir.join(&to)).unwrap();
                live.retain(|n| *n != name && *n != to);
                live.push(to);
            }
            7 if exists => {
                fs.remove(&path).unwrap();
                live.retain(|n| *n != name);
            }
            8 => fs.sync_dir(dir).unwrap(),
            _ => {}
        }
    }
    loss(fs)
}

#[test]
fn power_loss_over_memory_leaves_what_it_leaves_over_real_files() {
    let run = ordo_seed::Seed::new("power_loss_over_memory_leaves_what_it_leaves_over_real_files");
    let seed = run.value();
    let (mut undone, mut files_left) = (0, 0);
    for round in 0..20 {
        let (s, keep) = (seed.wrapping_add(round), if round % 2 == 0 { 0 } else { seed ^ round });
        let mem = MemStorage::new();
        let over_mem = FaultStorage::over(Arc::new(mem.clone()));
        let n = fault_history(&over_mem, Path::new("/p"), s, keep);
        let dir = os_dir("power");
        let over_os = FaultStorage::new();
        assert_eq!(fault_history(&over_os, &dir, s, keep), n, "seed {seed}, round {round}");
        let after_os = files(&RealStorage, &dir);
        undone += n;
        files_left += after_os.len();
        assert_eq!(files(&mem, Path::new("/p")), after_os, "seed {seed}, round {round}");
        let _ = std::fs::remove_dir_all(&dir);
    }
    // Not a vacuous comparison: power losses undid writes and left files behind.
    assert!(undone > 0, "seed {seed}");
    assert!(files_left > 0, "seed {seed}");
}

#[test]
fn power_loss_over_memory_keeps_exactly_the_synced_state() {
    let mem = MemStorage::new();
    let fs = FaultStorage::over(Arc::new(mem.clone()));
    let d = Path::new("/db");
    fs.create_dir_all(d).unwrap();
    let a = fs.create(&d.join("a")).unwrap();
    a.write_at(b"synced", 0).unwrap();
    a.sync_data().unwrap();
    fs.sync_dir(d).unwrap();
    a.write_at(b"SYNCED and more", 0).unwrap();
    let b = fs.create(&d.join("b")).unwrap();
    b.write_at(b"never synced", 0).unwrap();
    b.sync_data().unwrap(); // the data, but not the directory entry
    fs.rename(&d.join("a"), &d.join("c")).unwrap();
    // Before the power loss, the "page cache" (a restarted process) sees everything.
    assert_eq!(
        files(&mem, d),
        BTreeMap::from([
            ("b".to_string(), b"never synced".to_vec()),
            ("c".to_string(), b"SYNCED and more".to_vec())
        ])
    );
    assert_eq!(fs.power_loss().unwrap(), 1);
    assert_eq!(files(&mem, d), BTreeMap::from([("a".to_string(), b"synced".to_vec())]));
    let e = fs.open(&d.join("a"), false).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "a frozen storage refuses everything");
}

#[test]
fn torn_power_loss_over_memory_leaves_what_it_leaves_over_real_files() {
    let seed =
        ordo_seed::Seed::new("torn_power_loss_over_memory_leaves_what_it_leaves_over_real_files");
    let mut undone = 0;
    for round in 0..20 {
        let (s, tear) = (seed.derive(round), seed.derive(1000 + round));
        let mem = MemStorage::new();
        let over_mem = FaultStorage::over(Arc::new(mem.clone()));
        let torn = |fs: &FaultStorage| fs.power_loss_torn(tear).unwrap();
        let n = fault_history_then(&over_mem, Path::new("/p"), s, torn);
        let dir = os_dir("torn");
        let over_os = FaultStorage::new();
        assert_eq!(fault_history_then(&over_os, &dir, s, torn), n, "round {round}");
        let after_os = files(&RealStorage, &dir);
        undone += n;
        assert_eq!(files(&mem, Path::new("/p")), after_os, "round {round}");
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert!(undone > 0);
}

/// What a torn power loss left of one unsynced write over synced bytes.
#[derive(Debug, Default)]
struct TornOutcomes {
    kept: usize,
    lost: usize,
    prefix: usize,
    scattered: usize,
}

/// The torn mode tears: over many seeds, one unsynced 16-sector overwrite comes back whole,
/// lost, as a strict prefix of its sectors, and as a subset that is no prefix — never with a
/// sector mixed, and never a sector of the append after it other than its bytes or zeros.
/// (With the tearing removed, keeping or losing writes whole, no run is torn and this fails.)
#[test]
fn torn_power_loss_keeps_sectors_not_writes() {
    let seed = ordo_seed::Seed::new("torn_power_loss_keeps_sectors_not_writes");
    let sector = SECTOR_BYTES as usize;
    let (old, new, appended) = (0xAAu8, 0xBBu8, 0xCCu8);
    let mut seen = TornOutcomes::default();
    let mut lengths = std::collections::BTreeSet::new();
    for trial in 0..200 {
        let mem = MemStorage::new();
        let fs = FaultStorage::over(Arc::new(mem.clone()));
        let d = Path::new("/t");
        fs.create_dir_all(d).unwrap();
        let f = fs.create(&d.join("f")).unwrap();
        f.write_at(&vec![old; 16 * sector], 0).unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(d).unwrap();
        // Unsynced: an overwrite starting mid-sector (its first and last sectors partial),
        // then an append of four sectors.
        f.write_at(&vec![new; 15 * sector], 256).unwrap();
        f.write_at(&vec![appended; 4 * sector], 16 * sector as u64).unwrap();
        fs.power_loss_torn(seed.derive(trial)).unwrap();
        let b = files(&mem, d).remove("f").unwrap();
        assert!(b.len() >= 16 * sector && b.len() <= 20 * sector, "trial {trial}: {}", b.len());
        assert_eq!(b.len() % sector, 0, "trial {trial}: the length ends a sector");
        lengths.insert(b.len());
        assert_eq!(&b[..256], &vec![old; 256][..], "trial {trial}: before the write");
        // Per sector of the overwrite: all its new bytes or all its old ones.
        let mut sectors_new = Vec::new();
        for i in 0..16 {
            let from = (i * sector).max(256);
            let to = ((i + 1) * sector).min(256 + 15 * sector);
            let part = &b[from..to];
            let is_new = part.iter().all(|&x| x == new);
            assert!(is_new || part.iter().all(|&x| x == old), "trial {trial}: sector {i} mixed");
            sectors_new.push(is_new);
        }
        for (i, s) in b[16 * sector..].chunks(sector).enumerate() {
            let whole = s.iter().all(|&x| x == appended) || s.iter().all(|&x| x == 0);
            assert!(whole, "trial {trial}: appended sector {i} mixed");
        }
        let k = sectors_new.iter().take_while(|&&n| n).count();
        match k {
            16 => seen.kept += 1,
            0 if !sectors_new.contains(&true) => seen.lost += 1,
            _ if sectors_new[k..].iter().all(|&n| !n) => seen.prefix += 1,
            _ => seen.scattered += 1,
        }
    }
    eprintln!("{seen:?}, lengths {lengths:?}");
    assert!(seen.kept > 0 && seen.lost > 0, "{seen:?}");
    assert!(seen.prefix > 0, "no write torn to a prefix of its sectors: {seen:?}");
    assert!(seen.scattered > 0, "no write torn to a scattered subset of its sectors: {seen:?}");
    assert!(lengths.len() > 2, "the append's length kept whole, cut, or lost: {lengths:?}");
}
