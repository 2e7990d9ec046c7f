//! Deterministic simulation of the cluster's clock-and-failover layer (issue 17, DESIGN §6, §8):
//! one seed, one run, one history, checked for strict serializability.
//!
//! # What is simulated
//! `N` members (3–5, `f` = 1, or 2 with five) each own a real [`SyncedClock`] over a
//! [`SkewedClock`] with its own offset (±50 ms) and drift (±400 ppm, so that any two differ by
//! less than `ε` = 1000 ppm, the clocks' configured bound), all over one virtual
//! [`TimeSource`]. Everything else is a discrete-event simulation on one thread, driven by a
//! queue ordered by (virtual time, insertion number):
//!
//! * **The network.** Every message takes a random delay (20–200 µs, so messages reorder)
//!   and is lost with a per-run probability (up to 2 %). A *partitioned* member loses every
//!   message in and out; a crashed member neither sends nor receives. A quarter of the members
//!   have a slow clock-sync path (the CM reads its clock for their sync requests 10–35 ms
//!   late, FaRMv2 §4.1's "scheduling delays"), so the upper bounds of their intervals are wide.
//! * **Clock sync** (FaRMv2 Fig. 2): each non-CM runs `begin_sync` / [`SyncedClock::master_time`]
//!   on the CM / `finish_sync` about every millisecond. A lost sync just fails. A member
//!   that acknowledged a NEW-CONFIG changing the CM, and the initiator of such a round from
//!   just before its round, start no sync (`node.rs::sync_once`, `cm_change_acked`) until they
//!   adopt a configuration with a new CM or eight leases passed (`PREPARED_MAX`); a sync
//!   in flight then is stale anyway (the disable moved the clock's generation).
//! * **Leases** (FaRM, module [`crate::lease`]), as `node.rs` keeps them: a non-CM sends a lease
//!   request for its configuration to the CM every lease/4 (10 ms leases); the CM records the
//!   renewal when the request arrives (if its clock is the master and it is the CM of that
//!   configuration: `node.rs` answers `NOT_CM` or `WRONG_CONFIG` otherwise) and grants it,
//!   and the member records its renewal at the time it sent the request. Syncs renew no lease.
//!   By default renewals are messages the member's lease checks do not wait for; with
//!   [`SimOptions::await_renewals`] the lease thread awaits each renewal, for at most lease/2
//!   (`lease_loop`'s `call_timeout`), before it checks its leases or renews again, and drops a
//!   grant that comes after the timeout, as `node.rs` does (syncs are not awaited so).
//!   After adopting a configuration with a new CM, both sides track their new partners with a
//!   grace of four lease periods, which the first renewal ends (`NodeShared::adopt`). Each
//!   lease also keeps when its peer was last *heard from* (`LeaseState::heard_at`): its last
//!   renewal, or when the lease was first expected — never the end of the grace. Each
//!   member checks its leases every lease/4 (random phase), and half the checks run late by up
//!   to another lease/4 (a descheduled lease thread: `node.rs`'s lease wait of 1.5 periods
//!   allows for exactly that). A lease not renewed for a period (or before its grace ended)
//!   expires. A non-CM whose CM lease expired disables its clock with
//!   [`SyncedClock::disable_for_reconfiguration`] (a later sync enables it again) and suspects
//!   the CM; the CM suspects members whose leases expired. **A member that suspects its CM
//!   renews no more with it** (`lease_loop`), until a configuration naming another CM replaces
//!   the lease. **The clock fences count silence from `heard_at`** (`LeaseTable::silent_for`):
//!   the grace delays suspicion, never a fence. *The CM fences itself* (`node.rs::fence_cm`):
//!   at every check, if a current member has been silent for more than lease/2 (its last lease
//!   request arrived that long ago, or it never sent one since this node became CM), it
//!   disables its own clock; once no member is silent and no reconfiguration runs on it, it
//!   enables it again at its own bound (`enable_master_at(disable_for_reconfiguration())`).
//!   *A member fences itself* (`node.rs::fence_member`): a non-CM with an enabled clock that
//!   has not renewed with the CM for more than a period (or adopted it that long ago and never
//!   renewed) disables its clock; the next sync enables it again. Both fences, the lease
//!   service and the renewals are gated on the clock's master flag (`is_cm()`), not on the
//!   configuration, as in `node.rs`: an initiator whose CM-changing round failed has adopted a
//!   configuration naming it CM, but until a round enables its clock it neither fences as a CM
//!   nor grants leases. Lease messages are lost only to crashes and partitions unless
//!   [`SimOptions::lossy_leases`] is set.
//! * **Failover** as `node.rs::reconfigure`: [`failover::plan`], a compare-and-swap of the
//!   configuration in a simulated etcd (a network round trip; it fails while etcd is
//!   unavailable, a random window in 30 % of the runs, or when the sequence number moved),
//!   then [`failover::run_round`] over [`SimMembers`], whose NEW-CONFIG, CONFIG-COMMIT and
//!   ADVANCE travel through the simulated network (a lost message or reply fails the round
//!   after a 1 ms timeout). While the initiator waits, the rest of the simulation keeps
//!   running: the round's calls pump the event queue. A failed round is planned again removing
//!   the member that failed, at most three attempts; a retry after a round that changed the CM
//!   keeps `cm_changed` and sets `lease_wait`, as `node.rs` does now. The initiator adopts the
//!   swapped configuration after its round, failed or not, and a member that is reconfiguring
//!   starts no second failover (`node.rs`: `reconfiguring`). The lease wait is 1.5 lease periods of the
//!   initiator's local clock, as in `node.rs`. (`node.rs` waits `max(lease, 200 ms)` for an
//!   answer, which by itself outlasts every removed member's lease and so hides what the lease
//!   wait is for; the protocol must be right for any timeout.)
//! * **Faults**, one scenario per run, striking 8–16 ms in, once every member has synchronised
//!   at least once: none; a non-CM crashes or is partitioned; the CM crashes; the CM crashes
//!   and another member crashes or is partitioned at the same instant (five members, `f` = 2);
//!   the CM crashes and the CM that replaces it crashes 0–1 ms after enabling its clock —
//!   sometimes before any member synchronised with it, which is the case ADVANCE exists for.
//!   Two more scenarios are not in the default mix and run in their own tests: the CM is
//!   partitioned ([`Fault::CmPartitioned`]), and the CM crashes and the CM replacing it is
//!   partitioned 0–1 ms after enabling ([`Fault::NewCmPartitioned`]). A
//!   *partitioned* member is alive: its clients keep running transactions until its own lease
//!   check disables its clock — this is what the lease-expiry wait exists for.
//! * **A workload** on every live member: two clients each run, one after another, read-only
//!   transactions (1–3 of 4 registers) and blind write transactions (1–2 registers, unique
//!   values) against one perfect multi-version store shared by the simulation. A transaction
//!   starts only while its coordinator's clock is enabled (a disabled clock refuses). A writer
//!   locks its keys (a locked key makes it retry later), takes `wts = U` of a reading `[L, U]`
//!   and installs its versions at `wts` at once, then waits until the clock's lower bound has
//!   passed `wts` before it reports the commit and unlocks (FaRMv2's commit wait, `get_ts`). A
//!   reader takes `rts = U` the same way and reads the newest version at or below `rts` when the
//!   wait ends. Reading at `get_ts` rather than at `now().lo` is what the engine does for
//!   strictness: a reader started after a writer finished must see it.
//!
//! Every transaction is recorded in an `ordo-check` [`History`] with its real-time span
//! (virtual time: `invoke = 2t + 1`, `complete = 2t`, so an attempt that completed at the same
//! instant another was invoked precedes it — at one instant of true time the CM's time is one
//! value, so that order is real), its reads and writes with their version timestamps.
//! A transaction whose member crashed, or whose clock never came back, is `Unknown`.
//! [`SimRun::check`] runs [`ordo_check::check_strict_serializable`] on every history.
//!
//! # Why the checker catches broken failover
//! With correct clocks every timestamp is an upper bound of the CM's time when it was taken and
//! every commit waits until the CM's time passed it, so a transaction that starts after another
//! completed gets a larger timestamp and sees its writes (for writes, the version order is the
//! order of the tags). If a new CM's time can be below a timestamp handed out before (no lease
//! wait while a partitioned member still serves, no ADVANCE after a CM that reigned briefly), a
//! later reader reads an older version or a later writer installs below an earlier one: a cycle
//! through a real-time edge, which the checker names (`G-single-realtime`, `G0-realtime`, …).
//!
//! # What is not simulated
//! Transaction recovery, backups and promotion of data (the store is one perfect store: only
//! time is under test; [`data`] simulates the data path with real engines), the engine's OCC validation (there are no read-write transactions),
//! durable nodes and the storage seam, crashed members restarting, partitions healing, adding
//! members, and racing initiators: one round runs at a time (the etcd compare-and-swap already
//! lets exactly one win; the others' swaps fail on the sequence number, as they do here when
//! they come after it). A member that suspects the same members again waits
//! [`FAILOVER_RETRY_NANOS`] (`node.rs` waits 1 s, longer than a simulated run). The tokio
//! transport, etcd itself and `node.rs`'s threads are not run: the simulation re-implements
//! their clock-relevant behaviour (lease bookkeeping, `check_leases`, `reconfigure`,
//! CONFIG-COMMIT adoption) and runs the real clock and failover code.
//!
//! # The gaps of `node.rs` the simulation found, now closed
//! Each was found as a seed the checker rejected; `node.rs` closed them (issue 17), the
//! simulation models the fix by default, and each has a test that runs the scenario with the
//! fix and names the first seed the checker rejects with the fix left out (the `SimOptions`
//! switches below model `node.rs` before it), so the simulation keeps proving it can see the
//! gap:
//! * **A CM never fenced itself.** `check_leases` disabled only a non-CM's clock, and no lease
//!   wait is planned when only the CM is removed. A CM that is partitioned but alive
//!   ([`Fault::CmPartitioned`]), or that lost lease requests ([`SimOptions::lossy_leases`]),
//!   kept handing out time below the new CM's. Now the CM fences itself half a lease after a
//!   member's last request arrived, before that member (whose renewal counts from its send time)
//!   suspects it a full lease after; [`SimOptions::no_cm_fence`] leaves the fence out.
//! * **A failover before any survivor synchronised** left no bound on the old CM's time; the
//!   round now refuses to enable a new CM at FF = 0 ([`failover::run_round`]) and the cluster
//!   stays without time. By default the fault waits for every member's first sync anyway
//!   ([`SimOptions::strike_before_sync`]).
//! * **A failed round that changed the CM never enabled the new CM**: `reconfigure` planned
//!   the retry from the swapped configuration, in which the initiator already is the CM, so
//!   the retry had `cm_changed = false` and the cluster stayed without time (liveness). Now
//!   the retry keeps `cm_changed` and sets `lease_wait` (the member it removes may still be
//!   serving); [`SimOptions::retry_loses_cm_change`] plans it the old way, and
//!   [`SimRun::enabled_at_end`] is 0 for the named seed.
//! * **A round longer than a lease removed the live new CM** in an earlier version of the
//!   simulation, which started leases afresh at adoption. Members start their lease with the
//!   new CM at CONFIG-COMMIT, but the new CM grants leases only after its last ADVANCE-ACK (it
//!   adopts the configuration then); with one-way delays near 2 ms the rest of a five-member
//!   round outlasts a 10 ms lease. `node.rs` gives a new CM's lease partners a grace of four
//!   lease periods, far longer than such a round, and the simulation now models it;
//!   [`SimOptions::no_adopt_grace`] leaves the grace out (by default delays are at most
//!   200 µs, [`SimOptions::delay_max_nanos`]).
//!
//! * **A member in its adoption grace outlived the lease wait.** The grace of four lease
//!   periods delayed the member's fence as well as its suspicion: if the new CM died or was cut
//!   off before any lease request of the member reached it (it grants leases only once it
//!   adopted, after its round), the member's clock, enabled by its first sync with that CM,
//!   stayed enabled for up to five lease periods. When the next failover removed that member
//!   as well (its NEW-CONFIG was lost, and the retry removed it), the lease wait of 1.5 periods
//!   ended long before the member disabled its clock, and it handed out time below the newer
//!   CM's. The default mix hit this with [`Fault::CmTwice`] in about one seed in 7,000 (so
//!   `a_thousand_seeds_pass_the_checker`, whose seeds are drawn afresh on every run, failed in
//!   roughly one run in seven). The same held on the CM's side: a new CM cut off before any
//!   member renewed fenced itself lease/2 after the grace's end, which with checks up to
//!   lease/2 late came after its members, whose grace ended at the same time, suspected it
//!   ([`Fault::NewCmPartitioned`], seed 330 of the grace test). Now both fences count from
//!   `heard_at`: a member disables its clock a period after it adopted a CM it never renewed with, within the next
//!   lease wait; the grace still keeps a member from *suspecting* a live new CM during a slow
//!   round. [`SimOptions::fence_counts_grace`] counts from the grace's end and leaves the
//!   member's fence out.
//! * **A fenced CM enabled its clock again for a member that already suspected it.** The fence
//!   ended once every current member renewed, whether or not a member's own CM lease had
//!   expired in between and that member was already removing the CM (with no lease wait, since
//!   only the CM is removed). Seen with one-way delays up to 2 ms: a retry after a failed round
//!   leaves the CM at a configuration its members do not have yet, it refuses their lease
//!   requests (`WRONG_CONFIG`) for the length of the retry, their leases expire, and once they
//!   adopted the retry's configuration their renewals ended the fence while one of them took
//!   over. Now a member that suspects the CM renews no more with it, so the CM stays fenced
//!   until it is removed or a configuration naming another CM replaces the member's lease;
//!   [`SimOptions::renew_while_suspecting`] renews as before.
//!
//! * **A member prepared for a new CM synchronised again with the old one.** A member that
//!   acknowledged a CM-changing NEW-CONFIG (its clock disabled, FF taken at the ack) could
//!   synchronise with the old CM, still alive after a false suspicion, enable its clock again
//!   and hand out time above the FF the new CM starts from (lossy leases, 10 % loss: seed 707,
//!   where the new CM had never synchronised, so the lease wait raised nothing). Now such a
//!   member, and the initiator of a CM-changing round, start no sync until they adopt a new CM
//!   or eight leases pass (`node.rs`: `cm_change_acked`, `PREPARED_MAX`);
//!   [`SimOptions::resync_while_prepared`] synchronises as before. A skipped sync draws the
//!   randomness of its request all the same, so runs in which the skip changes nothing stay the
//!   same runs, and the named seeds of the other tests stayed where they were. As in `node.rs`,
//!   a member decides whether a NEW-CONFIG changes the CM by comparing it with its own
//!   configuration, not from the plan (after a failed CM-changing round, a member that adopted
//!   it already names the initiator CM, and the retry changes nothing for it).
//!
//! Modelling the fixes brought two divergences of the simulation from `node.rs` to light, both
//! now removed: the CM's fence and lease service were gated on the
//! configuration naming the node CM, where `node.rs` asks whether its clock is the master
//! (`is_cm()`). An initiator whose CM-changing round failed adopts that configuration with its
//! clock disabled and not yet master; gated on the configuration, it fenced itself during its
//! retry (members that never adopted the failed configuration were "silent" since then), the
//! retry's round enabled its clock without clearing the fence's flag, and once partitioned it
//! served on (seed 122 of [`Fault::NewCmPartitioned`], rejected). In `node.rs` such a node
//! fences nothing and refuses lease requests (`NOT_CM`), so its members suspect it if no retry
//! enables it; the simulation now does the same. (`node.rs` relies on a master never running a
//! round that enables its clock again: only a round that changes the CM enables, and its
//! initiator is no master until it does, so `cm_fenced` is never stale.)
//!
//! # What remains open
//! With every fix on, the default mix passes every search run: the suite's 1,000 seeds for
//! 24 values of `ORDO_SEED`, 30,000 and 10,000 seeds of `many_seeds_pass_the_checker`, and the
//! closed gaps' scenarios (200 seeds each; the late-check [`Fault::NewCmPartitioned`] search
//! 1,000); with `cm_change_acked` modelled, the suite's 1,000 seeds for `ORDO_SEED` 1–22 and
//! 30,000 seeds of `many_seeds_pass_the_checker` (default `ORDO_SEED`). Wider searches of the non-default scenarios still find seeds, each with a `gap_`
//! test:
//! * **Closed in session 10: a new CM that never synchronised got no credit for the lease
//!   wait** (lossy leases, seed 631). [`failover::run_round`] now records FF as the new CM's
//!   upper sample before the wait, so the wait's length times 1 + ε is added to it
//!   (`a_new_cm_that_never_synced_gets_credit_for_the_lease_wait`, which fails without it).
//! * **Closed in `node.rs` in session 10, modelled behind an option that is off by default**
//!   (turning it on moves every named seed of the tests above): the CM renews a member's lease
//!   only when its LeaseAck shows the grant arrived ([`SimOptions::ack_renewals`]). With it and
//!   [`SimOptions::await_renewals`] — `node.rs`'s lease handshake — the lossy-lease search
//!   passes every seed before 643; without it the first rejected is 134 (229, traced above,
//!   is among the next)
//!   (`acknowledged_renewals_close_the_lost_grant_gap`).
//! * **Closed in `node.rs` in session 11, modelled behind three options that are off by
//!   default: a CM replaced while alive kept a removed member leased** (lossy leases with
//!   `node.rs`'s handshake: seeds 643, 914, 1,950 and 1,964 of 2,000). The old CM, fenced but
//!   still the CM of its own configuration, kept renewing the lease of a member the new
//!   configuration removed while alive, which served on past the new CM's lease wait.
//!   [`SimOptions::quorum_grants`] (a grant needs a majority of recent lease requests; a member
//!   prepared for a new CM renews no more with the old one), [`SimOptions::wait_after_removal`]
//!   (a CM-only removal soon after other removals waits a lease) and
//!   [`SimOptions::retry_keeps_majority`] (a retry keeps a majority of the configuration the
//!   reconfiguration started from) together pass 30,000 lossy seeds; each left out brings back
//!   a named seed (`a_replaced_cm_keeps_no_removed_member_leased`). (A fenced CM that grants no
//!   leases, [`SimOptions::fenced_cm_refuses`], also closed it here but deadlocked two-member
//!   configurations in `node.rs`.)
//! * **A grant that arrives after the suspicion ends it** (one-way delays up to 2 ms: seed 15
//!   of the default options with `cm_change_acked`, 1,700 and 2,142 before). A divergence of
//!   the simulation from `node.rs`: by default renewals are messages and the lease check runs
//!   while one is in flight, so a late grant renews a lease already reported expired, the
//!   member renews again, and the CM's fence ends while that member removes it. With
//!   [`SimOptions::await_renewals`] (`node.rs`'s lease thread, which awaits each renewal for
//!   at most lease/2 before it checks) the first 3,000 seeds of that scenario pass, the three
//!   named among them; the 2 ms tests run so. It is not the default: it moves every named seed,
//!   and with lossy leases (10 % loss) it rejects seeds 229, 298, 330, 341, 396, 494 and 941
//!   of 1,000. Seed 229, read from its trace (the others not analysed): the CM 3 records
//!   member 5's renewals when its requests arrive, but 5's grants are lost or come after the
//!   timeout and are dropped, so 5 suspects 3 at 64.2 ms although 3 heard from it less than a
//!   millisecond before (3 ended its fence at 63.5 ms). Only the CM is removed, so there is no
//!   lease wait; 5 enables at 65.5 ms, and 3 fences only at 67.2 ms, lease/2 after 5's last
//!   request arrived, serving below 5 meanwhile (`G-single`). The fence's margin (below)
//!   assumes the member's last renewal is the CM's last request from it; a lost or late reply
//!   breaks that, in `node.rs` too as far as read (its renewal recorded on arrival, the member's
//!   only on the reply): a likely gap of `node.rs`, which awaited renewals only make more
//!   frequent. `node.rs` awaits its syncs the same way, not modelled: with a lease/2
//!   timeout a member whose sync path is slower than lease/2 (a quarter of the members here,
//!   10–35 ms against 5 ms) would never synchronise.
//! * **The fences' margins** hold for the lease thread `node.rs` allows for (late by at most
//!   lease/4): a member suspects the CM a lease after it sent its last renewal, and the CM
//!   fences at its first check more than lease/2 after that request arrived, at most a lease
//!   after it arrived; the margin left is the failover's own length (a swap and the round's
//!   calls before the new CM enables) less one message delay. A member fences at its first
//!   check more than a lease after its last renewal or adoption, within 1.5 leases, which the
//!   lease wait covers. With checks up to lease/2 late ([`SimOptions::late_check_max_nanos`])
//!   the default mix and [`Fault::NewCmPartitioned`] still pass, but a partitioned CM
//!   ([`Fault::CmPartitioned`], seed 214 of 2,000) fences 0.9 ms after the new CM enabled.
//!
//! A cost of the second fix, read from `node.rs` and not measured here: a member whose CM lease
//! expired while the CM stays (its own failover did not remove the CM, say because the CM's
//! round moved the sequence number first) keeps the expired entry — only a configuration
//! naming another CM replaces it — and renews no more, so the CM fences itself and removes that
//! member, or the member removes the CM at its next attempt. Safe, but a live member or CM is
//! lost to a transient suspicion.
//!
//! Two liveness gaps show in runs that end without a failover (about 6 % of the runs with
//! the CM crashed; the checker has nothing to reject, the cluster just stays without time):
//! a compare-and-swap that etcd applied but whose answer was lost leaves etcd one
//! configuration ahead of every member, nobody runs its round, and every later swap fails on
//! the sequence number (`node.rs` treats every swap error as "another member won"); and a lost
//! round message makes the initiator remove a live member, which with `f` = 1 can leave a
//! region without replicas, so the next plan is refused (`RegionLost`).
//!
//! The simulation also found a bug in [`failover::run_round`], fixed: the new CM raised FF to
//! its own upper bound only after `advance` had replaced its sync state with FF, so the time
//! the lease wait took was dropped, and a partitioned member that served on during the NEW-CONFIG
//! round could hand out timestamps above the new CM's FF.
//!
//! # Why our own seam and not turmoil or madsim
//! Nodes run std threads and blocking calls (the lease thread, `get_ts`, the failover thread),
//! not async tasks, so turmoil's and madsim's async runtimes would simulate only the tokio
//! transport, not the code under test here. The seams this layer needs already exist:
//! [`failover::RoundMembers`] carries the round's messages, [`ordo_clock::Clock`] and the virtual
//! [`TimeSource`] carry time. The simulation drives the real [`SyncedClock`], [`failover::plan`]
//! and [`failover::run_round`] through them.
//!
//! # Invariants
//! * Determinism: nothing reads wall-clock time, every decision comes from one SplitMix64
//!   stream seeded by the run's seed, every collection iterated is ordered (`BTreeMap`, `Vec`),
//!   and events at one instant run in insertion order. One seed gives one history
//!   (`same_seed_same_history`).
//! * No clock is read through a blocking call: the simulation uses
//!   `try_now(Duration::ZERO)`, which fails at once on a disabled clock.
//! * Virtual time never moves backwards: events are taken in time order and time is only
//!   advanced to an event's time or a round's deadline (asserted).

