//! The wire format: round trips of arbitrary messages, hostile input (arbitrary and mutated
//! bytes never panic and never allocate more than a small multiple of their length), every
//! typed decoding error, and golden bytes that pin the format.
//!
//! Allocation is measured by a counting global allocator that counts only on the thread that
//! asked (other tests in this binary run on their own threads). Proptest seeds come from
//! `ordo_seed`: each property prints its `ORDO_SEED=<n>`, and `ORDO_SEED=<n> cargo test -p
//! ordo-cluster --test wire NAME` reruns the same cases.
#![allow(clippy::unwrap_used)] // test helpers and strategies outside #[test] functions

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use ordo_cluster::wire::{
    BODY_HEADER_BYTES, Body, FRAME_BYTES_MAX_DEFAULT, FRAME_HEADER_BYTES, Kind, Message,
    PROTOCOL_VERSION, STRING_BYTES_MAX, WireError, frame_body_len, tag,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------------------------
// Allocation counting

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATED_BYTES: Cell<usize> = const { Cell::new(0) };
}

fn count(bytes: usize) {
    // `try_with`: never panic inside the allocator, even while a thread is torn down.
    if COUNTING.try_with(Cell::get).unwrap_or(false) {
        let _ = ALLOCATED_BYTES.try_with(|a| a.set(a.get().saturating_add(bytes)));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; counting
// only touches const-initialised thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which `System` shares.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated by `System` (through this allocator) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size.saturating_sub(layout.size()));
        // SAFETY: as for `dealloc`; `new_size` comes from the caller under the same contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Runs `f`, returning its result and the bytes this thread allocated meanwhile.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    ALLOCATED_BYTES.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    let out = f();
    COUNTING.with(|c| c.set(false));
    (out, ALLOCATED_BYTES.with(Cell::get))
}

/// What decoding `input_bytes` bytes may allocate: the widest sequence element in `Body`,
/// `(String, f64)`, takes 32 bytes of memory for at least 12 bytes of input.
fn allocation_allowed(input_bytes: usize) -> usize {
    3 * input_bytes + 64
}

// ---------------------------------------------------------------------------------------------
// Generators

fn string() -> impl Strategy<Value = String> {
    prop_oneof![Just(String::new()), "[a-z0-9-]{1,12}", "\\PC{0,24}"]
}

fn nonce() -> impl Strategy<Value = [u8; 32]> {
    any::<[u8; 32]>()
}

fn body() -> impl Strategy<Value = Body> {
    prop_oneof![
        (any::<u64>(), string(), nonce()).prop_map(|(node_id, cluster, nonce)| Body::Hello {
            node_id,
            cluster,
            nonce
        }),
        (any::<u64>(), nonce(), nonce()).prop_map(|(node_id, nonce, proof)| Body::Challenge {
            node_id,
            nonce,
            proof
        }),
        nonce().prop_map(|proof| Body::Auth { proof }),
        Just(Body::Welcome),
        string().prop_map(|reason| Body::Refused { reason }),
        any::<u64>().prop_map(|payload| Body::Ping { payload }),
        any::<u64>().prop_map(|payload| Body::Pong { payload }),
        Just(Body::ClockSyncRequest),
        any::<Option<(u64, u64)>>().prop_map(|master_time| Body::ClockSyncReply { master_time }),
        (any::<u64>(), any::<u32>()).prop_map(|(config_seq, lease_ms)| Body::LeaseRequest {
            config_seq,
            lease_ms,
            oat: config_seq ^ 5
        }),
        (any::<u64>(), any::<u32>()).prop_map(|(config_seq, lease_ms)| Body::LeaseGrant {
            config_seq,
            lease_ms,
            gc: config_seq >> 1
        }),
        any::<u64>().prop_map(|config_seq| Body::LeaseAck { config_seq }),
        Just(Body::StatusRequest),
        (
            any::<u64>(),
            any::<u64>(),
            string(),
            any::<bool>(),
            prop::collection::vec((string(), any::<f64>()), 0..6),
        )
            .prop_map(|(node_id, config_seq, role, clock_enabled, metrics)| {
                Body::StatusReply { node_id, config_seq, role, clock_enabled, metrics }
            }),
        any::<u64>().prop_map(|addr| Body::ReadObject { addr }),
        (any::<u64>(), any::<u32>(), prop::collection::vec(any::<u64>(), 0..40))
            .prop_map(|(header, len_bytes, words)| Body::ObjectImage { header, len_bytes, words }),
        (any::<u64>(), any::<u64>(), any::<u8>()).prop_map(|(addr, rts, flags)| Body::Read {
            addr,
            rts,
            flags
        }),
        (any::<u64>(), any::<u64>(), any::<u32>(), any::<u64>()).prop_map(
            |(addr, header, len_bytes, rts)| Body::StillNewest { addr, header, len_bytes, rts }
        ),
        any::<u32>().prop_map(|len_bytes| Body::Reserve { len_bytes }),
        (any::<u64>(), any::<u64>()).prop_map(|(addr, version)| Body::Reserved { addr, version }),
        any::<u64>().prop_map(|addr| Body::Release { addr }),
        (any::<u64>(), any::<u16>(), any::<u64>(), words(), words()).prop_map(
            |(tx, region, seq, entries, words)| Body::Lock { tx, region, seq, entries, words }
        ),
        (any::<u16>(), words()).prop_map(|(region, images)| Body::Replicate { region, images }),
        words().prop_map(|reads| Body::Validate { reads }),
        (
            any::<u64>(),
            any::<u16>(),
            any::<u64>(),
            words(),
            words(),
            truncations(),
            proptest::collection::vec(any::<u16>(), 0..4)
        )
            .prop_map(|(tx, region, wts, entries, words, truncate, regions)| {
                Body::CommitBackup { tx, region, wts, entries, words, truncate, regions }
            }),
        (any::<u64>(), words())
            .prop_map(|(seq, coordinators)| Body::RecoverQuery { seq, coordinators }),
        (words(), words(), words()).prop_map(|(records, locks, evidence)| {
            Body::RecoverState { records, locks, evidence }
        }),
        (any::<u64>(), words()).prop_map(|(seq, decisions)| Body::RecoverDecide { seq, decisions }),
        (any::<u64>(), any::<u16>(), any::<u64>())
            .prop_map(|(tx, region, wts)| Body::CommitPrimary { tx, region, wts }),
        (truncations(), truncations())
            .prop_map(|(truncate, discard)| Body::Truncate { truncate, discard }),
        (any::<u64>(), any::<u16>(), words()).prop_map(|(tx, region, allocs)| Body::Abort {
            tx,
            region,
            allocs
        }),
        (any::<u16>(), any::<u64>(), any::<u64>(), any::<u64>(), string())
            .prop_map(|(code, addr, a, b, message)| Body::Declined { code, addr, a, b, message }),
        Just(Body::ConfigRequest),
        string().prop_map(|json| Body::ConfigReply { json }),
        any::<bool>().prop_map(|flag| Body::Done { flag }),
        any::<u64>().prop_map(|oat| Body::OatReport { oat }),
        (any::<u64>(), string()).prop_map(|(seq, json)| Body::NewConfig { seq, json }),
        (any::<u64>(), any::<u64>()).prop_map(|(seq, ff)| Body::NewConfigAck { seq, ff }),
        any::<u64>().prop_map(|seq| Body::ConfigCommit { seq }),
        (any::<u64>(), any::<u64>()).prop_map(|(seq, ff)| Body::Advance { seq, ff }),
        (any::<u16>(), string()).prop_map(|(code, message)| Body::Error { code, message }),
    ]
}

fn words() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(any::<u64>(), 0..12)
}

