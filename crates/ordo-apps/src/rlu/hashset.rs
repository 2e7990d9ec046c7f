//! The RLU hash set of ORDO Fig. 11: buckets of sorted singly linked lists of `u64` keys.
//!
//! Every bucket has a sentinel head node (never removed); key `k` lives in bucket
//! `k % buckets`. Lookups traverse inside a read section. An insert locks the predecessor of
//! the new node; a remove locks the predecessor and the removed node (so no concurrent insert
//! can link behind a node being unlinked), then frees the node, which RLU recycles only after a
//! grace period. These are the locking rules of the RLU paper's list benchmark.
//!
//! The `*_tagged` operations are for history checking: they also read the bucket's **tag** (the
//! head's `aux` word) in the same section, and updates that succeed lock the head and set the
//! tag to a caller-chosen unique value. The tags of one bucket then form a register whose
//! versions are the bucket's successful updates, which `ordo-check` orders in real time.

use std::sync::Arc;

use ordo_clock::Clock;

use super::{NodeId, NodeValue, Rlu, RluError, RluOptions, RluStats, RluThread, Section};

/// The result of a tagged operation.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Tagged {
    /// What the operation returned (`contains`: present; `insert`/`remove`: changed the set).
    pub result: bool,
    /// The bucket tag the operation saw before its own update.
    pub tag_seen: u64,
}

/// A hash set of `u64` keys on RLU. Share it by reference; each thread takes a
/// [`RluSetHandle`].
#[derive(Debug)]
pub struct RluHashSet<C: Clock> {
    rlu: Arc<Rlu<C>>,
    heads: Arc<[NodeId]>,
}

impl<C: Clock> RluHashSet<C> {
    /// An empty set of `buckets` buckets on a runtime with `options` (the arena must hold the
    /// bucket heads plus every key ever present at once, plus the nodes waiting for a grace
    /// period).
    pub fn new(clock: C, buckets: usize, options: RluOptions) -> Result<Self, RluError> {
        if buckets == 0 || buckets >= options.capacity_nodes {
            return Err(RluError::BadOption {
                name: "buckets",
                value: buckets,
                expected: "at least 1 and less than the arena capacity",
            });
        }
        let rlu = Rlu::new(clock, options)?;
        let mut t = rlu.thread()?;
        let heads = (0..buckets)
            .map(|_| t.alloc_unshared(NodeValue::new(0, NodeId::NIL)))
            .collect::<Result<Vec<_>, _>>()?;
        drop(t);
        Ok(RluHashSet { rlu, heads: heads.into() })
    }

    /// A handle for the calling thread.
    pub fn handle(&self) -> Result<RluSetHandle<C>, RluError> {
        Ok(RluSetHandle { thread: self.rlu.thread()?, heads: Arc::clone(&self.heads) })
    }

    /// Number of buckets.
    pub fn buckets(&self) -> usize {
        self.heads.len()
    }

    /// The runtime.
    pub fn rlu(&self) -> &Arc<Rlu<C>> {
        &self.rlu
    }
}

/// One thread's access to an [`RluHashSet`].
#[derive(Debug)]
pub struct RluSetHandle<C: Clock> {
    thread: RluThread<C>,
    heads: Arc<[NodeId]>,
}

/// Where `key` is or would go in a bucket: the last node with a smaller key and the first node
/// with a key at least `key` (with its value).
struct Position {
    prev: NodeId,
    prev_value: NodeValue,
    cur: Option<(NodeId, NodeValue)>,
    head_value: NodeValue,
}

fn find<C: Clock>(s: &mut Section<'_, C>, head: NodeId, key: u64) -> Result<Position, RluError> {
    let head_value = s.deref(head)?;
    let (mut prev, mut prev_value) = (head, head_value);
    let mut next = head_value.next;
    while !next.is_nil() {
        let v = s.deref(next)?;
        if v.key >= key {
            return Ok(Position { prev, prev_value, cur: Some((next, v)), head_value });
        }
        (prev, prev_value, next) = (next, v, v.next);
    }
    Ok(Position { prev, prev_value, cur: None, head_value })
}

fn set_tag<C: Clock>(
    s: &mut Section<'_, C>,
    head: NodeId,
    pos: &Position,
    new_prev: NodeValue,
    tag: u64,
) -> Result<(), RluError> {
    s.try_lock(head)?;
    let head_value = if pos.prev == head { new_prev } else { pos.head_value };
    s.write(head, NodeValue { aux: tag, ..head_value })
}

