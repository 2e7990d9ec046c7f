//! # labyrinth — maze routing in a 3-D grid (STAMP `labyrinth`)
//!
//! A `width × height × depth` grid and `paths` pairs of distinct cells; every endpoint is
//! blocked from the start. Each path is routed with Lee's algorithm: a breadth-first expansion
//! from the source over empty cells (6-neighbourhood) until the destination is reached, then a
//! traceback from the destination along decreasing distances (continuing straight where it can,
//! else the first direction in a fixed order — STAMP's bend cost, with unit step costs). A path
//! whose expansion cannot reach its destination is dropped.
//!
//! ## The transactional part (as in STAMP's `router_solve`)
//! A cell is one 8-byte word: [`EMPTY`], [`ENDPOINT`], or `id + 1` of the path that claimed
//! it. The grid is stored as objects of [`CELLS_PER_OBJECT`] consecutive cells (one 64-byte
//! cache line of payload; the last object is padded with empty cells past the grid), the
//! granularity at which a claim conflicts — as TL2 guards STAMP's grid by lock stripes rather
//! than by word. A thread takes the next path from a shared cursor (one transaction), copies
//! the grid into private memory — object by object with [`Ordo::read_latest`] (each object's
//! newest committed version, outside any transaction, as STAMP copies the grid with a plain
//! `memcpy`), so the copy need not be one snapshot ("ok if not most up-to-date", as STAMP's
//! comment says: claims only ever grow, so a copy misses claims but never invents one) — expands
//! and traces
//! back on the copy, then claims the path in one transaction that re-reads every intermediate
//! cell and writes the path's id into it. If a cell is no longer empty, that attempt is
//! abandoned (counted as a `requested` abort) and the thread copies and expands again, like
//! STAMP's `TM_RESTART`. If the claim aborts for another reason (a concurrent claim wrote
//! another cell of an object it touches), only the claim is retried: the route found on the
//! copy is still a shortest one as long as its cells are empty when the claim commits.
//!
//! Cost per path: the copy reads `cells / CELLS_PER_OBJECT` objects. With one cell per object
//! (as until session 15) the copy of the standard 512 × 512 × 7 grid read 1.8 M objects per
//! path, about 23 ns each here — more than the expansion itself. Until session 23 the copy ran
//! in read-only transactions of 256 objects: about 240 instructions per object (the read set,
//! its revalidations), 14 % of a 1-thread run's instructions (callgrind, `--size large --param
//! n=24`).
//!
//! ## What [`Labyrinth::verify`] checks
//! Which paths get routed depends on the order in which claims commit, so the parallel output
//! is not compared with the sequential one. The checks are the invariants that *every* serial
//! order of the claims satisfies, with the claims ordered by their commit timestamps:
//! 1. every path is either routed or dropped, exactly once;
//! 2. a routed path starts at its source, ends at its destination, moves between adjacent
//!    cells, stays in the grid and visits no cell twice;
//! 3. replaying the routed paths in commit-timestamp order on the grid with only the endpoints
//!    blocked, each path's intermediate cells are empty when it is replayed (so no cell is
//!    claimed by two paths) and its length is the breadth-first distance in that grid (the
//!    expansion on a stale copy finds a path at least as short as the current grid allows, and
//!    the claim proves it valid there, so it is a shortest one). Claims with equal timestamps
//!    (timestamps are not unique) are replayed as a group, each checked against the grid with
//!    the group's other claims in place;
//! 4. every dropped path has no route in the final grid (a path is dropped only when no route
//!    exists in a copy, which is a subset of every later grid);
//! 5. the final grid holds exactly the endpoints and the routed paths' intermediate cells,
//!    each with its path's id.
//!
//! The number of routed paths is *not* required to equal the sequential count: different serial
//! orders route different sets (both are reported). With one thread the claims commit in path
//! order, and the output equals the sequential one (the tests check this).

use std::time::Instant;

use ordo::{Addr, Error, Ordo};
use ordo_clock::{Clock, Timestamp};
use rand::seq::index::sample;
use rand::{SeedableRng, rngs::SmallRng};

use super::{
    Kernel, Size, alloc_objects, check_range, check_threads, on_threads, parse_value,
    unknown_param, words_to_bytes,
};
use crate::error::BenchError;