fn truncations() -> impl Strategy<Value = Vec<(u64, u16)>> {
    prop::collection::vec((any::<u64>(), any::<u16>()), 0..6)
}

fn message() -> impl Strategy<Value = Message> {
    let application = prop::sample::select(vec![Kind::Request, Kind::Response, Kind::OneWay]);
    (body(), application, any::<u64>()).prop_map(|(body, kind, request_id)| {
        if body.is_handshake() {
            Message::handshake(body)
        } else {
            Message::new(kind, request_id, body)
        }
    })
}

/// One message of every kind, with non-trivial fields.
fn one_of_each() -> Vec<Body> {
    vec![
        Body::Hello { node_id: 3, cluster: "prod-é".into(), nonce: [7; 32] },
        Body::Challenge { node_id: 9, nonce: [1; 32], proof: [2; 32] },
        Body::Auth { proof: [3; 32] },
        Body::Welcome,
        Body::Refused { reason: "wrong cluster name".into() },
        Body::Ping { payload: u64::MAX },
        Body::Pong { payload: 1 },
        Body::ClockSyncRequest,
        Body::ClockSyncReply { master_time: Some((10, 20)) },
        Body::LeaseRequest { config_seq: 4, lease_ms: 10, oat: 99 },
        Body::LeaseGrant { config_seq: 4, lease_ms: 10, gc: 98 },
        Body::LeaseAck { config_seq: 4 },
        Body::StatusRequest,
        Body::StatusReply {
            node_id: 2,
            config_seq: 5,
            role: "cm".into(),
            clock_enabled: true,
            metrics: vec![("drift_ppm".into(), 1.5), (String::new(), f64::NEG_INFINITY)],
        },
        Body::ReadObject { addr: 0xdead_beef },
        Body::ObjectImage { header: 1, len_bytes: 12, words: vec![1, 2] },
        Body::Read { addr: 0x1_0000_0040, rts: 99, flags: 3 },
        Body::StillNewest { addr: 0x1_0000_0040, header: 1 << 62, len_bytes: 8, rts: 100 },
        Body::Reserve { len_bytes: 24 },
        Body::Reserved { addr: 0x2_0000_0040, version: 0 },
        Body::Release { addr: 0x2_0000_0040 },
        Body::Lock {
            tx: 7,
            region: 2,
            seq: 1,
            entries: vec![0x2_0000_0040, 8 << 8, 5],
            words: vec![9],
        },
        Body::Validate { reads: vec![0x1_0000_0040, 1 << 62, 8] },
        Body::CommitBackup {
            tx: 7,
            region: 2,
            wts: 120,
            entries: vec![0x2_0000_0040, 8 << 8, 5],
            words: vec![9],
            truncate: vec![(6, 2), (5, 3)],
            regions: vec![2, 5],
        },
        Body::CommitPrimary { tx: 7, region: 2, wts: 120 },
        Body::Truncate { truncate: vec![(7, 2)], discard: vec![(8, 3)] },
        Body::Abort { tx: 8, region: 3, allocs: vec![0x3_0000_0040] },
        Body::Declined { code: 3, addr: 0x3_0000_0040, a: 0, b: 0, message: "busy".into() },
        Body::ConfigRequest,
        Body::ConfigReply { json: "{}".into() },
        Body::Done { flag: true },
        Body::OatReport { oat: 77 },
        Body::NewConfig { seq: 2, json: "{}".into() },
        Body::NewConfigAck { seq: 2, ff: 1_000 },
        Body::ConfigCommit { seq: 2 },
        Body::Advance { seq: 2, ff: 1_000 },
        Body::RecoverQuery { seq: 3, coordinators: vec![4] },
        Body::RecoverState {
            records: vec![4, 9, 2, 120, 2, 1, 2],
            locks: vec![4, 9, 1],
            evidence: vec![],
        },
        Body::RecoverDecide { seq: 3, decisions: vec![4, 9, 120] },
        Body::Replicate { region: 2, images: vec![0x2_0000_0040, 5, 8, 9] },
        Body::Error { code: 2, message: "unsupported".into() },
    ]
}