impl<C: Clock> RluSetHandle<C> {
    fn head(&self, key: u64) -> NodeId {
        self.heads[(key % self.heads.len() as u64) as usize]
    }

    /// Whether `key` is in the set.
    pub fn contains(&mut self, key: u64) -> Result<bool, RluError> {
        Ok(self.op(key, Op::Contains, None)?.result)
    }

    /// Adds `key`; false when it was already there.
    pub fn insert(&mut self, key: u64) -> Result<bool, RluError> {
        Ok(self.op(key, Op::Insert, None)?.result)
    }

    /// Removes `key`; false when it was not there.
    pub fn remove(&mut self, key: u64) -> Result<bool, RluError> {
        Ok(self.op(key, Op::Remove, None)?.result)
    }

    /// [`contains`](Self::contains), also returning the bucket tag.
    pub fn contains_tagged(&mut self, key: u64) -> Result<Tagged, RluError> {
        self.op(key, Op::Contains, None)
    }

    /// [`insert`](Self::insert); on success also sets the bucket tag to `tag`.
    pub fn insert_tagged(&mut self, key: u64, tag: u64) -> Result<Tagged, RluError> {
        self.op(key, Op::Insert, Some(tag))
    }

    /// [`remove`](Self::remove); on success also sets the bucket tag to `tag`.
    pub fn remove_tagged(&mut self, key: u64, tag: u64) -> Result<Tagged, RluError> {
        self.op(key, Op::Remove, Some(tag))
    }

    /// Every key, sorted, read in one section (a consistent snapshot).
    pub fn keys(&mut self) -> Result<Vec<u64>, RluError> {
        let heads = Arc::clone(&self.heads);
        let mut keys = self.thread.section(|s| {
            let mut keys = Vec::new();
            for &head in heads.iter() {
                let mut next = s.deref(head)?.next;
                while !next.is_nil() {
                    let v = s.deref(next)?;
                    keys.push(v.key);
                    next = v.next;
                }
            }
            Ok(keys)
        })?;
        keys.sort_unstable();
        Ok(keys)
    }

    /// The runtime counters of this handle's thread.
    pub fn stats(&self) -> RluStats {
        self.thread.stats()
    }

    /// Commits this thread's deferred updates (see [`RluThread::flush`]).
    pub fn flush(&mut self) {
        self.thread.flush();
    }

    /// Updates of this thread not yet visible to others (see
    /// [`RluThread::deferred_sections`]).
    pub fn deferred_sections(&self) -> usize {
        self.thread.deferred_sections()
    }

    fn op(&mut self, key: u64, op: Op, tag: Option<u64>) -> Result<Tagged, RluError> {
        let head = self.head(key);
        self.thread.section(|s| {
            let pos = find(s, head, key)?;
            let tag_seen = pos.head_value.aux;
            let present = matches!(pos.cur, Some((_, v)) if v.key == key);
            let done = |result| Ok(Tagged { result, tag_seen });
            match op {
                Op::Contains => done(present),
                Op::Insert if present => done(false),
                Op::Remove if !present => done(false),
                Op::Insert => {
                    s.try_lock(pos.prev)?;
                    let next = pos.cur.map_or(NodeId::NIL, |(id, _)| id);
                    let node = s.alloc(NodeValue::new(key, next))?;
                    let new_prev = NodeValue { next: node, ..pos.prev_value };
                    s.write(pos.prev, new_prev)?;
                    if let Some(tag) = tag {
                        set_tag(s, head, &pos, new_prev, tag)?;
                    }
                    done(true)
                }
                Op::Remove => {
                    let Some((cur, cur_value)) = pos.cur else { return done(false) };
                    s.try_lock(pos.prev)?;
                    s.try_lock(cur)?;
                    let new_prev = NodeValue { next: cur_value.next, ..pos.prev_value };
                    s.write(pos.prev, new_prev)?;
                    s.free(cur)?;
                    if let Some(tag) = tag {
                        set_tag(s, head, &pos, new_prev, tag)?;
                    }
                    done(true)
                }
            }
        })
    }
}

#[derive(Clone, Copy)]
enum Op {
    Contains,
    Insert,
    Remove,
}