/// A cell no path uses.
pub const EMPTY: u64 = 0;
/// A cell that is some path's source or destination.
pub const ENDPOINT: u64 = u64::MAX;
/// Cells per grid object: one 64-byte line of payload.
pub const CELLS_PER_OBJECT: usize = 8;
/// Claim attempts per path before the run is declared stuck.
pub const CLAIM_ATTEMPTS_MAX: u32 = 100_000;

/// Grid and path count (the name of STAMP's input, `random-x<width>-y<height>-z<depth>-n<paths>`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct LabyrinthParams {
    /// `x`: cells along x.
    pub width: usize,
    /// `y`: cells along y.
    pub height: usize,
    /// `z`: cells along z (layers).
    pub depth: usize,
    /// `n`: paths to route.
    pub paths: usize,
}

impl LabyrinthParams {
    /// Cells in the grid.
    pub fn cells(&self) -> usize {
        self.width * self.height * self.depth
    }
}

/// The generated maze: distinct endpoints.
#[derive(Clone, Debug)]
pub struct LabyrinthInput {
    /// The parameters it was made with.
    pub params: LabyrinthParams,
    /// `(source, destination)` cell indices of every path; all `2 × paths` cells distinct.
    pub pairs: Vec<(u32, u32)>,
}

/// One routed path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// Cell indices from source to destination.
    pub cells: Vec<u32>,
    /// The claim's commit timestamp (the sequential version numbers its claims 1, 2, …).
    pub commit_ts: Timestamp,
}

/// What a routing run produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabyrinthOutput {
    /// Per path id: its route, or `None` when it was dropped.
    pub routes: Vec<Option<Route>>,
    /// The final value of every cell.
    pub grid: Vec<u64>,
}

impl LabyrinthOutput {
    /// Paths routed.
    pub fn routed(&self) -> usize {
        self.routes.iter().filter(|r| r.is_some()).count()
    }
}

/// The kernel.
#[derive(Debug)]
pub struct Labyrinth;

const PARAM_NAMES: &str = "x|width, y|height, z|depth, n|paths";

impl Kernel for Labyrinth {
    const NAME: &'static str = "labyrinth";
    type Params = LabyrinthParams;
    type Input = LabyrinthInput;
    type Output = LabyrinthOutput;

    /// Small: `random-x32-y32-z3-n96`; medium: `random-x48-y48-z3-n64`; large: the standard
    /// `random-x512-y512-z7-n512` (STAMP's README).
    fn params(size: Size) -> LabyrinthParams {
        match size {
            Size::Small => LabyrinthParams { width: 32, height: 32, depth: 3, paths: 96 },
            Size::Medium => LabyrinthParams { width: 48, height: 48, depth: 3, paths: 64 },
            Size::Large => LabyrinthParams { width: 512, height: 512, depth: 7, paths: 512 },
        }
    }

    fn validate(p: &LabyrinthParams) -> Result<(), BenchError> {
        check_range("width", p.width, 1..=1024, "1..=1024")?;
        check_range("height", p.height, 1..=1024, "1..=1024")?;
        check_range("depth", p.depth, 1..=64, "1..=64")?;
        check_range("cells", p.cells(), 2..=1 << 22, "width × height × depth in 2..=4194304")?;
        check_range("paths", p.paths, 1..=p.cells() / 2, "1..=cells/2")
    }

    fn generate(p: &LabyrinthParams, seed: u64) -> Result<LabyrinthInput, BenchError> {
        Self::validate(p)?;
        let mut rng = SmallRng::seed_from_u64(seed);
        let cells = sample(&mut rng, p.cells(), 2 * p.paths).into_vec();
        let pairs = cells.chunks_exact(2).map(|c| (c[0] as u32, c[1] as u32)).collect();
        Ok(LabyrinthInput { params: p.clone(), pairs })
    }

    fn sequential(input: &LabyrinthInput) -> LabyrinthOutput {
        Self::sequential_timed(input).0
    }