#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use ordo_check::{History, Outcome, TxnId, Violation};
use ordo_clock::{
    DEFAULT_START_NANOS, Interval, SkewedClock, SyncOptions, SyncStart, SyncedClock, TimeSource,
    Timestamp,
};

use crate::config::{ClusterConfig, Member, NodeId};
use crate::failover::{self, RoundShortcuts};

const MICRO: u64 = 1_000;
const MILLI: u64 = 1_000_000;

/// The lease period of every member.
pub const LEASE_NANOS: u64 = 10 * MILLI;
/// How long the lease thread awaits a renewal ([`SimOptions::await_renewals`]; `node.rs`:
/// `lease_loop`'s `call_timeout`, lease/2).
const RENEW_TIMEOUT_NANOS: u64 = LEASE_NANOS / 2;
/// How often a member checks its leases and renews its CM lease (`node.rs`: lease/4).
const LEASE_CHECK_NANOS: u64 = LEASE_NANOS / 4;
/// A CM fences itself when a member's last lease request arrived longer ago than this
/// (`node.rs::fence_cm`: lease/2).
const CM_FENCE_NANOS: u64 = LEASE_NANOS / 2;
/// The grace of a new CM's lease partners (`NodeShared::adopt`: four lease periods).
const ADOPT_GRACE_NANOS: u64 = 4 * LEASE_NANOS;
/// The probability that a lease check runs late (by up to another check interval), in ppm.
const LATE_CHECK_PPM: u64 = 500_000;
/// Mean time between two syncs of a member.
const SYNC_PERIOD_NANOS: u64 = MILLI;
/// A member that suspects the same members again waits this long (`node.rs`:
/// `FAILOVER_RETRY`, 1 s, scaled down to a simulated run).
pub const FAILOVER_RETRY_NANOS: u64 = LEASE_NANOS;
/// How long a round's message waits for its answer before the member is suspected: a few
/// round trips. (`node.rs` waits `max(lease, 200 ms)`, which by itself outlasts every removed
/// member's lease and so hides what the lease wait is for; the protocol must be right for
/// any timeout.)
const ROUND_TIMEOUT_NANOS: u64 = MILLI;
/// Attempts of one reconfiguration (`node.rs`: 3).
const RECONFIGURE_ATTEMPTS: usize = 3;
/// Message delays. The largest is kept well below the lease over the number of a round's
/// sequential calls: members start their lease with the new CM at CONFIG-COMMIT, but the new CM
/// grants leases only once its round is over (as in `node.rs`; module docs).
const DELAY_MIN_NANOS: u64 = 20 * MICRO;
/// The default largest one-way delay.
pub const DELAY_MAX_NANOS: u64 = 200 * MICRO;
/// The extra delay of a slow sync path.
const SLOW_SYNC_MIN_NANOS: u64 = 10 * MILLI;
const SLOW_SYNC_MAX_NANOS: u64 = 35 * MILLI;
/// The largest message loss probability, in ppm.
const LOSS_MAX_PPM: u64 = 20_000;
/// Local clocks' offsets and drifts (any two drifts differ by less than ε = 1000 ppm).
const OFFSET_MAX_NANOS: u64 = 50 * MILLI;
const DRIFT_MAX_PPM: u64 = 400;
/// The claimed boundary of each local reading.
const BOUNDARY_NANOS: u64 = 100;
/// Registers of the workload, clients per member.
const KEYS: u64 = 4;
const CLIENTS: u32 = 2;
/// A client's pause between transactions, and after a refusal.
const THINK_MAX_NANOS: u64 = MILLI;
const REFUSED_PAUSE_NANOS: u64 = 300 * MICRO;
/// How long a transaction waits before it looks at a disabled clock again.
const STALL_POLL_NANOS: u64 = 500 * MICRO;
/// `CmTwice`: how soon after enabling its clock the second CM crashes — before its members'
/// first syncs, sometimes, which is the case ADVANCE exists for (FaRMv2 §4.3).
const SECOND_CRASH_MAX_NANOS: u64 = MILLI;
/// When the fault strikes, and how long a run lasts after it.
/// How long a member that acknowledged a CM-changing NEW-CONFIG starts no sync with the old CM
/// at most (`node.rs`: `PREPARED_MAX` = 8 lease periods).
const PREPARED_MAX_NANOS: u64 = 8 * LEASE_NANOS;
const FAULT_MIN_NANOS: u64 = 8 * MILLI;
const FAULT_MAX_NANOS: u64 = 16 * MILLI;
const RUN_NANOS: u64 = 75 * MILLI;

