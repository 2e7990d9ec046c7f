//! `Manifest::decode` and `Checkpoint::decode` on arbitrary bytes: a value or a typed error
//! naming the file and an offset inside the bytes, never a panic.
//!
//! Input: one flags byte (bit 0: recompute the checksum over bytes 0..32, so the checks
//! behind it are reached; bit 1: write the manifest magic, bit 2 the checkpoint's, with
//! the current format version), then the file's bytes.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use ordo::durable::DurableError;
use ordo::durable::format::{self, Checkpoint, Manifest};

fn check<T>(path: &Path, len: usize, r: Result<T, DurableError>) {
    match r {
        Ok(_) => {}
        Err(DurableError::BadFile { path: p, offset, .. }) => {
            assert_eq!(p, path);
            assert!(offset <= len as u64);
        }
        Err(DurableError::FormatVersion { path: p, .. }) => assert_eq!(p, path),
        Err(e) => panic!("not a decoding error: {e}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((flags, bytes)) = data.split_first() else { return };
    let mut b = bytes.to_vec();
    if b.len() >= 12 && flags & 6 != 0 {
        b[0..8].copy_from_slice(if flags & 2 != 0 { b"ORDOMANI" } else { b"ORDOCKPT" });
        b[8..12].copy_from_slice(&format::FORMAT_VERSION.to_le_bytes());
    }
    if flags & 1 == 1 && b.len() >= 36 {
        let crc = crc32c::crc32c(&b[0..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
    }
    let manifest = Path::new("/fuzz/MANIFEST");
    if let Ok(m) = Manifest::decode(manifest, &b) {
        assert!(m.regions <= format::MANIFEST_REGIONS_MAX);
        assert!(m.region_bytes <= format::MANIFEST_REGION_BYTES_MAX);
        assert_eq!(Manifest::decode(manifest, &m.encode()).ok(), Some(m), "round trip");
    }
    check(manifest, b.len(), Manifest::decode(manifest, &b));
    let checkpoint = Path::new("/fuzz/CHECKPOINT");
    check(checkpoint, b.len(), Checkpoint::decode(checkpoint, &b));
});
