//! Bad input to the B+tree: inverted and degenerate scan bounds, oversized keys and values
//! (refused with a typed error, the tree and the transaction unchanged and usable), the empty
//! key, bad options, and addresses that are not trees (typed corruption errors, no panic).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::tree_common;

use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::ops::ControlFlow;

use ordo::map::HashMap;
use ordo::tree::{
    BTree, Direction, Edit, KEY_BYTES_MAX, NODE_BYTES_MAX, NODE_BYTES_MIN, TreeOptions,
    VALUE_BYTES_MAX,
};
use ordo::{Error, Versions};
use tree_common::db;

fn keys_of(r: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<Vec<u8>> {
    r.into_iter().map(|(k, _)| k).collect()
}

#[test]
fn inverted_bounds_are_invalid_and_equal_bounds_are_empty_or_one() {
    let db = db(Versions::Single);
    let tree = db.run(BTree::create).unwrap();
    db.run(|tx| {
        for k in ["a", "b", "c"] {
            tree.insert(tx, k.as_bytes(), b"v")?;
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    let (a, b, c): (&[u8], &[u8], &[u8]) = (b"a", b"b", b"c");
    let mut tx = db.begin().unwrap();
    for dir in [Direction::Forward, Direction::Backward] {
        for (lo, hi) in
            [(Included(c), Included(a)), (Excluded(c), Excluded(a)), (Included(b), Excluded(a))]
        {
            let mut called = false;
            let r = tree.range(&mut tx, lo, hi, dir, None, |_, _| {
                called = true;
                ControlFlow::Continue(())
            });
            assert_eq!(r, Err(Error::InvalidRange));
            assert!(!called);
        }
        // Equal keys: only [b, b] holds b.
        assert_eq!(
            keys_of(tree.range_entries(&mut tx, Included(b), Included(b), dir, None).unwrap()),
            [b]
        );
        for (lo, hi) in
            [(Included(b), Excluded(b)), (Excluded(b), Included(b)), (Excluded(b), Excluded(b))]
        {
            assert_eq!(tree.range_entries(&mut tx, lo, hi, dir, None).unwrap(), []);
        }
        // Limit 0 visits nothing, but an inverted range is still refused.
        assert_eq!(tree.range(&mut tx, Unbounded, Unbounded, dir, Some(0), |_, _| panic!()), Ok(0));
        assert_eq!(
            tree.range(&mut tx, Included(c), Included(a), dir, Some(0), |_, _| panic!()),
            Err(Error::InvalidRange)
        );
    }
    // A bound longer than any key is still just a bound.
    let long = vec![b'b'; KEY_BYTES_MAX * 4];
    let r = tree.range_entries(&mut tx, Excluded(&long[..]), Unbounded, Direction::Forward, None);
    assert_eq!(keys_of(r.unwrap()), [c]);
    let r = tree.range_entries(&mut tx, Unbounded, Included(&long[..]), Direction::Backward, None);
    assert_eq!(keys_of(r.unwrap()), [b, a]);
    // The transaction is still usable and commits.
    tree.insert(&mut tx, b"d", b"v").unwrap();
    tx.commit().unwrap();
    assert_eq!(db.run(|tx| tree.len(tx)).unwrap(), 4);
}

#[test]
fn oversized_keys_and_values_are_refused_and_change_nothing() {
    let db = db(Versions::Single);
    let tree = db.run(BTree::create).unwrap();
    db.run(|tx| tree.insert(tx, b"k", b"v")).unwrap();
    let long_key = vec![7u8; KEY_BYTES_MAX + 1];
    let long_value = vec![7u8; VALUE_BYTES_MAX + 1];
    let mut tx = db.begin().unwrap();
    assert_eq!(
        tree.insert(&mut tx, &long_key, b"v"),
        Err(Error::KeyTooLarge { len_bytes: KEY_BYTES_MAX + 1, max_bytes: KEY_BYTES_MAX })
    );
    assert!(matches!(tree.insert(&mut tx, b"k", &long_value), Err(Error::ValueTooLarge { .. })));
    assert!(matches!(tree.get(&mut tx, &long_key), Err(Error::KeyTooLarge { .. })));
    assert!(matches!(tree.remove(&mut tx, &long_key), Err(Error::KeyTooLarge { .. })));
    // `update` refuses a long key before it reads anything (its closure is not called), and a
    // long value its closure returns before it writes anything.
    let refused = tree.update(&mut tx, &long_key, |_| unreachable!("called for a refused key"));
    assert!(matches!(refused, Err(Error::KeyTooLarge { .. })));
    let refused = tree.update(&mut tx, b"k", |old| {
        assert_eq!(old, Some(&b"v"[..]));
        Edit::Set(long_value.clone())
    });
    assert!(matches!(refused, Err(Error::ValueTooLarge { .. })));
    assert_eq!(tree.get(&mut tx, b"k").unwrap(), Some(b"v".to_vec()));
    assert!(tx.doomed().is_none());
    // The limits themselves are fine.
    let max_key = vec![1u8; KEY_BYTES_MAX];
    let max_value = vec![2u8; VALUE_BYTES_MAX];
    assert_eq!(tree.insert(&mut tx, &max_key, &max_value).unwrap(), None);
    // An empty value has no object to live in: it stays inline even beside the longest key.
    assert_eq!(tree.insert(&mut tx, &[3u8; KEY_BYTES_MAX], b"").unwrap(), None);
    assert_eq!(tree.get(&mut tx, &[3u8; KEY_BYTES_MAX]).unwrap(), Some(vec![]));
    tx.commit().unwrap();
    assert_eq!(db.run(|tx| tree.get(tx, &max_key)).unwrap(), Some(max_value));
    assert_eq!(db.run(|tx| tree.get(tx, b"k")).unwrap(), Some(b"v".to_vec()));
    assert_eq!(db.run(|tx| tree.check_invariants(tx)).unwrap().entries, 3);

    // Small nodes have a lower key limit, reported by the options and enforced after the root
    // is read (the root names the node size).
    let options = TreeOptions::with_node_bytes(NODE_BYTES_MIN);
    let small = db.run(|tx| BTree::create_with(tx, options)).unwrap();
    let limit = options.key_bytes_max();
    assert_eq!(limit, 40);
    let mut tx = db.begin().unwrap();
    assert_eq!(
        small.insert(&mut tx, &vec![0u8; limit + 1], b""),
        Err(Error::KeyTooLarge { len_bytes: limit + 1, max_bytes: limit })
    );
    assert!(matches!(small.get(&mut tx, &vec![0u8; limit + 1]), Err(Error::KeyTooLarge { .. })));
    small.insert(&mut tx, &vec![0u8; limit], b"").unwrap();
    tx.commit().unwrap();
    assert_eq!(db.run(|tx| small.len(tx)).unwrap(), 1);
}

#[test]
fn empty_key_and_empty_value_are_ordinary() {
    let db = db(Versions::Single);
    let tree = db.run(|tx| BTree::create_with(tx, TreeOptions::with_node_bytes(256))).unwrap();
    db.run(|tx| {
        for i in 0..200u32 {
            tree.insert(tx, format!("{i:05}").as_bytes(), b"x")?;
        }
        tree.insert(tx, b"", b"")
    })
    .unwrap();
    // The empty key sorts first, also across many leaves and levels.
    assert_eq!(db.run(|tx| tree.first(tx)).unwrap(), Some((vec![], vec![])));
    assert_eq!(db.run(|tx| tree.get(tx, b"")).unwrap(), Some(vec![]));
    let empty: &[u8] = b"";
    let r =
        db.run(|tx| tree.range_entries(tx, Unbounded, Included(empty), Direction::Backward, None));
    assert_eq!(r.unwrap(), [(vec![], vec![])]);
    let r = db
        .run(|tx| tree.range_entries(tx, Excluded(empty), Unbounded, Direction::Forward, Some(1)));
    assert_eq!(keys_of(r.unwrap()), [b"00000".to_vec()]);
    assert!(db.run(|tx| tree.check_invariants(tx)).unwrap().depth >= 2);
    assert_eq!(db.run(|tx| tree.remove(tx, b"")).unwrap(), Some(vec![]));
    assert_eq!(db.run(|tx| tree.get(tx, b"")).unwrap(), None);
    assert_eq!(db.run(|tx| tree.len(tx)).unwrap(), 200);
}

#[test]
fn bad_options_are_config_errors() {
    let db = db(Versions::Single);
    for node_bytes in [0, NODE_BYTES_MIN - 1, NODE_BYTES_MAX + 1] {
        let options = TreeOptions::with_node_bytes(node_bytes);
        let r = db.run(|tx| BTree::create_with(tx, options));
        assert!(matches!(r, Err(Error::Config(_))), "{node_bytes}");
        assert_eq!(options.key_bytes_max(), 0);
    }
    for node_bytes in [NODE_BYTES_MIN, 1000, NODE_BYTES_MAX] {
        let options = TreeOptions::with_node_bytes(node_bytes);
        let tree = db.run(|tx| BTree::create_with(tx, options)).unwrap();
        db.run(|tx| tree.insert(tx, b"k", b"v")).unwrap();
        assert_eq!(db.run(|tx| tree.check_invariants(tx)).unwrap().node_bytes, node_bytes);
    }
}

#[test]
fn addresses_that_are_not_trees_are_typed_errors() {
    let db = db(Versions::Single);
    let blob = db.run(|tx| tx.alloc_bytes(&[0xAB; 4096])).unwrap();
    let tiny = db.run(|tx| tx.alloc(&7u64)).unwrap();
    let map = db.run(|tx| HashMap::create(tx, 0)).unwrap();
    for addr in [blob, tiny, map.root()] {
        let t = BTree::open(addr);
        let all: (Bound<&[u8]>, Bound<&[u8]>) = (Unbounded, Unbounded);
        let mut tx = db.begin().unwrap();
        assert!(matches!(t.get(&mut tx, b"k"), Err(Error::CorruptTree { .. })));
        assert!(matches!(t.insert(&mut tx, b"k", b"v"), Err(Error::CorruptTree { .. })));
        assert!(matches!(t.remove(&mut tx, b"k"), Err(Error::CorruptTree { .. })));
        assert!(matches!(t.len(&mut tx), Err(Error::CorruptTree { .. })));
        assert!(matches!(t.check_invariants(&mut tx), Err(Error::CorruptTree { .. })));
        let r = t.range(&mut tx, all.0, all.1, Direction::Forward, None, |_, _| panic!());
        assert!(matches!(r, Err(Error::CorruptTree { .. })));
    }
    // Nothing was written: the blob is unchanged.
    assert_eq!(db.run(|tx| tx.read_bytes(blob)).unwrap(), vec![0xAB; 4096]);
    // A freed tree is gone.
    let tree = db.run(BTree::create).unwrap();
    db.run(|tx| tree.destroy(tx)).unwrap();
    assert!(matches!(db.run(|tx| tree.get(tx, b"k")), Err(Error::NotAllocated { .. })));
}