fn frame_of(body: Body) -> Vec<u8> {
    let kind = if body.is_handshake() { Kind::Handshake } else { Kind::Request };
    Message::new(kind, 5, body).encode_frame(FRAME_BYTES_MAX_DEFAULT).unwrap()
}

fn has_nan(msg: &Message) -> bool {
    match &msg.body {
        Body::StatusReply { metrics, .. } => metrics.iter().any(|(_, v)| v.is_nan()),
        _ => false,
    }
}

/// Hostile inputs: raw bytes, valid headers with random fields, mutated and cut valid frames.
fn hostile() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..64),
        prop::collection::vec(any::<u8>(), 64..600),
        // A plausible header (right version, any kind, a real tag) and random fields.
        (
            0u8..=5,
            prop::sample::select(tag::ALL.to_vec()),
            prop::collection::vec(any::<u8>(), 0..200)
        )
            .prop_map(|(kind, tag, fields)| {
                let mut b = vec![PROTOCOL_VERSION, kind];
                b.extend_from_slice(&0u64.to_le_bytes());
                b.push(tag);
                b.extend(fields);
                b
            }),
        // A valid frame with a few bytes overwritten.
        (message(), prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..5))
            .prop_map(|(msg, edits)| {
                let mut f = msg.encode_frame(FRAME_BYTES_MAX_DEFAULT).unwrap();
                for (at, byte) in edits {
                    let i = at.index(f.len());
                    f[i] = byte;
                }
                f
            }),
        // A valid frame cut short, or with bytes added.
        (message(), any::<prop::sample::Index>(), prop::collection::vec(any::<u8>(), 0..8))
            .prop_map(|(msg, cut, extra)| {
                let mut f = msg.encode_frame(FRAME_BYTES_MAX_DEFAULT).unwrap();
                if extra.is_empty() {
                    f.truncate(cut.index(f.len()));
                } else {
                    f.extend(extra);
                }
                f
            }),
    ]
}

