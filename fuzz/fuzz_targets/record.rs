//! The log record decoder (`view_record`, `decode_record`, a record's entries, part tag and
//! marker frontier) on arbitrary bytes, followed as recovery follows a chunk: valid records
//! are what their headers say with every entry inside them, anything else is
//! `NotRecord::{End, Bad}`; and `view_checked_record` on unchecked bytes returns wrong
//! entries, never out-of-bounds ones. Never a panic.
//!
//! Input: one flags byte (bit 0: recompute the first record's checksum over its length
//! field, so the checks behind it are reached), then the chunk's bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ordo::durable::format::{
    self, ENTRY_HEADER_BYTES, KIND_MARKER, KIND_TX, KIND_TX_PART, NotRecord, RECORD_HEADER_BYTES,
};

fuzz_target!(|data: &[u8]| {
    let Some((flags, bytes)) = data.split_first() else { return };
    let mut b = bytes.to_vec();
    if flags & 1 == 1 && b.len() >= RECORD_HEADER_BYTES {
        let len = u32::from_le_bytes([b[4], b[5], b[6], b[7]]) as usize;
        if len >= 8 && len <= b.len() {
            let crc = crc32c::crc32c(&b[4..len]);
            b[0..4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let mut pos = 0;
    while pos < b.len() {
        match format::view_record(&b[pos..]) {
            Ok(r) => {
                let len = r.len_bytes();
                assert!(len >= RECORD_HEADER_BYTES && len % 8 == 0 && pos + len <= b.len());
                assert!(matches!(r.kind, KIND_TX | KIND_MARKER | KIND_TX_PART));
                let mut at = RECORD_HEADER_BYTES;
                for (_, image) in r.entries() {
                    at += ENTRY_HEADER_BYTES + image.len();
                }
                assert_eq!(at, len, "entries fill the record");
                if let Some((index, count)) = r.part() {
                    assert!(index < count && count >= 2);
                }
                assert_eq!(r.kind == KIND_TX_PART, r.part().is_some());
                let _ = r.writes().count();
                let d = format::decode_record(&b[pos..]).expect("view_record accepted it");
                assert_eq!(d.entries.len(), r.count as usize);
                pos += len;
            }
            Err(NotRecord::End) => break,
            Err(NotRecord::Bad { .. }) => {
                assert!(format::decode_record(&b[pos..]).is_err());
                break;
            }
        }
    }
    for at in (0..b.len()).step_by(8) {
        let v = format::view_checked_record(&b[at..]);
        assert!(v.len_bytes() <= b.len() - at);
        let _ = v.part();
        let _ = v.entries().count();
    }
});