    /// Times the routing alone, as STAMP's timer brackets `router_solve` and not `maze_read`
    /// (which builds the grid) or the final check.
    fn sequential_timed(input: &LabyrinthInput) -> (LabyrinthOutput, f64) {
        let grid_shape = Shape::of(&input.params);
        let mut grid = initial_grid(input);
        let timer = Instant::now();
        let mut routes = Vec::with_capacity(input.pairs.len());
        let mut scratch = Scratch::new(grid.len());
        // STAMP's sequential build copies the grid per path too (the router's private copy).
        let mut copy = grid.clone();
        for (id, &(src, dst)) in input.pairs.iter().enumerate() {
            copy.copy_from_slice(&grid);
            match route(&grid_shape, &copy, src, dst, &mut scratch) {
                Some(cells) => {
                    for &c in inner(&cells) {
                        grid[c as usize] = id as u64 + 1;
                    }
                    let commit_ts = Timestamp::from_nanos(routes.len() as u64 + 1);
                    routes.push(Some(Route { cells, commit_ts }));
                }
                None => routes.push(None),
            }
        }
        let elapsed_s = timer.elapsed().as_secs_f64();
        (LabyrinthOutput { routes, grid }, elapsed_s)
    }

    fn parallel<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &LabyrinthInput,
        threads: usize,
    ) -> Result<LabyrinthOutput, BenchError> {
        Ok(Self::parallel_timed(db, input, threads)?.0)
    }

    /// Times the routing alone, as [`Labyrinth::sequential_timed`]: building the grid's objects
    /// and reading the final grid back are outside the timer.
    fn parallel_timed<C: Clock + Send + Sync + 'static>(
        db: &Ordo<C>,
        input: &LabyrinthInput,
        threads: usize,
    ) -> Result<(LabyrinthOutput, f64), BenchError> {
        check_threads(threads)?;
        let start = initial_grid(input);
        let cells = alloc_objects(
            db,
            start.chunks(CELLS_PER_OBJECT).map(|c| {
                let mut words = c.to_vec();
                words.resize(CELLS_PER_OBJECT, EMPTY);
                words_to_bytes(&words)
            }),
        )?;
        let cells = Grid { objects: cells, len: start.len() };
        let cursor = db.run(|tx| tx.alloc(&0u64))?;
        let shape = Shape::of(&input.params);
        let timer = Instant::now();
        let per_thread = on_threads(threads, |_| {
            let mut done = Vec::new();
            let mut copy = vec![EMPTY; cells.len];
            let mut scratch = Scratch::new(cells.len);
            loop {
                let id = db.run(|tx| {
                    let next: u64 = tx.read(cursor)?;
                    tx.write(cursor, &(next + 1))?;
                    Ok::<_, Error>(next as usize)
                })?;
                let Some(&(src, dst)) = input.pairs.get(id) else {
                    return Ok(done);
                };
                done.push((
                    id,
                    route_and_claim(db, &shape, &cells, &mut copy, &mut scratch, id, src, dst)?,
                ));
            }
        })?;
        let elapsed_s = timer.elapsed().as_secs_f64();
        let mut routes = vec![None; input.pairs.len()];
        for (id, r) in per_thread.into_iter().flatten() {
            routes[id] = r;
        }
        let mut grid = Vec::with_capacity(cells.len);
        read_grid(db, &cells, &mut grid)?;
        Ok((LabyrinthOutput { routes, grid }, elapsed_s))
    }

    fn verify(
        input: &LabyrinthInput,
        sequential: &LabyrinthOutput,
        parallel: &LabyrinthOutput,
    ) -> Result<(), BenchError> {
        let _ = sequential;
        check_routing(input, parallel)
            .map_err(|e| BenchError::Inconsistent(format!("labyrinth: {e}")))
    }

    fn set_param(p: &mut LabyrinthParams, name: &str, value: &str) -> Result<(), BenchError> {
        let app = Self::NAME;
        match name {
            "x" | "width" => p.width = parse_value(app, name, value)?,
            "y" | "height" => p.height = parse_value(app, name, value)?,
            "z" | "depth" => p.depth = parse_value(app, name, value)?,
            "n" | "paths" => p.paths = parse_value(app, name, value)?,
            _ => return Err(unknown_param(app, name, PARAM_NAMES)),
        }
        Ok(())
    }
}