// ---------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(ordo_seed::proptest_config("arbitrary_messages_round_trip", 2_000))]

    /// Encoding then decoding gives the message back, bit for bit (NaN payloads included:
    /// re-encoding the decoded message gives the same bytes).
    #[test]
    fn arbitrary_messages_round_trip(msg in message()) {
        let frame = msg.encode_frame(FRAME_BYTES_MAX_DEFAULT).unwrap();
        let declared = frame_body_len(frame[..4].try_into().unwrap(), FRAME_BYTES_MAX_DEFAULT);
        prop_assert_eq!(declared, Ok(frame.len() - FRAME_HEADER_BYTES));
        let (decoded, used) = Message::decode_frame(&frame, FRAME_BYTES_MAX_DEFAULT).unwrap();
        prop_assert_eq!(used, frame.len());
        prop_assert_eq!(decoded.encode_frame(FRAME_BYTES_MAX_DEFAULT).unwrap(), frame);
        if !has_nan(&msg) {
            prop_assert_eq!(decoded, msg);
        }
    }
}

proptest! {
    #![proptest_config(ordo_seed::proptest_config("hostile_bytes_never_panic_nor_overallocate", 5_000))]

    /// Hostile bytes, read as a frame and as a body, give a result (never a panic) and
    /// allocate at most a small multiple of their length.
    #[test]
    fn hostile_bytes_never_panic_nor_overallocate(input in hostile()) {
        let (_, as_frame) = allocated_by(|| Message::decode_frame(&input, FRAME_BYTES_MAX_DEFAULT));
        let (_, as_body) = allocated_by(|| Message::decode_body(&input));
        prop_assert!(as_frame <= allocation_allowed(input.len()),
            "decode_frame of {} bytes allocated {as_frame}", input.len());
        prop_assert!(as_body <= allocation_allowed(input.len()),
            "decode_body of {} bytes allocated {as_body}", input.len());
    }
}

proptest! {
    #![proptest_config(ordo_seed::proptest_config("every_strict_prefix_is_truncated", 300))]

    /// Every strict prefix of a frame is `Truncated`; every strict prefix of a body is
    /// `Truncated` or, cut inside a sequence, `SequenceTooLong`.
    #[test]
    fn every_strict_prefix_is_truncated(msg in message()) {
        let frame = msg.encode_frame(FRAME_BYTES_MAX_DEFAULT).unwrap();
        check_prefixes(&frame)?;
    }
}

