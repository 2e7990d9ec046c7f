//! Bad input: over-long keys and values are typed errors that leave the map and the transaction
//! untouched; the longest allowed ones work. Addresses that are not a map, and maps whose bytes
//! were overwritten with garbage, give errors — never a panic or a hang.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::map_common;

use map_common::{Model, assert_same, db};
use ordo::map::{DEPTH_BITS_MAX, HashMap, KEY_BYTES_MAX, MapOptions, VALUE_BYTES_MAX};
use ordo::{Addr, Error, Versions};
use rand::{Rng, SeedableRng, rngs::SmallRng};

#[test]
fn over_long_keys_and_values_are_typed_errors_and_change_nothing() {
    let db = db(Versions::Single);
    let map = db.run(|tx| HashMap::create(tx, 0)).unwrap();
    let mut model = Model::new();
    db.run(|tx| {
        for i in 0..50u32 {
            let (k, v) = (format!("key{i}").into_bytes(), vec![i as u8; i as usize * 7]);
            map.insert(tx, &k, &v)?;
            model.insert(k, v);
        }
        Ok::<_, Error>(())
    })
    .unwrap();

    let long_key = vec![7u8; KEY_BYTES_MAX + 1];
    let long_value = vec![7u8; VALUE_BYTES_MAX + 1];
    let key_error = Error::KeyTooLarge { len_bytes: KEY_BYTES_MAX + 1, max_bytes: KEY_BYTES_MAX };
    let value_error =
        Error::ValueTooLarge { len_bytes: VALUE_BYTES_MAX + 1, max_bytes: VALUE_BYTES_MAX };
    let mut tx = db.begin().unwrap();
    assert_eq!(map.insert(&mut tx, &long_key, b"v"), Err(key_error.clone()));
    assert_eq!(map.insert(&mut tx, b"key1", &long_value), Err(value_error.clone()));
    assert_eq!(map.insert(&mut tx, b"new", &long_value), Err(value_error));
    assert_eq!(map.get(&mut tx, &long_key), Err(key_error.clone()));
    assert_eq!(map.remove(&mut tx, &long_key), Err(key_error.clone()));
    assert_eq!(map.contains_key(&mut tx, &long_key), Err(key_error));
    // Not an abort: the transaction is still usable, sees the map unchanged, and commits.
    assert_eq!(tx.doomed(), None);
    assert_same(&mut tx, map, &model).unwrap();
    map.insert(&mut tx, b"after", b"ok").unwrap();
    tx.commit().unwrap();
    model.insert(b"after".to_vec(), b"ok".to_vec());
    db.run(|tx| assert_same(tx, map, &model)).unwrap();

    // Inside `run`, the typed error passes through and the attempt is rolled back.
    let r = db.run(|tx| {
        map.insert(tx, b"rolled back", b"x")?;
        map.insert(tx, &vec![0u8; KEY_BYTES_MAX + 1], b"x")
    });
    assert!(matches!(r, Err(Error::KeyTooLarge { .. })));
    db.run(|tx| assert_same(tx, map, &model)).unwrap();
}

#[test]
fn longest_key_and_value_round_trip() {
    let db = db(Versions::Single);
    let map = db.run(|tx| HashMap::create(tx, 0)).unwrap();
    let key = vec![0xABu8; KEY_BYTES_MAX];
    let big = vec![0xCDu8; VALUE_BYTES_MAX];
    assert_eq!(db.run(|tx| map.insert(tx, &key, &big)).unwrap(), None);
    assert_eq!(db.run(|tx| map.get_with(tx, &key, <[u8]>::len)).unwrap(), Some(VALUE_BYTES_MAX));
    // Same length: rewritten in place; then shorter, inline-sized, and empty.
    let big2 = vec![0xEFu8; VALUE_BYTES_MAX];
    assert_eq!(db.run(|tx| map.insert(tx, &key, &big2)).unwrap(), Some(big));
    assert_eq!(db.run(|tx| map.insert(tx, &key, b"small")).unwrap(), Some(big2));
    assert_eq!(db.run(|tx| map.insert(tx, b"", b"")).unwrap(), None);
    assert_eq!(db.run(|tx| map.get(tx, b"")).unwrap(), Some(Vec::new()));
    assert_eq!(db.run(|tx| map.len(tx)).unwrap(), 2);
    assert_eq!(db.run(|tx| map.remove(tx, &key)).unwrap(), Some(b"small".to_vec()));
    assert_eq!(db.run(|tx| map.remove(tx, b"")).unwrap(), Some(Vec::new()));
    assert!(db.run(|tx| map.is_empty(tx)).unwrap());
    assert_eq!(db.run(|tx| map.verify(tx)).unwrap().entries, 0);
}

