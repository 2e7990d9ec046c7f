//! A transactional hash set with the structure of the RLU hash set ([`crate::rlu::hashset`]):
//! buckets of sorted singly linked lists of `u64` keys, every node a heap object, every
//! operation one `db.run` transaction — the comparison of ORDO Fig. 11 run on Ordo's own
//! concurrency control instead of RLU.
//!
//! * A bucket head is a 16-byte object `[first, tag]`; a node is `[key, next]` (links are raw
//!   [`Addr`]s, 0 = end of list). Key `k` lives in bucket `k % buckets`.
//! * Lookups read the chain; an insert writes its predecessor and allocates the node; a remove
//!   writes the predecessor and frees the node. Serializability comes from the transaction:
//!   reading the predecessor and the removed node puts them in the read set, so a concurrent
//!   change to either aborts one of the two.
//! * The `*_tagged` operations also read the bucket's tag, and successful updates set it to a
//!   caller-chosen unique value, for history checking (see the RLU set's docs).

use ordo_clock::Clock;

use ordo::{Addr, Error, Ordo, Tx};

/// The result of a tagged operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Tagged {
    /// What the operation returned (`contains`: present; `insert`/`remove`: changed the set).
    pub result: bool,
    /// The bucket tag the operation saw before its own update.
    pub tag_seen: u64,
}

/// A hash set of `u64` keys over transactions. Holds only the bucket addresses.
#[derive(Clone, Debug)]
pub struct TxnHashSet {
    heads: Vec<Addr>,
}

#[derive(Clone, Copy)]
enum Op {
    Contains,
    Insert,
    Remove,
}