/// The grid with every endpoint blocked.
fn initial_grid(input: &LabyrinthInput) -> Vec<u64> {
    let mut grid = vec![EMPTY; input.params.cells()];
    for &(s, d) in &input.pairs {
        grid[s as usize] = ENDPOINT;
        grid[d as usize] = ENDPOINT;
    }
    grid
}

/// A path's cells without its endpoints.
fn inner(cells: &[u32]) -> &[u32] {
    if cells.len() >= 2 { &cells[1..cells.len() - 1] } else { &[] }
}

/// Grid geometry: cell `(x, y, z)` is index `(z * height + y) * width + x`.
#[derive(Clone, Copy, Debug)]
struct Shape {
    width: usize,
    height: usize,
    depth: usize,
}

/// Directions in the order the traceback tries them: ±x, ±y, ±z.
const DIRECTIONS: [(i64, i64, i64); 6] =
    [(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0), (0, 0, 1), (0, 0, -1)];

impl Shape {
    fn of(p: &LabyrinthParams) -> Shape {
        Shape { width: p.width, height: p.height, depth: p.depth }
    }

    fn coords(&self, c: usize) -> (i64, i64, i64) {
        let x = c % self.width;
        let y = (c / self.width) % self.height;
        let z = c / (self.width * self.height);
        (x as i64, y as i64, z as i64)
    }

    /// The neighbour of `c` in direction `d`, if inside the grid.
    fn step(&self, c: usize, d: (i64, i64, i64)) -> Option<usize> {
        let (x, y, z) = self.coords(c);
        let (x, y, z) = (x + d.0, y + d.1, z + d.2);
        let inside = (0..self.width as i64).contains(&x)
            && (0..self.height as i64).contains(&y)
            && (0..self.depth as i64).contains(&z);
        inside.then(|| ((z as usize * self.height + y as usize) * self.width) + x as usize)
    }

    fn adjacent(&self, a: usize, b: usize) -> bool {
        let (p, q) = (self.coords(a), self.coords(b));
        (p.0 - q.0).abs() + (p.1 - q.1).abs() + (p.2 - q.2).abs() == 1
    }
}

/// Reusable buffers of the expansion.
struct Scratch {
    dist: Vec<u32>,
    queue: std::collections::VecDeque<usize>,
}

const UNSEEN: u32 = u32::MAX;

impl Scratch {
    fn new(cells: usize) -> Scratch {
        Scratch { dist: vec![UNSEEN; cells], queue: std::collections::VecDeque::new() }
    }
}

/// Lee's expansion from `src` over [`EMPTY`] cells until `dst`; returns the breadth-first
/// distance of `dst`, leaving the distances in `scratch`.
fn expand(shape: &Shape, grid: &[u64], src: u32, dst: u32, scratch: &mut Scratch) -> Option<u32> {
    scratch.dist.iter_mut().for_each(|d| *d = UNSEEN);
    scratch.queue.clear();
    let (src, dst) = (src as usize, dst as usize);
    scratch.dist[src] = 0;
    scratch.queue.push_back(src);
    while let Some(c) = scratch.queue.pop_front() {
        let next = scratch.dist[c] + 1;
        for d in DIRECTIONS {
            let Some(n) = shape.step(c, d) else { continue };
            if scratch.dist[n] != UNSEEN {
                continue;
            }
            if n == dst {
                scratch.dist[n] = next;
                return Some(next);
            }
            if grid[n] == EMPTY {
                scratch.dist[n] = next;
                scratch.queue.push_back(n);
            }
        }
    }
    None
}

/// Expansion plus traceback: a shortest route from `src` to `dst` over empty cells.
fn route(
    shape: &Shape,
    grid: &[u64],
    src: u32,
    dst: u32,
    scratch: &mut Scratch,
) -> Option<Vec<u32>> {
    let length = expand(shape, grid, src, dst, scratch)?;
    let mut cells = vec![dst];
    let mut at = dst as usize;
    let mut heading: Option<(i64, i64, i64)> = None;
    for want in (0..length).rev() {
        let straight = heading.into_iter().chain(DIRECTIONS);
        let (d, n) = straight
            .filter_map(|d| shape.step(at, d).map(|n| (d, n)))
            .find(|(_, n)| scratch.dist[*n] == want)?;
        heading = Some(d);
        cells.push(n as u32);
        at = n;
    }
    cells.reverse();
    Some(cells)
}

