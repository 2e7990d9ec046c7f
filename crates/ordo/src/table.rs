//! # Named tables: a catalog of hash maps and B+trees
//!
//! A [`Catalog`] maps table names to tables. Each table is a transactional
//! [`HashMap`] (point operations only) or a [`BTree`] (ordered, with range
//! scans), and [`Table`] dispatches the operations they share to whichever it is. The catalog is
//! itself a hash map from `crate::map` — name → kind and root address — so creating, opening and
//! dropping tables are ordinary transactional operations: a table created in a transaction that
//! aborts never existed, and a table and its first rows can be created atomically.
//!
//! Opening a table reads the catalog entry once; the returned [`Table`] is a `Copy` handle that
//! stays valid until the table is dropped (tree and map roots never move). Applications cache
//! handles rather than look names up in every transaction, which also keeps the catalog out of
//! most read sets.
//!
//! ## Catalog entry layout (16 bytes, little-endian; `FORMAT_VERSION` = 1)
//! ```text
//! 0       kind: 1 hash map, 2 B+tree      1   format version (1)      2..8  zero
//! 8..16   root address of the table's structure
//! ```
//! Names are UTF-8, up to [`TABLE_NAME_BYTES_MAX`] bytes (the empty name is allowed). An entry
//! that does not decode is an [`Error::CorruptCatalog`].

use std::ops::{Bound, ControlFlow};

use ordo_clock::Clock;

use crate::addr::Addr;
use crate::error::Error;
use crate::map::HashMap;
use crate::tree::{BTree, Direction};
use crate::txn::Tx;

/// The version of the catalog entry layout.
pub const FORMAT_VERSION: u8 = 1;
/// The longest table name, in bytes.
pub const TABLE_NAME_BYTES_MAX: usize = 255;

const ENTRY_BYTES: usize = 16;
const KIND_HASH: u8 = 1;
const KIND_TREE: u8 = 2;
/// Tables a new catalog is sized for (it grows beyond).
const CATALOG_CAPACITY_HINT: usize = 16;

/// The structure behind a table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TableKind {
    /// A [`HashMap`]: point operations, no order.
    Hash,
    /// A [`BTree`]: point operations and ordered range scans.
    Tree,
}

impl TableKind {
    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            TableKind::Hash => "hash",
            TableKind::Tree => "tree",
        }
    }
}

/// An open table: a handle on its map or tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// A hash table.
    Hash(HashMap),
    /// An ordered table.
    Tree(BTree),
}

impl Table {
    /// Its kind.
    pub fn kind(&self) -> TableKind {
        match self {
            Table::Hash(_) => TableKind::Hash,
            Table::Tree(_) => TableKind::Tree,
        }
    }

    /// The root address of its structure.
    pub fn root(&self) -> Addr {
        match self {
            Table::Hash(m) => m.root(),
            Table::Tree(t) => t.root(),
        }
    }

    /// The tree, for an ordered table.
    pub fn as_tree(&self) -> Option<BTree> {
        match self {
            Table::Tree(t) => Some(*t),
            Table::Hash(_) => None,
        }
    }

    /// The map, for a hash table.
    pub fn as_map(&self) -> Option<HashMap> {
        match self {
            Table::Hash(m) => Some(*m),
            Table::Tree(_) => None,
        }
    }

    /// The value of `key`. Key limits are those of the table's kind.
    pub fn get<C: Clock>(&self, tx: &mut Tx<'_, C>, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        match self {
            Table::Hash(m) => m.get(tx, key),
            Table::Tree(t) => t.get(tx, key),
        }
    }

    /// Sets `key` to `value`; returns the value it replaced.
    pub fn insert<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
        value: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        match self {
            Table::Hash(m) => m.insert(tx, key, value),
            Table::Tree(t) => t.insert(tx, key, value),
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, Error> {
        match self {
            Table::Hash(m) => m.remove(tx, key),
            Table::Tree(t) => t.remove(tx, key),
        }
    }

    /// The number of rows (reads the whole table; see [`BTree::len`] and [`HashMap::len`]).
    pub fn len<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<usize, Error> {
        match self {
            Table::Hash(m) => m.len(tx),
            Table::Tree(t) => t.len(tx),
        }
    }

    /// Whether the table has no rows.
    pub fn is_empty<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<bool, Error> {
        match self {
            Table::Hash(m) => m.is_empty(tx),
            Table::Tree(t) => t.is_empty(tx),
        }
    }

    /// A range scan, as [`BTree::range`]; a hash table has no key order and returns
    /// [`Error::WrongTableKind`] without reading anything.
    pub fn range<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        direction: Direction,
        limit: Option<usize>,
        f: impl FnMut(&[u8], &[u8]) -> ControlFlow<()>,
    ) -> Result<usize, Error> {
        match self {
            Table::Tree(t) => t.range(tx, lo, hi, direction, limit, f),
            Table::Hash(_) => Err(Error::WrongTableKind { op: "range scan", kind: "hash" }),
        }
    }
}

/// A catalog of named tables; a `Copy` handle naming the catalog's own hash map.
///
/// ```
/// use ordo::{Config, Ordo, table::{Catalog, TableKind}};
/// use ordo_clock::LogicalClock;
///
/// let db = Ordo::with_clock(Config::default(), LogicalClock::new())?;
/// let catalog = db.run(|tx| Catalog::create(tx))?;
/// db.run(|tx| {
///     let users = catalog.create_table(tx, "users", TableKind::Tree)?;
///     users.insert(tx, b"ada", b"admin").map(|_| ())
/// })?;
/// let users = db.run(|tx| catalog.open_table(tx, "users"))?.expect("created above");
/// assert_eq!(users.kind(), TableKind::Tree);
/// assert_eq!(db.run(|tx| users.get(tx, b"ada"))?, Some(b"admin".to_vec()));
/// assert!(db.run(|tx| catalog.drop_table(tx, "users"))?);
/// assert_eq!(db.run(|tx| catalog.open_table(tx, "users"))?, None);
/// # Ok::<(), ordo::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Catalog {
    map: HashMap,
}

