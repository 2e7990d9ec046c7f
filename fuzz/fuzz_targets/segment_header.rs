//! `SegmentHeader::decode` on arbitrary bytes: a header or a typed error naming the file and
//! an offset inside the bytes, never a panic.
//!
//! Input: one flags byte (bit 0: recompute the header checksum, so the checks behind it are
//! reached), then the header page.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use ordo::durable::DurableError;
use ordo::durable::format::SegmentHeader;

fuzz_target!(|data: &[u8]| {
    let Some((flags, bytes)) = data.split_first() else { return };
    let mut b = bytes.to_vec();
    if flags & 1 == 1 && b.len() >= 36 {
        let crc = crc32c::crc32c(&b[0..32]);
        b[32..36].copy_from_slice(&crc.to_le_bytes());
    }
    let path = Path::new("/fuzz/log-00000000.seg");
    match SegmentHeader::decode(path, &b) {
        Ok(h) => {
            assert!(h.chunk_bytes >= 4096 && h.chunk_bytes % 8 == 0 && h.chunks > 0);
            assert!(h.file_bytes() > 4096);
            assert_eq!(SegmentHeader::decode(path, &h.encode()).ok(), Some(h), "round trip");
        }
        Err(DurableError::BadFile { path: p, offset, .. }) => {
            assert_eq!(p, path);
            assert!(offset <= b.len() as u64);
        }
        Err(DurableError::FormatVersion { path: p, .. }) => assert_eq!(p, path),
        Err(e) => panic!("not a decoding error: {e}"),
    }
});