/// A small, explicit pseudo-random generator (SplitMix64): the same seed gives the same
/// stream on every platform and every version of every dependency.
#[derive(Clone, Debug)]
pub struct SimRng(u64);

impl SimRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SimRng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `lo..=hi` (`lo` when `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        lo + self.next_u64() % (span + 1)
    }

    /// True with probability `ppm / 10^6`.
    pub fn chance_ppm(&mut self, ppm: u64) -> bool {
        self.next_u64() % 1_000_000 < ppm
    }

    /// A signed value in `-max..=max`.
    fn signed(&mut self, max: u64) -> i64 {
        let max = i64::try_from(max).unwrap_or(i64::MAX);
        let v = i64::try_from(self.range(0, 2 * max.unsigned_abs())).unwrap_or(0);
        v - max
    }
}

/// The fault scenario of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Nothing fails.
    Nothing,
    /// A non-CM crashes, or (`partitioned`) is cut off but keeps running.
    NonCm {
        /// Cut off but alive.
        partitioned: bool,
    },
    /// The CM crashes.
    Cm,
    /// The CM crashes and, at the same instant, another member crashes or is partitioned
    /// (five members, `f` = 2).
    CmPlusOne {
        /// The other member is cut off but alive.
        partitioned: bool,
    },
    /// The CM crashes, and so does the CM that replaces it, soon after enabling its clock.
    CmTwice,
    /// The CM is cut off but alive: it must fence itself before a member can suspect it
    /// (`node.rs::fence_cm`, module docs). Not in the default mix.
    CmPartitioned,
    /// The CM crashes, and the CM that replaces it is cut off (alive) soon after enabling its
    /// clock: the new CM must fence itself although it never heard a lease request, and its
    /// members may still be in their grace (module docs). Not in the default mix.
    NewCmPartitioned,
}

impl Fault {
    /// The scenario's name in `ORDO_SIM_FAULT` (the `replay_one_seed` test).
    pub fn env_name(self) -> &'static str {
        match self {
            Fault::Nothing => "none",
            Fault::NonCm { partitioned: false } => "non-cm",
            Fault::NonCm { partitioned: true } => "non-cm-p",
            Fault::Cm => "cm",
            Fault::CmPlusOne { partitioned: false } => "cm+1",
            Fault::CmPlusOne { partitioned: true } => "cm+1-p",
            Fault::CmTwice => "cm-twice",
            Fault::CmPartitioned => "cm-p",
            Fault::NewCmPartitioned => "new-cm-p",
        }
    }

    /// The scenario named `name` ([`Fault::env_name`]).
    pub fn from_env_name(name: &str) -> Option<Fault> {
        [
            Fault::Nothing,
            Fault::NonCm { partitioned: false },
            Fault::NonCm { partitioned: true },
            Fault::Cm,
            Fault::CmPlusOne { partitioned: false },
            Fault::CmPlusOne { partitioned: true },
            Fault::CmTwice,
            Fault::CmPartitioned,
            Fault::NewCmPartitioned,
        ]
        .into_iter()
        .find(|f| f.env_name() == name)
    }
}

/// How a run is set up beyond its seed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SimOptions {
    /// Steps of the round to leave out (negative tests).
    pub shortcuts: RoundShortcuts,
    /// The fault scenario; `None` draws one from the seed (never [`Fault::CmPartitioned`] or
    /// [`Fault::NewCmPartitioned`]).
    pub fault: Option<Fault>,
    /// The number of members; `None` draws 3, 4 or 5 (5 for the scenarios that need it).
    pub members: Option<usize>,
    /// Let the fault strike before every member synced with the CM once (module docs: this
    /// loses time; the default waits for every member's first sync).
    pub strike_before_sync: bool,
    /// The largest one-way message delay; `None`: [`DELAY_MAX_NANOS`].
    pub delay_max_nanos: Option<u64>,
    /// The message loss probability in ppm; `None` draws one up to 2 %.
    pub loss_ppm: Option<u64>,
    /// Lease messages are lost like any other (module docs); off by default.
    pub lossy_leases: bool,
    /// Leave out the CM's self-fence (`node.rs::fence_cm`, module docs): `node.rs` before the
    /// fence, a negative test.
    pub no_cm_fence: bool,
    /// Plan the retry after a failed round as `node.rs` did before it carried the CM change
    /// over (module docs): the retry has `cm_changed = false`; a negative test.
    pub retry_loses_cm_change: bool,
    /// How late a late lease check runs at most; `None`: lease/4 (module docs). Half a lease
    /// is what `node.rs`'s lease wait allows for.
    pub late_check_max_nanos: Option<u64>,
    /// Start the leases of a new CM without `node.rs`'s grace of four lease periods
    /// (`NodeShared::adopt`, module docs); a negative test.
    pub no_adopt_grace: bool,
    /// Count the clock fences' silence from the end of the adoption grace, as `node.rs` did
    /// before `LeaseTable::silent_for`: the CM's fence counts from `renewed_at` (the grace's
    /// end until the first renewal), and a member has no fence of its own besides its CM lease
    /// expiring (`node.rs::fence_member` left out; module docs); a negative test.
    pub fence_counts_grace: bool,
    /// A member that suspects its CM keeps renewing its lease with it, as `node.rs` did before
    /// `lease_loop` skipped renewals while the CM's lease is expired (module docs); a negative
    /// test.
    pub renew_while_suspecting: bool,
    /// A member that acknowledged a NEW-CONFIG changing the CM, and the initiator of a
    /// CM-changing round, keep synchronising with the old CM, as `node.rs` did before
    /// `cm_change_acked` (module docs); a negative test.
    pub resync_while_prepared: bool,
    /// The lease thread awaits each renewal (its grant, or a timeout of lease/2) before it
    /// runs its lease checks and renews again, and drops a grant that comes after the timeout,
    /// as `node.rs::lease_loop` does; off by default, where renewals are messages that the
    /// checks do not wait for (module docs, "What remains open").
    pub await_renewals: bool,
    /// The CM renews a member's lease only when the member's LeaseAck shows the grant reached
    /// it (counted from the request's arrival), as `node.rs` does since session 10; off by
    /// default (the CM renews at the request's arrival), so that the named seeds found before
    /// stay valid: see "What remains open".
    pub ack_renewals: bool,
    /// A CM whose clock is disabled (fenced) grants no leases: a candidate fix `node.rs` does
    /// not have (module docs, "What remains open"); off by default.
    pub fenced_cm_refuses: bool,
    /// `node.rs` since session 11 (`grant_has_quorum`, `NO_QUORUM`): the CM grants a lease only
    /// while a majority of its configuration (itself and the requester included) asked within
    /// half a lease, once a majority has asked so since it became CM, and a member prepared for
    /// a new CM (`cm_change_acked`) renews no more with the old one — so a CM replaced while
    /// alive stops renewing the removed members it still hears
    /// (`a_replaced_cm_keeps_no_removed_member_leased`).
    pub quorum_grants: bool,
    /// A CM-changing round that removes only the old CM still waits a lease when this member
    /// adopted a configuration that removed members less than two leases before
    /// (`node.rs::reconfigure`): a member removed while alive by a round that kept the CM may
    /// still hold a lease from it (`a_replaced_cm_keeps_no_removed_member_leased`).
    pub wait_after_removal: bool,
    /// A retry of a failed round is refused unless its configuration keeps a majority of the
    /// configuration the reconfiguration started from (`node.rs::reconfigure`): each retry
    /// removes the member that failed, and a chain of majorities of the previous attempt's
    /// configuration can end in a minority of the members, while the old CM and the members
    /// removed on the way, alive, are a majority of the configuration they hold.
    pub retry_keeps_majority: bool,
    /// Print what the failover does, with virtual times, on stderr (replaying a seed).
    pub trace: bool,
}

/// One reconfiguration that completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FailoverRecord {
    /// When the round ended (virtual ns).
    pub at_nanos: u64,
    /// The initiator.
    pub initiator: NodeId,
    /// The members removed.
    pub removed: Vec<NodeId>,
    /// The configuration installed.
    pub seq: u64,
    /// The FF the new CM enabled its clock at, when the CM changed.
    pub ff_nanos: Option<u64>,
}

/// What one run did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimRun {
    /// The seed.
    pub seed: u64,
    /// Members at the start.
    pub members: usize,
    /// The fault scenario.
    pub fault: Fault,
    /// Every transaction attempt.
    pub history: History,
    /// The reconfigurations that completed, in order.
    pub failovers: Vec<FailoverRecord>,
    /// Rounds that failed (a member did not answer).
    pub failed_rounds: u32,
    /// Compare-and-swaps etcd refused or could not answer.
    pub refused_swaps: u32,
    /// Events processed.
    pub events: u64,
    /// Members of the configuration in etcd that are alive with their clock enabled when the
    /// run ends (0: the cluster hands out no time).
    pub enabled_at_end: usize,
    /// The options of the run.
    pub options: SimOptions,
}

/// A simulated run whose history the checker rejected.
#[derive(Debug, thiserror::Error)]
#[error("seed {seed} ({fault:?}, {members} members): {violation}\nrerun: {rerun}")]
pub struct SimFailure {
    /// The seed.
    pub seed: u64,
    /// The fault scenario.
    pub fault: Fault,
    /// Members at the start.
    pub members: usize,
    /// What the checker found.
    pub violation: Box<Violation>,
    /// The command that replays the run ([`SimRun::rerun_command`]).
    pub rerun: String,
}

impl SimRun {
    /// Checks the history for strict serializability.
    ///
    /// # Errors
    /// [`SimFailure`] naming the seed and the violation.
    pub fn check(&self) -> Result<(), SimFailure> {
        ordo_check::check_strict_serializable(&self.history).map_err(|v| SimFailure {
            seed: self.seed,
            fault: self.fault,
            members: self.members,
            violation: Box::new(v),
            rerun: self.rerun_command(),
        })
    }

    /// The command that replays this run with a trace of the failover: the seed and every
    /// option that differs from the default, as the environment of the `replay_one_seed` test.
    pub fn rerun_command(&self) -> String {
        let o = &self.options;
        let mut env = format!("ORDO_SIM_SEED={}", self.seed);
        if let Some(fault) = o.fault {
            env.push_str(&format!(" ORDO_SIM_FAULT={}", fault.env_name()));
        }
        if o.shortcuts.skip_lease_wait {
            env.push_str(" ORDO_SIM_SKIP=lease");
        }
        if o.shortcuts.skip_advance {
            env.push_str(" ORDO_SIM_SKIP=advance");
        }
        let flags = [
            (o.lossy_leases, "LOSSY_LEASES"),
            (o.no_cm_fence, "NO_CM_FENCE"),
            (o.retry_loses_cm_change, "RETRY_LOSES_CM_CHANGE"),
            (o.no_adopt_grace, "NO_ADOPT_GRACE"),
            (o.fence_counts_grace, "FENCE_COUNTS_GRACE"),
            (o.renew_while_suspecting, "RENEW_WHILE_SUSPECTING"),
            (o.resync_while_prepared, "RESYNC_WHILE_PREPARED"),
            (o.ack_renewals, "ACK_RENEWALS"),
            (o.fenced_cm_refuses, "FENCED_CM_REFUSES"),
            (o.quorum_grants, "QUORUM_GRANTS"),
            (o.wait_after_removal, "WAIT_AFTER_REMOVAL"),
            (o.retry_keeps_majority, "RETRY_KEEPS_MAJORITY"),
            (o.await_renewals, "AWAIT_RENEWALS"),
        ];
        for (_, name) in flags.iter().filter(|(on, _)| *on) {
            env.push_str(&format!(" ORDO_SIM_{name}=1"));
        }
        if let Some(l) = o.late_check_max_nanos {
            env.push_str(&format!(" ORDO_SIM_LATE_CHECK_MAX_NS={l}"));
        }
        if o.strike_before_sync {
            env.push_str(" ORDO_SIM_EARLY_STRIKE=1");
        }
        if let Some(p) = o.loss_ppm {
            env.push_str(&format!(" ORDO_SIM_LOSS_PPM={p}"));
        }
        if let Some(d) = o.delay_max_nanos {
            env.push_str(&format!(" ORDO_SIM_DELAY_MAX_NS={d}"));
        }
        format!(
            "{env} ORDO_SIM_TRACE=1 cargo test -p ordo-cluster --lib sim::tests::replay_one_seed \
             -- --nocapture"
        )
    }

    /// Committed transactions.
    pub fn committed(&self) -> usize {
        self.history.committed()
    }
}

/// Runs the simulation for `seed`.
pub fn simulate(seed: u64, options: SimOptions) -> SimRun {
    let world = World::new(seed, options);
    world.run();
    world.finish()
}

/// Runs the simulation for `seed` and checks its history.
///
/// # Errors
/// [`SimFailure`] when the checker rejects the history.
pub fn simulate_and_check(seed: u64, options: SimOptions) -> Result<SimRun, SimFailure> {
    let run = simulate(seed, options);
    run.check()?;
    Ok(run)
}

type SimClock = SyncedClock<SkewedClock>;

/// What happens at an instant.
#[derive(Clone, Copy, Debug)]
enum Event {
    /// A non-CM begins a sync with its CM.
    SyncTick(NodeId),
    /// A sync request reaches the CM `to`.
    SyncRequest { from: NodeId, to: NodeId, start: SyncStart },
    /// The CM's reply reaches `to`.
    SyncReply { from: NodeId, to: NodeId, start: SyncStart, cm: Interval },
    /// A non-CM sends a lease request.
    LeaseTick(NodeId),
    /// A lease request for configuration `seq` reaches the CM `to`.
    LeaseRequest { from: NodeId, to: NodeId, seq: u64, sent_local: u64 },
    /// The grant reaches `to`; `arrived_local` is when its request reached the CM.
    LeaseGrant { from: NodeId, to: NodeId, sent_local: u64, arrived_local: u64 },
    /// The member's LeaseAck (the handshake's third leg) reaches the CM `to`.
    LeaseAck { from: NodeId, to: NodeId, seq: u64, arrived_local: u64 },
    /// A member checks its leases.
    LeaseCheck(NodeId),
    /// The renewal `node` sent at `sent_local` times out ([`SimOptions::await_renewals`]).
    RenewTimeout { node: NodeId, sent_local: u64 },
    /// A client starts its next transaction.
    ClientStart { node: NodeId, client: u32 },
    /// A transaction looks whether its timestamp wait is over.
    TxnPoll(usize),
    /// The run's fault strikes.
    Strike,
    /// A member crashes, or (`partitioned`) is cut off.
    Crash(NodeId, bool),
}

/// One member's state besides its clock.
#[derive(Debug)]
struct NodeState {
    alive: bool,
    partitioned: bool,
    /// The configuration this member adopted.
    config: ClusterConfig,
    /// The CM reads its clock for this member's syncs this much later (a slow sync path).
    slow_sync_nanos: u64,
    /// The leases this member tracks (`node.rs`'s `LeaseTable`): a non-CM its CM's, the CM
    /// its members'.
    leases: BTreeMap<NodeId, SimLease>,
    /// The CM disabled its clock because a member was silent (`node.rs::fence_cm`).
    cm_fenced: bool,
    /// A reconfiguration is pending or running on this member (`node.rs`: `reconfiguring`).
    reconfiguring: bool,
    /// The last failover attempt: the suspects and when it ended (virtual ns).
    last_attempt: Option<(BTreeSet<NodeId>, u64)>,
    /// When (local ns) this member acknowledged a NEW-CONFIG that changes the CM, or began a
    /// CM-changing round as its initiator, until it adopts a new CM (`node.rs`:
    /// `cm_change_acked`): it starts no sync meanwhile, for at most [`PREPARED_MAX_NANOS`].
    cm_change_acked: Option<u64>,
    /// The renewal the lease thread awaits (its `sent_local`), with
    /// [`SimOptions::await_renewals`].
    renewing: Option<u64>,
    /// A lease check fell due while a renewal was awaited: it runs when the renewal ends.
    check_deferred: bool,
    /// As CM: when (local ns) each member's last lease request arrived
    /// ([`SimOptions::quorum_grants`]).
    asked: BTreeMap<NodeId, u64>,
    /// As CM: a majority asked within half a lease at some point since it became CM.
    quorum_seen: bool,
    /// When (local ns) this member last adopted a configuration that removed members
    /// ([`SimOptions::wait_after_removal`]).
    removed_at: Option<u64>,
}

/// One lease as `node.rs`'s `LeaseTable` keeps it, in local ns.
#[derive(Clone, Copy, Debug)]
struct SimLease {
    /// The last renewal, or (no renewal yet) the end of a grace, which may lie ahead.
    renewed: u64,
    /// The last renewal, or when the lease was first expected (never the end of a grace):
    /// `LeaseState::heard_at`, from which the clock fences count (`LeaseTable::silent_for`).
    heard: u64,
    renewals: u64,
    expired: bool,
}

impl SimLease {
    /// `LeaseTable::expect` at local time `now`: tracked as if renewed at `at` (a grace when
    /// `at` lies ahead), heard from at `now` (or `at`, if earlier).
    fn expect(at: u64, now: u64) -> Self {
        SimLease { renewed: at, heard: now.min(at), renewals: 0, expired: false }
    }

    /// `LeaseTable::renewed`: the first renewal replaces the grace; later ones never move the
    /// lease backwards.
    fn renew(&mut self, at: u64) {
        self.renewed = if self.renewals == 0 { at } else { self.renewed.max(at) };
        self.heard = self.heard.max(at);
        self.renewals += 1;
        self.expired = false;
    }

    /// How long the peer has been silent at local time `now` (`LeaseTable::silent_for`); with
    /// `counts_grace` (`SimOptions::fence_counts_grace`), counted from `renewed` instead, as
    /// `node.rs` did before.
    fn silent_for(&self, now: u64, counts_grace: bool) -> u64 {
        now.saturating_sub(if counts_grace { self.renewed } else { self.heard })
    }
}

/// Everything that changes, behind one `RefCell` (the clocks are outside: `run_round` holds one
/// while the round's calls pump events).
struct State {
    now: u64,
    rng: SimRng,
    queue: BinaryHeap<Reverse<(u64, u64)>>,
    events: BTreeMap<u64, Event>,
    next_event: u64,
    processed: u64,
    nodes: Vec<NodeState>,
    /// The configuration in etcd.
    etcd: ClusterConfig,
    etcd_down: Option<(u64, u64)>,
    loss_ppm: u64,
    trace: bool,
    lossy_leases: bool,
    adopt_grace_nanos: u64,
    delay_max_nanos: u64,
    fault: Fault,
    /// `CmTwice`: the second crash was scheduled.
    second_crash_done: bool,
    store: Store,
    txns: Vec<SimTxn>,
    next_value: u64,
    pending: Vec<(NodeId, BTreeSet<NodeId>)>,
    failovers: Vec<FailoverRecord>,
    failed_rounds: u32,
    refused_swaps: u32,
    end: u64,
}

/// The simulated cluster.
struct World {
    seed: u64,
    members: usize,
    options: SimOptions,
    shortcuts: RoundShortcuts,
    trace: bool,
    strike_before_sync: bool,
    source: TimeSource,
    clocks: Vec<SimClock>,
    drifts_ppm: Vec<i64>,
    st: RefCell<State>,
}

fn idx(id: NodeId) -> usize {
    usize::try_from(id).map_or(usize::MAX, |i| i.wrapping_sub(1))
}

impl World {
    fn new(seed: u64, options: SimOptions) -> Self {
        let mut rng = SimRng::new(seed);
        let fault = options.fault.unwrap_or_else(|| match rng.range(0, 9) {
            0 => Fault::Nothing,
            1 | 2 => Fault::NonCm { partitioned: rng.range(0, 1) == 1 },
            3 | 4 => Fault::Cm,
            5 | 6 => Fault::CmPlusOne { partitioned: rng.range(0, 1) == 1 },
            _ => Fault::CmTwice,
        });
        let needs_five =
            matches!(fault, Fault::CmPlusOne { .. } | Fault::CmTwice | Fault::NewCmPartitioned);
        let n = options.members.unwrap_or_else(|| {
            if needs_five { 5 } else { usize::try_from(rng.range(3, 5)).unwrap_or(3) }
        });
        let backups = if n >= 5 { 2 } else { 1 };
        let members: Vec<Member> = (1..=n as u64)
            .map(|id| Member { id, addr: format!("127.0.0.1:{}", 7000 + id) })
            .collect();
        let config = ClusterConfig::initial(members, backups);
        let source = TimeSource::virtual_at(DEFAULT_START_NANOS);
        let options_clock = SyncOptions::default();
        let mut clocks = Vec::with_capacity(n);
        let mut drifts = Vec::with_capacity(n);
        let mut nodes = Vec::with_capacity(n);
        for id in 1..=n as u64 {
            let offset = rng.signed(OFFSET_MAX_NANOS);
            let drift = rng.signed(DRIFT_MAX_PPM);
            let local = SkewedClock::new(source.clone(), offset, drift, BOUNDARY_NANOS);
            let clock = if id == config.cm {
                SyncedClock::master(local, options_clock)
            } else {
                SyncedClock::follower(local, options_clock)
            };
            let slow = rng.chance_ppm(250_000);
            let slow_sync_nanos =
                if slow { rng.range(SLOW_SYNC_MIN_NANOS, SLOW_SYNC_MAX_NANOS) } else { 0 };
            let local_now = clock.local_reading();
            clocks.push(clock);
            drifts.push(drift);
            let leases = if id == config.cm {
                config.non_cms().map(|m| (m.id, SimLease::expect(local_now, local_now))).collect()
            } else {
                BTreeMap::from([(config.cm, SimLease::expect(local_now, local_now))])
            };
            nodes.push(NodeState {
                alive: true,
                partitioned: false,
                config: config.clone(),
                slow_sync_nanos,
                leases,
                cm_fenced: false,
                reconfiguring: false,
                last_attempt: None,
                cm_change_acked: None,
                renewing: None,
                check_deferred: false,
                asked: BTreeMap::new(),
                quorum_seen: false,
                removed_at: None,
            });
        }
        let drawn_loss_ppm = rng.range(0, LOSS_MAX_PPM);
        let loss_ppm = options.loss_ppm.unwrap_or(drawn_loss_ppm);
        let fault_at = DEFAULT_START_NANOS + rng.range(FAULT_MIN_NANOS, FAULT_MAX_NANOS);
        let etcd_down = rng.chance_ppm(300_000).then(|| {
            let from = fault_at + rng.range(0, 15 * MILLI);
            (from, from + rng.range(MILLI, 15 * MILLI))
        });
        let mut st = State {
            now: DEFAULT_START_NANOS,
            rng,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            next_event: 0,
            processed: 0,
            nodes,
            etcd: config,
            etcd_down,
            loss_ppm,
            trace: options.trace,
            lossy_leases: options.lossy_leases,
            adopt_grace_nanos: if options.no_adopt_grace { 0 } else { ADOPT_GRACE_NANOS },
            delay_max_nanos: options.delay_max_nanos.unwrap_or(DELAY_MAX_NANOS),
            fault,
            second_crash_done: false,
            store: Store::default(),
            txns: Vec::new(),
            next_value: 1,
            pending: Vec::new(),
            failovers: Vec::new(),
            failed_rounds: 0,
            refused_swaps: 0,
            // The members of a partitioned new CM suspect it only after their grace (four
            // leases) when none renewed with it before the partition: the run goes on so long.
            end: DEFAULT_START_NANOS
                + RUN_NANOS
                + if fault == Fault::NewCmPartitioned {
                    ADOPT_GRACE_NANOS + LEASE_NANOS
                } else {
                    0
                },
        };
        for id in 1..=n as u64 {
            let phase = st.rng.range(0, SYNC_PERIOD_NANOS);
            st.schedule(phase, Event::SyncTick(id));
            let phase = st.rng.range(0, LEASE_CHECK_NANOS);
            st.schedule(phase, Event::LeaseTick(id));
            let phase = st.rng.range(0, LEASE_CHECK_NANOS);
            st.schedule(phase, Event::LeaseCheck(id));
            for client in 0..CLIENTS {
                let phase = st.rng.range(0, THINK_MAX_NANOS);
                st.schedule(phase, Event::ClientStart { node: id, client });
            }
        }
        if fault != Fault::Nothing {
            let at = fault_at - st.now;
            st.schedule(at, Event::Strike);
        }
        World {
            seed,
            members: n,
            options,
            shortcuts: options.shortcuts,
            trace: options.trace,
            strike_before_sync: options.strike_before_sync,
            source,
            clocks,
            drifts_ppm: drifts,
            st: RefCell::new(st),
        }
        .traced()
    }

    /// Traces the members' setup.
    fn traced(self) -> Self {
        for id in 1..=self.members as u64 {
            let slow = self.st.borrow().nodes[idx(id)].slow_sync_nanos;
            let drift = self.drifts_ppm[idx(id)];
            self.trace(|| format!("member {id}: drift {drift} ppm, slow sync path {slow} ns"));
        }
        self
    }

    fn trace(&self, line: impl FnOnce() -> String) {
        if self.trace {
            let now = self.source.now().as_nanos() - DEFAULT_START_NANOS;
            eprintln!("[{:>9.3} ms] {}", now as f64 / 1e6, line());
        }
    }

    fn clock(&self, id: NodeId) -> &SimClock {
        &self.clocks[idx(id)]
    }

    /// The top level: events in order; a pending failover runs between two events.
    fn run(&self) {
        loop {
            let next = {
                let mut st = self.st.borrow_mut();
                let pending = std::mem::take(&mut st.pending);
                if pending.is_empty() { None } else { Some(pending) }
            };
            if let Some(pending) = next {
                for (node, removed) in pending {
                    self.reconfigure(node, removed);
                }
                continue;
            }
            let end = self.st.borrow().end;
            if !self.step(end) {
                break;
            }
        }
    }

    /// Processes the next event due at or before `until`; false when there is none.
    fn step(&self, until: u64) -> bool {
        let ev = {
            let mut st = self.st.borrow_mut();
            let Some(&Reverse((at, key))) = st.queue.peek() else { return false };
            if at > until {
                return false;
            }
            st.queue.pop();
            let Some(ev) = st.events.remove(&key) else { return true };
            assert!(at >= st.now, "time moves forward");
            st.now = at;
            st.processed += 1;
            self.source.advance_to(Timestamp::from_nanos(at));
            ev
        };
        self.handle(ev);
        true
    }

    /// Runs every event due up to `t`, then moves time to `t` (a blocking call of a round).
    fn pump_until(&self, t: u64) {
        while self.step(t) {}
        let mut st = self.st.borrow_mut();
        if t > st.now {
            st.now = t;
            self.source.advance_to(Timestamp::from_nanos(t));
        }
    }

    fn now(&self) -> u64 {
        self.st.borrow().now
    }

    fn handle(&self, ev: Event) {
        match ev {
            Event::SyncTick(id) => self.sync_tick(id),
            Event::SyncRequest { from, to, start } => self.sync_request(from, to, start),
            Event::SyncReply { from, to, start, cm } => self.sync_reply(from, to, start, cm),
            Event::LeaseTick(id) => self.lease_tick(id),
            Event::LeaseRequest { from, to, seq, sent_local } => {
                self.lease_request(from, to, seq, sent_local)
            }
            Event::LeaseGrant { from, to, sent_local, arrived_local } => {
                self.lease_grant(from, to, sent_local, arrived_local)
            }
            Event::LeaseAck { from, to, seq, arrived_local } => {
                self.lease_ack(from, to, seq, arrived_local)
            }
            Event::LeaseCheck(id) => self.lease_check(id),
            Event::RenewTimeout { node, sent_local } => self.renew_timeout(node, sent_local),
            Event::ClientStart { node, client } => self.client_start(node, client),
            Event::TxnPoll(t) => self.txn_poll(t),
            Event::Strike => self.strike(),
            Event::Crash(id, partitioned) => self.crash(id, partitioned),
        }
    }

    fn finish(self) -> SimRun {
        let st = self.st.into_inner();
        let enabled_at_end = st
            .etcd
            .members
            .iter()
            .filter(|m| st.nodes[idx(m.id)].alive && self.clocks[idx(m.id)].is_enabled())
            .count();
        let txns = st
            .txns
            .into_iter()
            .enumerate()
            .filter(|(_, t)| t.complete.is_some() || !t.writes.is_empty())
            .map(|(i, t)| ordo_check::Txn {
                id: TxnId(i as u64 + 1),
                process: u32::try_from(t.node).unwrap_or(u32::MAX) * CLIENTS + t.client,
                invoke: t.invoke,
                complete: t.complete,
                outcome: if t.complete.is_some() { Outcome::Committed } else { Outcome::Unknown },
                ops: t.ops,
            })
            .collect();
        SimRun {
            seed: self.seed,
            members: self.members,
            fault: st.fault,
            history: History::from_txns(txns),
            failovers: st.failovers,
            failed_rounds: st.failed_rounds,
            refused_swaps: st.refused_swaps,
            events: st.processed,
            enabled_at_end,
            options: self.options,
        }
    }
}

impl State {
    fn schedule(&mut self, after: u64, ev: Event) {
        let key = self.next_event;
        self.next_event += 1;
        self.queue.push(Reverse((self.now.saturating_add(after), key)));
        self.events.insert(key, ev);
    }

    /// A message from `from` to `to`: its delay, or `None` when it is lost.
    fn send(&mut self, from: NodeId, to: NodeId) -> Option<u64> {
        let delay = self.rng.range(DELAY_MIN_NANOS, self.delay_max_nanos);
        let lost = self.rng.chance_ppm(self.loss_ppm);
        let cut = self.nodes[idx(from)].partitioned || self.nodes[idx(to)].partitioned;
        (!lost && !cut && self.nodes[idx(from)].alive).then_some(delay)
    }

    /// A lease message: lost only to a partition or a crash, unless the run has lossy leases
    /// (module docs: a lost lease makes a member suspect a live CM, which `node.rs` does not
    /// survive).
    fn send_lease(&mut self, from: NodeId, to: NodeId) -> Option<u64> {
        if self.lossy_leases {
            return self.send(from, to);
        }
        let delay = self.rng.range(DELAY_MIN_NANOS, self.delay_max_nanos);
        let cut = self.nodes[idx(from)].partitioned || self.nodes[idx(to)].partitioned;
        (!cut && self.nodes[idx(from)].alive).then_some(delay)
    }

    /// A message between `node` and etcd.
    fn send_etcd(&mut self, node: NodeId) -> Option<u64> {
        let delay = self.rng.range(DELAY_MIN_NANOS, self.delay_max_nanos);
        let lost = self.rng.chance_ppm(self.loss_ppm);
        (!lost && !self.nodes[idx(node)].partitioned).then_some(delay)
    }

    /// A member crashes or (`partitioned`) is cut off. A crash ends its transactions (their
    /// outcome stays unknown) and releases their locks.
    fn fail(&mut self, id: NodeId, partitioned: bool) {
        if self.trace {
            eprintln!("  member {id} {}", if partitioned { "partitioned" } else { "crashes" });
        }
        if partitioned {
            self.nodes[idx(id)].partitioned = true;
            return;
        }
        self.nodes[idx(id)].alive = false;
        let held: Vec<u64> = self
            .store
            .locks
            .iter()
            .filter(|&(_, &t)| self.txns[t].node == id)
            .map(|(&k, _)| k)
            .collect();
        for key in held {
            self.store.locks.remove(&key);
        }
    }

    /// A member adopts `next` (CONFIG-COMMIT, or the initiator after its round), as
    /// `NodeShared::adopt`: leases of members no longer there are dropped; with a new CM, the
    /// new lease partners are tracked with a grace of four lease periods (the first renewal
    /// ends it).
    fn adopt(&mut self, id: NodeId, next: &ClusterConfig, local: u64) {
        let grace = local + self.adopt_grace_nanos;
        let node = &mut self.nodes[idx(id)];
        if next.seq <= node.config.seq {
            return;
        }
        let cm_changed = next.cm != node.config.cm;
        if node.config.members.iter().any(|m| next.member(m.id).is_none()) {
            node.removed_at = Some(local);
        }
        node.config = next.clone();
        node.leases.retain(|&p, _| p != id && next.member(p).is_some());
        node.asked.retain(|&p, _| next.member(p).is_some());
        if cm_changed {
            node.asked.clear();
            node.quorum_seen = false;
            // `node.rs`: a new CM ends the wait of a member prepared for it.
            node.cm_change_acked = None;
            if next.cm == id {
                for m in next.non_cms() {
                    node.leases.entry(m.id).or_insert(SimLease::expect(grace, local));
                }
            } else {
                node.leases.retain(|&p, _| p == next.cm);
                node.leases.entry(next.cm).or_insert(SimLease::expect(grace, local));
            }
        }
    }
}

/// A local reading's lower end, in ns: lease bookkeeping's local monotonic time.
trait LocalReading {
    fn local_reading(&self) -> u64;
}

impl LocalReading for SimClock {
    fn local_reading(&self) -> u64 {
        use ordo_clock::Clock;
        self.local().now().lo().as_nanos()
    }
}

mod cluster;
pub mod data;

/// The seed indices `0..count` split over the test suite's two threads: `work` gets one
/// thread's share and its results come back in thread order (the simulations' seed runs).
#[cfg(test)]
pub(crate) fn on_two_threads<T: Send>(
    count: u64,
    work: impl Fn(std::iter::StepBy<std::ops::Range<u64>>) -> T + Sync,
) -> Vec<T> {
    const WORKERS: u64 = 2;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let work = &work;
                s.spawn(move || work((w..count).step_by(WORKERS as usize)))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a seed thread panicked")).collect()
    })
}
mod round;
mod workload;

pub use round::SimMembers;
use workload::{SimTxn, Store};

#[cfg(test)]
mod tests;