impl TxnHashSet {
    /// Creates an empty set of `buckets` buckets in `db`.
    pub fn create<C: Clock>(db: &Ordo<C>, buckets: usize) -> Result<Self, Error> {
        if buckets == 0 {
            return Err(Error::Config("hash set buckets must be at least 1".into()));
        }
        let mut heads = Vec::with_capacity(buckets);
        for chunk in 0..buckets.div_ceil(256) {
            let n = 256.min(buckets - chunk * 256);
            heads.extend(
                db.run(|tx| (0..n).map(|_| tx.alloc(&[0u64; 2])).collect::<Result<Vec<_>, _>>())?,
            );
        }
        Ok(TxnHashSet { heads })
    }

    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.heads.len()
    }

    fn head(&self, key: u64) -> Addr {
        self.heads[(key % self.heads.len() as u64) as usize]
    }

    /// Whether `key` is in the set.
    pub fn contains<C: Clock>(&self, db: &Ordo<C>, key: u64) -> Result<bool, Error> {
        db.run(|tx| self.op_in(tx, key, Op::Contains, None)).map(|(r, _)| r)
    }

    /// Adds `key`; false when it was already there.
    pub fn insert<C: Clock>(&self, db: &Ordo<C>, key: u64) -> Result<bool, Error> {
        db.run(|tx| self.op_in(tx, key, Op::Insert, None)).map(|(r, _)| r)
    }

    /// Removes `key`; false when it was not there.
    pub fn remove<C: Clock>(&self, db: &Ordo<C>, key: u64) -> Result<bool, Error> {
        db.run(|tx| self.op_in(tx, key, Op::Remove, None)).map(|(r, _)| r)
    }

    /// [`contains`](Self::contains) inside a caller's transaction.
    pub fn contains_in<C: Clock>(&self, tx: &mut Tx<'_, C>, key: u64) -> Result<bool, Error> {
        self.op_in(tx, key, Op::Contains, None).map(|(r, _)| r)
    }

    /// [`insert`](Self::insert) inside a caller's transaction.
    pub fn insert_in<C: Clock>(&self, tx: &mut Tx<'_, C>, key: u64) -> Result<bool, Error> {
        self.op_in(tx, key, Op::Insert, None).map(|(r, _)| r)
    }

    /// [`remove`](Self::remove) inside a caller's transaction.
    pub fn remove_in<C: Clock>(&self, tx: &mut Tx<'_, C>, key: u64) -> Result<bool, Error> {
        self.op_in(tx, key, Op::Remove, None).map(|(r, _)| r)
    }

    /// `contains`, also returning the bucket tag.
    pub fn contains_tagged<C: Clock>(&self, db: &Ordo<C>, key: u64) -> Result<Tagged, Error> {
        self.tagged(db, key, Op::Contains, 0)
    }

    /// `insert` setting the bucket tag to `tag` on success.
    pub fn insert_tagged<C: Clock>(
        &self,
        db: &Ordo<C>,
        key: u64,
        tag: u64,
    ) -> Result<Tagged, Error> {
        self.tagged(db, key, Op::Insert, tag)
    }

    /// `remove` setting the bucket tag to `tag` on success.
    pub fn remove_tagged<C: Clock>(
        &self,
        db: &Ordo<C>,
        key: u64,
        tag: u64,
    ) -> Result<Tagged, Error> {
        self.tagged(db, key, Op::Remove, tag)
    }

    fn tagged<C: Clock>(&self, db: &Ordo<C>, key: u64, op: Op, tag: u64) -> Result<Tagged, Error> {
        db.run(|tx| self.op_in(tx, key, op, Some(tag)))
            .map(|(result, tag_seen)| Tagged { result, tag_seen })
    }

    /// Every key, sorted, in one transaction.
    pub fn keys<C: Clock>(&self, db: &Ordo<C>) -> Result<Vec<u64>, Error> {
        let mut keys = Vec::new();
        for chunk in self.heads.chunks(64) {
            keys.extend(db.run(|tx| {
                let mut keys = Vec::new();
                for &head in chunk {
                    let [mut next, _] = tx.read::<[u64; 2]>(head)?;
                    while next != 0 {
                        let [key, after] = tx.read::<[u64; 2]>(Addr::from_raw(next))?;
                        keys.push(key);
                        next = after;
                    }
                }
                Ok::<_, Error>(keys)
            })?);
        }
        keys.sort_unstable();
        Ok(keys)
    }

    /// One operation inside `tx`: (result, tag seen).
    fn op_in<C: Clock>(
        &self,
        tx: &mut Tx<'_, C>,
        key: u64,
        op: Op,
        tag: Option<u64>,
    ) -> Result<(bool, u64), Error> {
        let head = self.head(key);
        let head_value = tx.read::<[u64; 2]>(head)?;
        let tag_seen = head_value[1];
        // prev: (address, its words, whether it is the head)
        let (mut prev, mut prev_value, mut prev_is_head) = (head, head_value, true);
        let mut cur = head_value[0];
        let mut cur_value = [0u64; 2];
        while cur != 0 {
            cur_value = tx.read::<[u64; 2]>(Addr::from_raw(cur))?;
            if cur_value[0] >= key {
                break;
            }
            (prev, prev_value, prev_is_head) = (Addr::from_raw(cur), cur_value, false);
            cur = cur_value[1];
        }
        let present = cur != 0 && cur_value[0] == key;
        // The link word: index 0 of a head, index 1 of a node.
        let link = usize::from(!prev_is_head);
        let new_prev = match op {
            Op::Contains => return Ok((present, tag_seen)),
            Op::Insert if present => return Ok((false, tag_seen)),
            Op::Remove if !present => return Ok((false, tag_seen)),
            Op::Insert => {
                let node = tx.alloc(&[key, cur])?;
                let mut v = prev_value;
                v[link] = node.to_raw();
                v
            }
            Op::Remove => {
                let mut v = prev_value;
                v[link] = cur_value[1];
                tx.free(Addr::from_raw(cur))?;
                v
            }
        };
        match tag {
            Some(tag) if prev_is_head => tx.write(prev, &[new_prev[0], tag])?,
            Some(tag) => {
                tx.write(prev, &new_prev)?;
                tx.write(head, &[head_value[0], tag])?;
            }
            None => tx.write(prev, &new_prev)?,
        }
        Ok((true, tag_seen))
    }
}