fn check_prefixes(frame: &[u8]) -> Result<(), TestCaseError> {
    for cut in 0..frame.len() {
        let got = Message::decode_frame(&frame[..cut], FRAME_BYTES_MAX_DEFAULT);
        prop_assert!(
            matches!(got, Err(WireError::Truncated { .. })),
            "frame cut at {cut}/{}: {got:?}",
            frame.len()
        );
    }
    let body = &frame[FRAME_HEADER_BYTES..];
    for cut in 0..body.len() {
        let got = Message::decode_body(&body[..cut]);
        prop_assert!(
            matches!(got, Err(WireError::Truncated { .. } | WireError::SequenceTooLong { .. })),
            "body cut at {cut}/{}: {got:?}",
            body.len()
        );
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Each message, and the generators, cover every tag

#[test]
fn one_of_each_covers_every_tag_and_round_trips() {
    let tags: Vec<u8> = one_of_each().iter().map(Body::tag).collect();
    assert_eq!(tags, tag::ALL, "a message was added: extend one_of_each() and body()");
    for body in one_of_each() {
        let frame = frame_of(body.clone());
        let (decoded, _) = Message::decode_frame(&frame, FRAME_BYTES_MAX_DEFAULT).unwrap();
        assert_eq!(decoded.body, body);
        check_prefixes(&frame).unwrap();
        assert_eq!(tag::name(body.tag()), Some(body.name()));
    }
}

/// The tag table is part of the format: changing it must change this test (and the version).
#[test]
fn tags_are_pinned() {
    let expected: &[(u8, &str)] = &[
        (0x01, "Hello"),
        (0x02, "Challenge"),
        (0x03, "Auth"),
        (0x04, "Welcome"),
        (0x05, "Refused"),
        (0x10, "Ping"),
        (0x11, "Pong"),
        (0x12, "ClockSyncRequest"),
        (0x13, "ClockSyncReply"),
        (0x14, "LeaseRequest"),
        (0x15, "LeaseGrant"),
        (0x16, "LeaseAck"),
        (0x17, "StatusRequest"),
        (0x18, "StatusReply"),
        (0x19, "ReadObject"),
        (0x1a, "ObjectImage"),
        (0x20, "Read"),
        (0x21, "StillNewest"),
        (0x22, "Reserve"),
        (0x23, "Reserved"),
        (0x24, "Release"),
        (0x25, "Lock"),
        (0x26, "Validate"),
        (0x27, "CommitBackup"),
        (0x28, "CommitPrimary"),
        (0x29, "Truncate"),
        (0x2a, "Abort"),
        (0x2b, "Declined"),
        (0x2c, "ConfigRequest"),
        (0x2d, "ConfigReply"),
        (0x2e, "Done"),
        (0x2f, "OatReport"),
        (0x30, "NewConfig"),
        (0x31, "NewConfigAck"),
        (0x32, "ConfigCommit"),
        (0x33, "Advance"),
        (0x34, "RecoverQuery"),
        (0x35, "RecoverState"),
        (0x36, "RecoverDecide"),
        (0x37, "Replicate"),
        (0x1f, "Error"),
    ];
    let actual: Vec<(u8, &str)> = tag::ALL.iter().map(|&t| (t, tag::name(t).unwrap())).collect();
    assert_eq!(actual, expected);
    assert_eq!(PROTOCOL_VERSION, 4);
}

#[test]
fn golden_bytes_of_a_ping_request() {
    let msg = Message::new(Kind::Request, 0x2a, Body::Ping { payload: 0x0102_0304_0506_0708 });
    let frame = msg.encode_frame(FRAME_BYTES_MAX_DEFAULT).unwrap();
    #[rustfmt::skip]
    let expected = [
        19, 0, 0, 0,                    // body length
        4,                              // version
        1,                              // kind: Request
        0x2a, 0, 0, 0, 0, 0, 0, 0,      // request id
        0x10,                           // tag: Ping
        8, 7, 6, 5, 4, 3, 2, 1,         // payload
    ];
    assert_eq!(frame, expected);
}

#[test]
fn golden_bytes_of_a_status_reply() {
    let body = Body::StatusReply {
        node_id: 2,
        config_seq: 3,
        role: "cm".into(),
        clock_enabled: true,
        metrics: vec![("x".into(), 1.0)],
    };
    let frame = Message::new(Kind::Response, 1, body).encode_frame(u32::MAX).unwrap();
    #[rustfmt::skip]
    let expected = [
        51, 0, 0, 0,
        4, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0x18,
        2, 0, 0, 0, 0, 0, 0, 0,         // node_id
        3, 0, 0, 0, 0, 0, 0, 0,         // config_seq
        2, 0, 0, 0, b'c', b'm',         // role
        1,                              // clock_enabled
        1, 0, 0, 0,                     // metrics: count
        1, 0, 0, 0, b'x',               //   name
        0, 0, 0, 0, 0, 0, 0xf0, 0x3f,   //   1.0
    ];
    assert_eq!(frame, expected);
}

// ---------------------------------------------------------------------------------------------
// Typed errors

/// A body header (this version, `kind`, request id 0, `tag`) followed by `fields`.
fn raw_body(kind: Kind, tag: u8, fields: &[u8]) -> Vec<u8> {
    let mut b = vec![PROTOCOL_VERSION, kind.code()];
    b.extend_from_slice(&0u64.to_le_bytes());
    b.push(tag);
    b.extend_from_slice(fields);
    b
}

#[test]
fn oversized_declared_length_is_refused_before_allocating() {
    let prefix = u32::MAX.to_le_bytes();
    let expected = WireError::FrameTooLarge { declared: u64::from(u32::MAX), max: 1024 };
    assert_eq!(frame_body_len(prefix, 1024), Err(expected));
    let (got, allocated) = allocated_by(|| Message::decode_frame(&prefix, 1024));
    assert_eq!(got, Err(expected));
    assert_eq!(allocated, 0);
    // Exactly at the limit is fine.
    assert_eq!(frame_body_len(1024u32.to_le_bytes(), 1024), Ok(1024));
}

#[test]
fn encoding_above_the_frame_limit_is_refused() {
    let body = Body::ObjectImage { header: 0, len_bytes: 0, words: vec![0; 100] };
    let got = Message::new(Kind::Response, 1, body).encode_frame(64);
    let declared = u64::try_from(BODY_HEADER_BYTES + 8 + 4 + 4 + 800).unwrap();
    assert_eq!(got, Err(WireError::FrameTooLarge { declared, max: 64 }));
}

#[test]
fn unknown_tag_and_tag_zero() {
    for bad in [0x00, 0x06, 0x38, 0x40, 0xff] {
        let got = Message::decode_body(&raw_body(Kind::Request, bad, &[]));
        assert_eq!(got, Err(WireError::UnknownTag { tag: bad, at: 10 }));
    }
}

#[test]
fn bad_version() {
    let mut b = raw_body(Kind::Request, tag::PING, &[0; 8]);
    b[0] = 1;
    assert_eq!(Message::decode_body(&b), Err(WireError::BadVersion { found: 1, expected: 4 }));
}

#[test]
fn unknown_kind() {
    let mut b = raw_body(Kind::Request, tag::PING, &[0; 8]);
    b[1] = 9;
    assert_eq!(Message::decode_body(&b), Err(WireError::UnknownKind { kind: 9 }));
}

#[test]
fn handshake_and_application_messages_keep_to_their_kinds() {
    let ping_in_handshake = raw_body(Kind::Handshake, tag::PING, &[0; 8]);
    assert!(matches!(
        Message::decode_body(&ping_in_handshake),
        Err(WireError::KindMismatch { kind: Kind::Handshake, tag: tag::PING, name: "Ping" })
    ));
    let welcome_as_request = raw_body(Kind::Request, tag::WELCOME, &[]);
    assert!(matches!(
        Message::decode_body(&welcome_as_request),
        Err(WireError::KindMismatch { kind: Kind::Request, .. })
    ));
    let encode = Message::new(Kind::Request, 1, Body::Welcome).encode_frame(1024);
    assert!(matches!(encode, Err(WireError::KindMismatch { .. })));
}

#[test]
fn trailing_bytes() {
    let b = raw_body(Kind::OneWay, tag::PING, &[0; 9]);
    assert_eq!(
        Message::decode_body(&b),
        Err(WireError::TrailingBytes { tag: tag::PING, name: "Ping", at: 19, extra: 1 })
    );
    let welcome = raw_body(Kind::Handshake, tag::WELCOME, &[0]);
    assert!(matches!(Message::decode_body(&welcome), Err(WireError::TrailingBytes { .. })));
}

#[test]
fn bad_utf8() {
    let mut fields = 3u32.to_le_bytes().to_vec();
    fields.extend_from_slice(&[b'o', 0xff, b'k']);
    let got = Message::decode_body(&raw_body(Kind::Handshake, tag::REFUSED, &fields));
    assert_eq!(got, Err(WireError::BadUtf8 { field: "reason", at: 15, valid_up_to: 1 }));
}

#[test]
fn string_longer_than_the_limit() {
    let len = u32::try_from(STRING_BYTES_MAX + 1).unwrap();
    let mut fields = len.to_le_bytes().to_vec();
    fields.resize(4 + STRING_BYTES_MAX + 1, b'a');
    let got = Message::decode_body(&raw_body(Kind::Handshake, tag::REFUSED, &fields));
    let expected = WireError::StringTooLong {
        field: "reason",
        at: 11,
        len: u64::from(len),
        max: STRING_BYTES_MAX,
    };
    assert_eq!(got, Err(expected));
    // A declared length beyond the input is truncation, found before allocating.
    let short = raw_body(Kind::Handshake, tag::REFUSED, &1000u32.to_le_bytes());
    let (got, allocated) = allocated_by(|| Message::decode_body(&short));
    assert!(matches!(got, Err(WireError::Truncated { field: "reason", need: 1000, .. })));
    assert_eq!(allocated, 0);
    // Encoding refuses one too.
    let reason = "a".repeat(STRING_BYTES_MAX + 1);
    let got = Message::handshake(Body::Refused { reason }).encode_frame(u32::MAX);
    assert!(matches!(got, Err(WireError::StringTooLong { field: "reason", .. })));
}

#[test]
fn huge_sequence_count_is_refused_without_allocating() {
    let mut fields = Vec::new();
    fields.extend_from_slice(&7u64.to_le_bytes()); // header
    fields.extend_from_slice(&8u32.to_le_bytes()); // len_bytes
    fields.extend_from_slice(&u32::MAX.to_le_bytes()); // words: count
    fields.extend_from_slice(&[0; 16]); // room for two words only
    let b = raw_body(Kind::Response, tag::OBJECT_IMAGE, &fields);
    let (got, allocated) = allocated_by(|| Message::decode_body(&b));
    let expected = WireError::SequenceTooLong {
        field: "words",
        at: 23,
        count: u64::from(u32::MAX),
        element_bytes_min: 8,
        have: 16,
    };
    assert_eq!(got, Err(expected));
    assert_eq!(allocated, 0);
}

#[test]
fn bad_bool_and_bad_option_flag() {
    let mut status = Vec::new();
    status.extend_from_slice(&[0; 16]); // node_id, config_seq
    status.extend_from_slice(&0u32.to_le_bytes()); // role ""
    status.push(2); // clock_enabled
    status.extend_from_slice(&0u32.to_le_bytes()); // metrics
    let got = Message::decode_body(&raw_body(Kind::Response, tag::STATUS_REPLY, &status));
    assert_eq!(got, Err(WireError::BadBool { field: "clock_enabled", at: 31, value: 2 }));

    let got = Message::decode_body(&raw_body(Kind::Response, tag::CLOCK_SYNC_REPLY, &[7]));
    assert_eq!(got, Err(WireError::BadOption { field: "master_time", at: 11, value: 7 }));
}

#[test]
fn errors_name_what_and_where() {
    let got = Message::decode_body(&raw_body(Kind::Request, tag::LEASE_REQUEST, &[0; 10]));
    let e = got.unwrap_err();
    assert_eq!(e, WireError::Truncated { field: "lease_ms", at: 19, need: 4, have: 2 });
    assert_eq!(e.to_string(), "truncated reading lease_ms at byte 19: need 4 bytes, 2 remain");
}
