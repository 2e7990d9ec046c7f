//! Named tables: creating, opening, listing and dropping tables of both kinds in a catalog,
//! dispatch of the shared operations, the typed errors, and that a catalog change in an aborted
//! transaction leaves no trace.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use crate::tree_common;

use std::ops::Bound::{Included, Unbounded};
use std::ops::ControlFlow;

use ordo::table::{Catalog, TABLE_NAME_BYTES_MAX, Table, TableKind};
use ordo::tree::Direction;
use ordo::{Error, Versions};
use tree_common::db;

#[test]
fn tables_of_both_kinds_dispatch_and_drop() {
    let db = db(Versions::Single);
    let catalog = db.run(Catalog::create).unwrap();
    let (users, sessions) = db
        .run(|tx| {
            let users = catalog.create_table(tx, "users", TableKind::Tree)?;
            let sessions = catalog.create_table(tx, "sessions", TableKind::Hash)?;
            for (k, v) in [("carol", "3"), ("alice", "1"), ("bob", "2")] {
                users.insert(tx, k.as_bytes(), v.as_bytes())?;
                sessions.insert(tx, k.as_bytes(), v.as_bytes())?;
            }
            Ok::<_, Error>((users, sessions))
        })
        .unwrap();
    assert_eq!(users.kind(), TableKind::Tree);
    assert_eq!(sessions.kind(), TableKind::Hash);
    assert!(users.as_tree().is_some() && users.as_map().is_none());
    assert!(sessions.as_map().is_some() && sessions.as_tree().is_none());

    // Opening by name gives the same handles.
    assert_eq!(db.run(|tx| catalog.open_table(tx, "users")).unwrap(), Some(users));
    assert_eq!(db.run(|tx| catalog.open_table(tx, "sessions")).unwrap(), Some(sessions));
    assert_eq!(db.run(|tx| catalog.open_table(tx, "nope")).unwrap(), None);
    assert_eq!(
        db.run(|tx| catalog.tables(tx)).unwrap(),
        [("sessions".to_string(), TableKind::Hash), ("users".to_string(), TableKind::Tree)]
    );

    // Shared operations dispatch to either kind.
    for t in [users, sessions] {
        let mut tx = db.begin().unwrap();
        assert_eq!(t.get(&mut tx, b"bob").unwrap(), Some(b"2".to_vec()));
        assert_eq!(t.insert(&mut tx, b"bob", b"22").unwrap(), Some(b"2".to_vec()));
        assert_eq!(t.remove(&mut tx, b"alice").unwrap(), Some(b"1".to_vec()));
        assert_eq!(t.len(&mut tx).unwrap(), 2);
        assert!(!t.is_empty(&mut tx).unwrap());
        tx.commit().unwrap();
    }

    // Range scans: the tree table scans in order, the hash table refuses without reading.
    let mut keys = Vec::new();
    let from: &[u8] = b"b";
    db.run(|tx| {
        keys.clear();
        users.range(tx, Included(from), Unbounded, Direction::Forward, None, |k, _| {
            keys.push(k.to_vec());
            ControlFlow::Continue(())
        })
    })
    .unwrap();
    assert_eq!(keys, [b"bob".to_vec(), b"carol".to_vec()]);
    let r = db.run(|tx| {
        sessions.range(tx, Unbounded, Unbounded, Direction::Forward, None, |_, _| panic!())
    });
    assert_eq!(r, Err(Error::WrongTableKind { op: "range scan", kind: "hash" }));

    // Duplicate names are refused, whatever the kind.
    for kind in [TableKind::Tree, TableKind::Hash] {
        let r = db.run(|tx| catalog.create_table(tx, "users", kind));
        assert_eq!(r, Err(Error::TableExists { name: "users".into() }));
    }

    // Dropping removes the name and frees the structure.
    assert!(db.run(|tx| catalog.drop_table(tx, "users")).unwrap());
    assert!(!db.run(|tx| catalog.drop_table(tx, "users")).unwrap());
    assert_eq!(db.run(|tx| catalog.open_table(tx, "users")).unwrap(), None);
    assert!(matches!(db.run(|tx| users.get(tx, b"bob")), Err(Error::NotAllocated { .. })));
    assert!(db.run(|tx| catalog.drop_table(tx, "sessions")).unwrap());
    assert_eq!(db.run(|tx| catalog.tables(tx)).unwrap(), []);
    // The name can be used again.
    let again = db.run(|tx| catalog.create_table(tx, "users", TableKind::Hash)).unwrap();
    assert_eq!(db.run(|tx| again.len(tx)).unwrap(), 0);
}

#[test]
fn aborted_catalog_changes_leave_no_trace() {
    let db = db(Versions::Single);
    let catalog = db.run(Catalog::create).unwrap();
    let mut tx = db.begin().unwrap();
    let t = catalog.create_table(&mut tx, "temp", TableKind::Tree).unwrap();
    t.insert(&mut tx, b"k", b"v").unwrap();
    assert_eq!(catalog.open_table(&mut tx, "temp").unwrap(), Some(t));
    tx.abort();
    assert_eq!(db.run(|tx| catalog.open_table(tx, "temp")).unwrap(), None);
    assert!(matches!(db.run(|tx| t.get(tx, b"k")), Err(Error::NotAllocated { .. })));

    let kept = db.run(|tx| catalog.create_table(tx, "kept", TableKind::Tree)).unwrap();
    let mut tx = db.begin().unwrap();
    assert!(catalog.drop_table(&mut tx, "kept").unwrap());
    drop(tx);
    assert_eq!(db.run(|tx| catalog.open_table(tx, "kept")).unwrap(), Some(kept));
}

#[test]
fn table_names_have_a_limit() {
    let db = db(Versions::Single);
    let catalog = db.run(Catalog::create).unwrap();
    let long = "n".repeat(TABLE_NAME_BYTES_MAX + 1);
    let r = db.run(|tx| catalog.create_table(tx, &long, TableKind::Tree));
    assert!(matches!(r, Err(Error::KeyTooLarge { .. })));
    assert!(matches!(db.run(|tx| catalog.open_table(tx, &long)), Err(Error::KeyTooLarge { .. })));
    let max = "m".repeat(TABLE_NAME_BYTES_MAX);
    let t: Table = db.run(|tx| catalog.create_table(tx, &max, TableKind::Tree)).unwrap();
    let empty = db.run(|tx| catalog.create_table(tx, "", TableKind::Hash)).unwrap();
    assert_eq!(db.run(|tx| catalog.open_table(tx, &max)).unwrap(), Some(t));
    assert_eq!(db.run(|tx| catalog.open_table(tx, "")).unwrap(), Some(empty));
}
