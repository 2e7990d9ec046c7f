//! SPHT synthetic mixes at tiny scale: object sums against the committed increments.
#![allow(clippy::unwrap_used)]

use ordo::{Isolation, Versions};
use ordo_bench::synthetic::{self, Pool, SyntheticConfig};
use ordo_clock::LogicalClock;

fn tiny(pool: Pool) -> SyntheticConfig {
    SyntheticConfig {
        reads: 5,
        writes: 5,
        pool,
        pool_objects: 64,
        threads: 2,
        duration: std::time::Duration::from_millis(50),
        isolation: Isolation::StrictSerializable,
        versions: Versions::Single,
    }
}

#[test]
fn increments_add_up_in_private_and_shared_pools() {
    for pool in [Pool::Private, Pool::Shared] {
        for isolation in [Isolation::StrictSerializable, Isolation::Snapshot] {
            let cfg = SyntheticConfig { isolation, ..tiny(pool) };
            let table = synthetic::load(LogicalClock::new(), &cfg).unwrap();
            let writes = synthetic::run_counted(&table, &cfg, 500).unwrap();
            assert_eq!(writes, 2 * 500 * 5);
            synthetic::check(&table, writes).unwrap();
            assert!(synthetic::check(&table, writes + 1).is_err());
        }
    }
}

#[test]
fn timed_run_and_bad_parameters() {
    let cfg = tiny(Pool::Shared);
    let table = synthetic::load(LogicalClock::new(), &cfg).unwrap();
    assert!(synthetic::run(&table, &cfg).committed > 0);
    for bad in [
        SyntheticConfig { threads: 0, ..tiny(Pool::Private) },
        SyntheticConfig { reads: 0, writes: 0, ..tiny(Pool::Private) },
        SyntheticConfig { pool_objects: 2, ..tiny(Pool::Private) },
    ] {
        assert!(synthetic::load(LogicalClock::new(), &bad).is_err());
    }
}