/// Why a claim attempt stopped.
enum ClaimError {
    /// A cell of the route is no longer empty: copy and expand again.
    Taken,
    /// The engine failed (an abort dooms the attempt; anything else is returned).
    Engine(Error),
}

impl From<Error> for ClaimError {
    fn from(e: Error) -> Self {
        ClaimError::Engine(e)
    }
}

/// Routes path `id` on private copies of the grid and claims it, retrying on stale copies.
#[allow(clippy::too_many_arguments)]
fn route_and_claim<C: Clock>(
    db: &Ordo<C>,
    shape: &Shape,
    grid: &Grid,
    copy: &mut Vec<u64>,
    scratch: &mut Scratch,
    id: usize,
    src: u32,
    dst: u32,
) -> Result<Option<Route>, BenchError> {
    let mut attempts = 0u32;
    'route: loop {
        read_grid(db, grid, copy)?;
        let Some(path) = route(shape, copy, src, dst, scratch) else {
            return Ok(None);
        };
        loop {
            attempts += 1;
            if attempts > CLAIM_ATTEMPTS_MAX {
                return Err(BenchError::Inconsistent(format!(
                    "labyrinth: path {id} could not be claimed in {CLAIM_ATTEMPTS_MAX} attempts"
                )));
            }
            match claim(db, grid, &path, id) {
                Ok(info) => {
                    let commit_ts = info.wts.unwrap_or(info.rts);
                    return Ok(Some(Route { cells: path, commit_ts }));
                }
                Err(ClaimError::Taken) => continue 'route,
                // Another claim wrote an object this one touches: claim the same route again.
                Err(ClaimError::Engine(Error::Aborted(_))) => {}
                Err(ClaimError::Engine(e)) => return Err(e.into()),
            }
        }
    }
}

/// One attempt to claim `path`'s intermediate cells for path `id` in one transaction.
fn claim<C: Clock>(
    db: &Ordo<C>,
    grid: &Grid,
    path: &[u32],
    id: usize,
) -> Result<ordo::CommitInfo, ClaimError> {
    let mut tx = db.begin().map_err(ClaimError::Engine)?;
    let claimed = (|| {
        for &c in inner(path) {
            let (addr, slot) = grid.locate(c as usize);
            let claimed = tx.update_words(addr, |words| match words.get_mut(slot) {
                Some(cell) if *cell == EMPTY => {
                    *cell = id as u64 + 1;
                    true
                }
                _ => false,
            })?;
            if !claimed {
                return Err(ClaimError::Taken);
            }
        }
        Ok(())
    })();
    match claimed {
        Ok(()) => tx.commit().map_err(ClaimError::Engine),
        Err(e) => {
            tx.abort();
            Err(e)
        }
    }
}

/// The grid's objects in the engine.
struct Grid {
    /// Object `i` holds cells `i * CELLS_PER_OBJECT ..`.
    objects: Vec<Addr>,
    /// Cells in the grid (the last object may hold padding past it).
    len: usize,
}

impl Grid {
    /// The object holding cell `c` and the cell's word in it.
    fn locate(&self, c: usize) -> (Addr, usize) {
        (self.objects[c / CELLS_PER_OBJECT], c % CELLS_PER_OBJECT)
    }
}

/// Copies every cell into `out`: each grid object's newest committed version
/// ([`Ordo::read_latest`]), not one snapshot (see the module essay).
fn read_grid<C: Clock>(db: &Ordo<C>, grid: &Grid, out: &mut Vec<u64>) -> Result<(), BenchError> {
    out.clear();
    for &a in &grid.objects {
        let start = out.len();
        // `f` may run again after a torn read: it starts over from `start` each time.
        let fits = db.read_latest(a, |v| {
            out.truncate(start);
            if v.len() != CELLS_PER_OBJECT * 8 {
                return false;
            }
            out.extend((0..CELLS_PER_OBJECT).map(|i| v.word(i).unwrap_or(EMPTY)));
            true
        })?;
        if !fits {
            return Err(BenchError::Inconsistent(format!(
                "labyrinth: grid object {a:?} does not hold {CELLS_PER_OBJECT} cells"
            )));
        }
    }
    out.truncate(grid.len);
    Ok(())
}