fn check_name(name: &str) -> Result<(), Error> {
    if name.len() > TABLE_NAME_BYTES_MAX {
        return Err(Error::KeyTooLarge { len_bytes: name.len(), max_bytes: TABLE_NAME_BYTES_MAX });
    }
    Ok(())
}

fn encode(table: &Table) -> [u8; ENTRY_BYTES] {
    let mut b = [0u8; ENTRY_BYTES];
    b[0] = match table.kind() {
        TableKind::Hash => KIND_HASH,
        TableKind::Tree => KIND_TREE,
    };
    b[1] = FORMAT_VERSION;
    b[8..16].copy_from_slice(&table.root().to_raw().to_le_bytes());
    b
}

fn decode(name: &str, b: &[u8]) -> Result<Table, Error> {
    let bad = |reason| Error::CorruptCatalog { name: name.to_owned(), reason };
    let b: &[u8; ENTRY_BYTES] = b.try_into().map_err(|_| bad("entry has the wrong length"))?;
    if b[1] != FORMAT_VERSION {
        return Err(bad("entry has an unknown format version"));
    }
    let mut raw = [0u8; 8];
    raw.copy_from_slice(&b[8..16]);
    let root = Addr::from_raw(u64::from_le_bytes(raw));
    if root.is_null() {
        return Err(bad("entry names the null root"));
    }
    match b[0] {
        KIND_HASH => Ok(Table::Hash(HashMap::open(root))),
        KIND_TREE => Ok(Table::Tree(BTree::open(root))),
        _ => Err(bad("entry has an unknown table kind")),
    }
}

impl Catalog {
    /// Creates an empty catalog. It exists once `tx` commits.
    pub fn create<C: Clock>(tx: &mut Tx<'_, C>) -> Result<Self, Error> {
        Ok(Catalog { map: HashMap::create(tx, CATALOG_CAPACITY_HINT)? })
    }

    /// The catalog whose map root is `root`. Nothing is read here.
    pub fn open(root: Addr) -> Self {
        Catalog { map: HashMap::open(root) }
    }

    /// The catalog map's root address, to store and [`Catalog::open`] later.
    pub fn root(&self) -> Addr {
        self.map.root()
    }

    /// Creates an empty table `name` of `kind` (default options) and returns it.
    /// [`Error::TableExists`] if the name is taken; nothing is written then.
    ///
    /// # Conflicts
    /// Writes the catalog bucket of `name`: creations of the same name conflict.
    pub fn create_table<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        name: &str,
        kind: TableKind,
    ) -> Result<Table, Error> {
        check_name(name)?;
        if self.map.contains_key(tx, name.as_bytes())? {
            return Err(Error::TableExists { name: name.to_owned() });
        }
        let table = match kind {
            TableKind::Hash => Table::Hash(HashMap::create(tx, 0)?),
            TableKind::Tree => Table::Tree(BTree::create(tx)?),
        };
        self.map.insert(tx, name.as_bytes(), &encode(&table))?;
        Ok(table)
    }

    /// The table `name`, if it exists.
    pub fn open_table<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        name: &str,
    ) -> Result<Option<Table>, Error> {
        check_name(name)?;
        match self.map.get(tx, name.as_bytes())? {
            Some(b) => decode(name, &b).map(Some),
            None => Ok(None),
        }
    }

    /// Drops table `name`: removes it from the catalog and frees its every object when `tx`
    /// commits. Returns whether it existed. Handles on it must not be used afterwards. One
    /// transaction writes the whole table, so drop large tables when idle.
    pub fn drop_table<C: Clock>(&self, tx: &mut Tx<'_, C>, name: &str) -> Result<bool, Error> {
        let Some(table) = self.open_table(tx, name)? else {
            return Ok(false);
        };
        self.map.remove(tx, name.as_bytes())?;
        match table {
            Table::Hash(m) => m.destroy(tx)?,
            Table::Tree(t) => t.destroy(tx)?,
        }
        Ok(true)
    }

    /// Every table's name and kind, sorted by name. Reads the whole catalog.
    pub fn tables<C: Clock>(&self, tx: &mut Tx<'_, C>) -> Result<Vec<(String, TableKind)>, Error> {
        let mut out = Vec::new();
        for (name, value) in self.map.entries(tx)? {
            let name = String::from_utf8(name).map_err(|_| Error::CorruptCatalog {
                name: String::new(),
                reason: "table name is not UTF-8",
            })?;
            let kind = decode(&name, &value)?.kind();
            out.push((name, kind));
        }
        out.sort();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_roundtrip_and_reject_garbage() {
        let t = Table::Tree(BTree::open(Addr::new(2, 4096)));
        assert_eq!(decode("t", &encode(&t)).unwrap(), t);
        let h = Table::Hash(HashMap::open(Addr::new(1, 64)));
        assert_eq!(decode("h", &encode(&h)).unwrap(), h);
        assert!(decode("x", &[0; 3]).is_err());
        let mut bad = encode(&t);
        bad[0] = 9;
        assert!(matches!(decode("x", &bad), Err(Error::CorruptCatalog { .. })));
        bad = encode(&t);
        bad[8..16].fill(0);
        assert!(decode("x", &bad).is_err());
        assert!(check_name(&"n".repeat(TABLE_NAME_BYTES_MAX + 1)).is_err());
    }
}