#[test]
fn bad_options_are_refused() {
    let db = db(Versions::Single);
    let options = MapOptions { depth_bits_max: DEPTH_BITS_MAX + 1, ..MapOptions::default() };
    assert!(matches!(db.run(|tx| HashMap::create_with(tx, 0, options)), Err(Error::Config(_))));
}

/// Runs every map operation on `map`; each must return (anything) rather than panic or hang.
fn poke(db: &ordo::Ordo<ordo_clock::LogicalClock>, map: HashMap) -> Vec<Result<(), Error>> {
    let mut results = Vec::new();
    let mut tx = db.begin().unwrap();
    for k in [&b""[..], b"a", b"key7", &[9u8; 200]] {
        results.push(map.get(&mut tx, k).map(drop));
        results.push(map.insert(&mut tx, k, b"value").map(drop));
        results.push(map.insert(&mut tx, k, &[1u8; 500]).map(drop));
        results.push(map.remove(&mut tx, k).map(drop));
    }
    results.push(map.len(&mut tx).map(drop));
    results.push(map.is_empty(&mut tx).map(drop));
    results.push(map.for_each(&mut tx, |_, _| {}));
    results.push(map.verify(&mut tx).map(drop));
    tx.abort();
    results
}

#[test]
fn wrong_addresses_are_errors() {
    let db = db(Versions::Single);
    let word = db.run(|tx| tx.alloc(&42u64)).unwrap();
    let results = poke(&db, HashMap::open(word));
    assert!(
        results.iter().all(|r| matches!(r, Err(Error::CorruptMap { addr, .. }) if *addr == word))
    );
    let results = poke(&db, HashMap::open(Addr::NULL));
    assert!(results.iter().all(|r| matches!(r, Err(Error::InvalidAddress { .. }))));
}

/// The first slot word of a root (bytes 16..24), as an address.
fn first_slot(db: &ordo::Ordo<ordo_clock::LogicalClock>, map: HashMap) -> Addr {
    db.run(|tx| {
        tx.read_with(map.root(), |b| {
            Addr::from_raw(u64::from_le_bytes(b[16..24].try_into().unwrap()) & !1)
        })
    })
    .unwrap()
}

#[test]
fn garbage_in_map_objects_is_an_error_not_a_panic() {
    let db = db(Versions::Single);
    let seed = ordo_seed::Seed::new("garbage_in_map_objects_is_an_error_not_a_panic");
    let mut rng = SmallRng::seed_from_u64(seed.derive(11));
    let mut errors = 0;
    for round in 0..60 {
        let map = db.run(|tx| HashMap::create(tx, 0)).unwrap();
        db.run(|tx| {
            for i in 0..40u32 {
                map.insert(tx, format!("k{i}").as_bytes(), &vec![1u8; (i as usize * 13) % 300])?;
            }
            Ok::<_, Error>(())
        })
        .unwrap();
        // Overwrite the root's slots, or one bucket, with random bytes (some rounds keep the
        // headers so that decoding gets further).
        let victim = if round % 2 == 0 { map.root() } else { first_slot(&db, map) };
        db.run(|tx| {
            let mut b = tx.read_bytes(victim)?;
            let from = if round % 4 < 2 { 16 } else { 0 };
            for byte in &mut b[from..] {
                if rng.random_range(0..4) == 0 {
                    *byte = rng.random();
                }
            }
            tx.write_bytes(victim, &b)
        })
        .unwrap();
        errors += poke(&db, map).iter().filter(|r| r.is_err()).count();
    }
    assert!(errors > 0);
}