/// The checks of the module essay, 1–5.
fn check_routing(input: &LabyrinthInput, out: &LabyrinthOutput) -> Result<(), String> {
    let p = &input.params;
    let shape = Shape::of(p);
    let n = input.pairs.len();
    if out.routes.len() != n {
        return Err(format!("{} paths in the output, the input has {n}", out.routes.len()));
    }
    if out.grid.len() != p.cells() {
        return Err(format!("the grid has {} cells, expected {}", out.grid.len(), p.cells()));
    }
    // 2. Shape of every route.
    for (id, r) in out.routes.iter().enumerate() {
        let Some(r) = r else { continue };
        let (src, dst) = input.pairs[id];
        if r.cells.first() != Some(&src) || r.cells.last() != Some(&dst) {
            return Err(format!(
                "path {id} runs from {:?} to {:?}, not from {src} to {dst}",
                r.cells.first(),
                r.cells.last()
            ));
        }
        if let Some(c) = r.cells.iter().find(|c| **c as usize >= p.cells()) {
            return Err(format!("path {id} leaves the grid at cell {c}"));
        }
        if let Some(w) = r.cells.windows(2).find(|w| !shape.adjacent(w[0] as usize, w[1] as usize))
        {
            return Err(format!("path {id} jumps from cell {} to {}", w[0], w[1]));
        }
        let mut seen = r.cells.clone();
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(format!("path {id} visits a cell twice"));
        }
    }
    // 3. Replay in commit order. Timestamps are not unique (DESIGN §7): claims with equal
    // commit timestamps are replayed as one group — each must find its cells empty before the
    // group, the group's cells must be disjoint, and each path must be a shortest route in the
    // grid with every *other* claim of the group in place (its copy may have seen any of them,
    // and it is valid with all of them, so that is the grid it is shortest in).
    let mut order: Vec<(Timestamp, usize)> = out
        .routes
        .iter()
        .enumerate()
        .filter_map(|(id, r)| r.as_ref().map(|r| (r.commit_ts, id)))
        .collect();
    order.sort_unstable();
    let mut grid = initial_grid(input);
    let mut scratch = Scratch::new(grid.len());
    for group in order.chunk_by(|a, b| a.0 == b.0) {
        let routes: Vec<(usize, &Route)> =
            group.iter().filter_map(|&(_, id)| out.routes[id].as_ref().map(|r| (id, r))).collect();
        for &(id, r) in &routes {
            if let Some(c) = inner(&r.cells).iter().find(|c| grid[**c as usize] != EMPTY) {
                return Err(format!(
                    "path {id} claims cell {c}, which holds {:#x} when it commits",
                    grid[*c as usize]
                ));
            }
            for &c in inner(&r.cells) {
                grid[c as usize] = id as u64 + 1;
            }
        }
        for &(id, r) in &routes {
            let (src, dst) = input.pairs[id];
            for &c in inner(&r.cells) {
                grid[c as usize] = EMPTY;
            }
            let shortest = expand(&shape, &grid, src, dst, &mut scratch);
            for &c in inner(&r.cells) {
                grid[c as usize] = id as u64 + 1;
            }
            if shortest != Some(r.cells.len() as u32 - 1) {
                return Err(format!(
                    "path {id} has {} steps; the shortest route when it commits has {shortest:?}",
                    r.cells.len() - 1
                ));
            }
        }
    }
    // 4. Dropped paths have no route in the final grid.
    for (id, r) in out.routes.iter().enumerate() {
        if r.is_none() {
            let (src, dst) = input.pairs[id];
            if let Some(d) = expand(&shape, &grid, src, dst, &mut scratch) {
                return Err(format!("path {id} was dropped, but a route of {d} steps exists"));
            }
        }
    }
    // 5. The final grid is the replayed one.
    if let Some(c) = (0..grid.len()).find(|c| grid[*c] != out.grid[*c]) {
        return Err(format!(
            "cell {c} holds {:#x}, but the routes put {:#x} there",
            out.grid[c], grid[c]
        ));
    }
    Ok(())
}
