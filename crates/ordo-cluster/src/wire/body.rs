//! The message set: one list (the `messages!` invocation below) gives each message its tag,
//! its name and its fields; the macro derives the [`Body`] enum, the [`tag`] constants, and
//! each message's encoder and decoder from that one line, so the two cannot drift apart and
//! adding a message is adding a line. Fields are written in declaration order with the
//! encodings of [`super::codec`].
//!
//! # Tag space
//! * `0x00` is never a tag (a zeroed body is not a message).
//! * `0x01..=0x0f` are handshake messages ([`HANDSHAKE_TAG_MAX`]); they travel only in
//!   [`super::Kind::Handshake`] frames, and only handshake messages do.
//! * `0x10..=0x1f` are the Cluster I application messages.
//! * `0x20..=0x2f` are the Cluster II messages: the participant protocol (READ, LOCK,
//!   VALIDATE, COMMIT-BACKUP, COMMIT-PRIMARY, TRUNCATE, ABORT, slot reservation) and a
//!   client's configuration request, and a client's OAT report.
//! * `0x30..=0x3f` are the Cluster III messages: the reconfiguration round (NEW-CONFIG,
//!   NEW-CONFIG-ACK, CONFIG-COMMIT, ADVANCE), transaction recovery (RECOVER-QUERY,
//!   RECOVER-STATE, RECOVER-DECIDE) and re-replication (REPLICATE).
//!
//! A `const` block checks that tags are distinct and non-zero. Changing a tag or a field's
//! type or order changes the format: bump [`super::PROTOCOL_VERSION`] and the golden-bytes test.

use super::WireError;
use super::codec::{Field, Reader, Writer};

/// Tags up to this one are handshake messages.
pub const HANDSHAKE_TAG_MAX: u8 = 0x0f;

macro_rules! messages {
    (
        $(
            $(#[$meta:meta])*
            $tag_const:ident = $tag:literal => $name:ident
                $({ $( $(#[$fmeta:meta])* $field:ident : $ty:ty ),* $(,)? })? ,
        )*
    ) => {
        /// The tag byte of each message.
        pub mod tag {
            $(
                #[doc = concat!("Tag of [`Body::", stringify!($name), "`](super::Body::",
                    stringify!($name), ").")]
                pub const $tag_const: u8 = $tag;
            )*

            /// Every tag, in declaration order.
            pub const ALL: &[u8] = &[$($tag_const),*];

            /// The name of the message with tag `tag`, or `None` for an unknown tag.
            pub const fn name(tag: u8) -> Option<&'static str> {
                match tag {
                    $( $tag_const => Some(stringify!($name)), )*
                    _ => None,
                }
            }
        }

        /// A message body: what a frame carries after its header. Handshake messages come
        /// first; the rest are application messages. See the module docs for the tag space.
        #[derive(Clone, Debug, PartialEq)]
        pub enum Body {
            $(
                $(#[$meta])*
                $name $({ $( $(#[$fmeta])* $field: $ty ),* })?,
            )*
        }

        impl Body {
            /// The message's tag byte.
            pub const fn tag(&self) -> u8 {
                match self {
                    $( Body::$name { .. } => tag::$tag_const, )*
                }
            }

            /// The message's name, for errors and logs.
            pub const fn name(&self) -> &'static str {
                match self {
                    $( Body::$name { .. } => stringify!($name), )*
                }
            }

            /// Appends the message's fields (not its tag).
            pub(super) fn put_fields(&self, w: &mut Writer) -> Result<(), WireError> {
                match self {
                    $(
                        Body::$name $({ $($field),* })? => {
                            $($( Field::put($field, w, stringify!($field))?; )*)?
                        }
                    )*
                }
                Ok(())
            }

            /// Reads the fields of the message with tag `tag` (already read, at `tag_at`).
            pub(super) fn get_fields(
                tag: u8,
                tag_at: usize,
                r: &mut Reader<'_>,
            ) -> Result<Body, WireError> {
                match tag {
                    $(
                        tag::$tag_const => Ok(Body::$name $({ $(
                            $field: <$ty as Field>::get(r, stringify!($field))?,
                        )* })?),
                    )*
                    _ => Err(WireError::UnknownTag { tag, at: tag_at }),
                }
            }
        }
    };
}

messages! {
    // --- handshake (see `crate::auth` for the order and the proofs) ---

    /// Client → server, first: who the client is, which cluster it means, and its nonce.
    HELLO = 0x01 => Hello {
        /// The client's node id (0 for a tool such as `ordo cluster status`).
        node_id: u64,
        /// The cluster name the client belongs to.
        cluster: String,
        /// The client's fresh random nonce.
        nonce: [u8; 32],
    },
    /// Server → client: the server's id and nonce, and its proof of the shared secret.
    CHALLENGE = 0x02 => Challenge {
        /// The server's node id.
        node_id: u64,
        /// The server's fresh random nonce.
        nonce: [u8; 32],
        /// HMAC proving the server knows the secret (`crate::auth::server_proof`).
        proof: [u8; 32],
    },
    /// Client → server: the client's proof of the shared secret.
    AUTH = 0x03 => Auth {
        /// HMAC proving the client knows the secret (`crate::auth::client_proof`).
        proof: [u8; 32],
    },
    /// Server → client: the handshake succeeded.
    WELCOME = 0x04 => Welcome,
    /// Either side: the handshake failed; the sender closes the connection.
    REFUSED = 0x05 => Refused {
        /// Why, for the log of the other side (never secret material).
        reason: String,
    },

    // --- Cluster I application messages ---

    /// Liveness probe; answered by [`Body::Pong`] with the same payload.
    PING = 0x10 => Ping {
        /// Echoed back.
        payload: u64,
    },
    /// Answer to [`Body::Ping`].
    PONG = 0x11 => Pong {
        /// The ping's payload.
        payload: u64,
    },
    /// Asks the clock master for its time (FaRMv2 Fig. 2).
    CLOCK_SYNC_REQUEST = 0x12 => ClockSyncRequest,
    /// The clock master's time interval.
    CLOCK_SYNC_REPLY = 0x13 => ClockSyncReply {
        /// `(lo, hi)` in ns on the global timeline; `None` while the master's clock is
        /// disabled (during clock-master failover).
        master_time: Option<(u64, u64)>,
    },
    /// Lease handshake, step 1: asks for (or renews) a lease.
    LEASE_REQUEST = 0x14 => LeaseRequest {
        /// The configuration the requester is in.
        config_seq: u64,
        /// The lease length asked for.
        lease_ms: u32,
        /// The requester's oldest active timestamp (FaRMv2 Fig. 9, GC across nodes).
        oat: u64,
    },
    /// Lease handshake, step 2: grants the lease (and asks for the reverse one).
    LEASE_GRANT = 0x15 => LeaseGrant {
        /// The configuration the granter is in.
        config_seq: u64,
        /// The lease length granted.
        lease_ms: u32,
        /// The cluster's oldest active timestamp as the CM knows it: the bound of every
        /// member's GC safe point.
        gc: u64,
    },
    /// Lease handshake, step 3 (one-way): acknowledges the grant.
    LEASE_ACK = 0x16 => LeaseAck {
        /// The configuration acknowledged.
        config_seq: u64,
    },
    /// Asks a node for its status (`ordo cluster status`).
    STATUS_REQUEST = 0x17 => StatusRequest,
    /// A node's status.
    STATUS_REPLY = 0x18 => StatusReply {
        /// The node's id.
        node_id: u64,
        /// The configuration it is in.
        config_seq: u64,
        /// Its role (e.g. `"cm"`, `"member"`).
        role: String,
        /// Whether its synchronised clock is enabled.
        clock_enabled: bool,
        /// Named gauges and counters.
        metrics: Vec<(String, f64)>,
    },
    /// Reads an object's image: the network task's stand-in for a one-sided RDMA read.
    READ_OBJECT = 0x19 => ReadObject {
        /// The object's address.
        addr: u64,
    },
    /// An object's header word and data, as read by the network task.
    OBJECT_IMAGE = 0x1a => ObjectImage {
        /// The header word.
        header: u64,
        /// The object's length in bytes.
        len_bytes: u32,
        /// The data words.
        words: Vec<u64>,
    },
    /// Cluster II, READ: the newest version of an object at or below `rts`, served by the
    /// primary's network task (answered with `ObjectImage`).
    READ = 0x20 => Read {
        /// The object's address.
        addr: u64,
        /// The read timestamp.
        rts: u64,
        /// Bit 0: a locked head aborts the read; bit 1: old versions may be read.
        flags: u8,
    },
    /// Revalidation of an optimistic read (answered with `Done`).
    STILL_NEWEST = 0x21 => StillNewest {
        /// The object's address.
        addr: u64,
        /// The header word it was read at.
        header: u64,
        /// Its length when read.
        len_bytes: u32,
        /// The read timestamp.
        rts: u64,
    },
    /// Reserves a slot at a primary (answered with `Reserved`).
    RESERVE = 0x22 => Reserve {
        /// The object's length in bytes.
        len_bytes: u32,
    },
    /// A reserved slot and the version it holds.
    RESERVED = 0x23 => Reserved {
        /// The slot's address.
        addr: u64,
        /// The version (write timestamp) the slot holds.
        version: u64,
    },
    /// Gives back a reserved slot (answered with `Done`).
    RELEASE = 0x24 => Release {
        /// The slot's address.
        addr: u64,
    },
    /// LOCK one region's part of a transaction (answered with `Done` or `Declined`).
    LOCK = 0x25 => Lock {
        /// The attempt's number at its coordinator.
        tx: u64,
        /// The configuration the coordinator routes by: refused when older than the region's
        /// last change of replicas (re-replication's fence).
        seq: u64,
        /// The region.
        region: u16,
        /// Three words per entry (`ordo::remote::PartWire`).
        entries: Vec<u64>,
        /// The payload words.
        words: Vec<u64>,
    },
    /// VALIDATE reads owned by the receiver (answered with `Done` or `Declined`).
    VALIDATE = 0x26 => Validate {
        /// Three words per read: address, header word, length.
        reads: Vec<u64>,
    },
    /// COMMIT-BACKUP of one region's part to one of its backups (answered with `Done`).
    COMMIT_BACKUP = 0x27 => CommitBackup {
        /// The attempt's number at its coordinator.
        tx: u64,
        /// The region.
        region: u16,
        /// The write timestamp.
        wts: u64,
        /// Three words per entry (`ordo::remote::PartWire`).
        entries: Vec<u64>,
        /// The payload words.
        words: Vec<u64>,
        /// Truncations piggybacked: `(tx, region)` of earlier transactions.
        truncate: Vec<(u64, u16)>,
        /// Every region the transaction writes, ascending (recovery's vote needs them).
        regions: Vec<u16>,
    },
    /// COMMIT-PRIMARY of the part locked for `(tx, region)` (answered with `Done`).
    COMMIT_PRIMARY = 0x28 => CommitPrimary {
        /// The attempt's number at its coordinator.
        tx: u64,
        /// The region.
        region: u16,
        /// The write timestamp.
        wts: u64,
    },
    /// TRUNCATE (one-way): the backups may apply these transactions' parts.
    TRUNCATE = 0x29 => Truncate {
        /// `(tx, region)` of each transaction to apply.
        truncate: Vec<(u64, u16)>,
        /// `(tx, region)` of each transaction that aborted after its COMMIT-BACKUP: drop it.
        discard: Vec<(u64, u16)>,
    },
    /// ABORT one region's part (answered with `Done`).
    ABORT = 0x2a => Abort {
        /// The attempt's number at its coordinator.
        tx: u64,
        /// The region.
        region: u16,
        /// Slots reserved for the part's allocations (released if LOCK never got there).
        allocs: Vec<u64>,
    },
    /// The engine declined a request: an abort or a typed error (`ordo::remote::Refusal`).
    DECLINED = 0x2b => Declined {
        /// The error's code.
        code: u16,
        /// The address it concerns.
        addr: u64,
        /// Further fields.
        a: u64,
        /// Further fields.
        b: u64,
        /// The error as text.
        message: String,
    },
    /// Asks a node for the cluster configuration it is in (answered with `ConfigReply`).
    CONFIG_REQUEST = 0x2c => ConfigRequest,
    /// The configuration, as stored in etcd (JSON).
    CONFIG_REPLY = 0x2d => ConfigReply {
        /// The configuration document.
        json: String,
    },
    /// A request succeeded; `flag` carries a yes/no answer where one is asked.
    DONE = 0x2e => Done {
        /// The answer.
        flag: bool,
    },
    /// A client's oldest active timestamp, to the CM (one-way, periodic).
    OAT_REPORT = 0x2f => OatReport {
        /// The oldest read timestamp of the client's running transactions (else its `now().lo`).
        oat: u64,
    },
    /// NEW-CONFIG (FaRMv2 Fig. 6): the initiator of a reconfiguration asks a member of the
    /// next configuration to prepare for it (answered with `NewConfigAck`).
    NEW_CONFIG = 0x30 => NewConfig {
        /// The next configuration's sequence number.
        seq: u64,
        /// The next configuration, as stored in etcd (JSON).
        json: String,
    },
    /// NEW-CONFIG-ACK: the member is ready; `ff` is its fast-forward point (ns).
    NEW_CONFIG_ACK = 0x31 => NewConfigAck {
        /// The configuration acknowledged.
        seq: u64,
        /// The member's FF.
        ff: u64,
    },
    /// CONFIG-COMMIT: the member adopts configuration `seq` (answered with `Done`).
    CONFIG_COMMIT = 0x32 => ConfigCommit {
        /// The configuration to adopt.
        seq: u64,
    },
    /// ADVANCE: the new CM's fast-forward point (answered with `Done`, the ADVANCE-ACK).
    ADVANCE = 0x33 => Advance {
        /// The configuration.
        seq: u64,
        /// FF, in ns.
        ff: u64,
    },
    /// RECOVER-QUERY: the CM asks a survivor what it holds of the transactions of the removed
    /// coordinators (answered with `RecoverState`).
    RECOVER_QUERY = 0x34 => RecoverQuery {
        /// The configuration that removed them.
        seq: u64,
        /// The removed members.
        coordinators: Vec<u64>,
    },
    /// A survivor's records, locks and evidence about those coordinators' transactions
    /// (`ordo::remote::RecoveryState`, flattened; see `crate::recovery`).
    RECOVER_STATE = 0x35 => RecoverState {
        /// Per record: coordinator, tx, region, wts, then its regions' count and ids.
        records: Vec<u64>,
        /// Per locked part: coordinator, tx, region.
        locks: Vec<u64>,
        /// Per evidence entry: coordinator, tx, what (`ordo::remote::Seen::code`), wts.
        evidence: Vec<u64>,
    },
    /// RECOVER-DECIDE: the CM's decisions; the survivor installs or releases its locked parts
    /// and applies or drops its records (answered with `Done`).
    RECOVER_DECIDE = 0x36 => RecoverDecide {
        /// The configuration.
        seq: u64,
        /// Per decision: coordinator, tx, wts (0: abort).
        decisions: Vec<u64>,
    },
    /// REPLICATE: a primary copies objects of its region to a new backup (answered with
    /// `Done`); see `crate::rereplicate`.
    REPLICATE = 0x37 => Replicate {
        /// The region.
        region: u16,
        /// Per object: address, version, length in bytes, then its payload words.
        images: Vec<u64>,
    },
    /// A request could not be served.
    ERROR = 0x1f => Error {
        /// One of [`super::error_code`].
        code: u16,
        /// A human-readable explanation.
        message: String,
    },
}

const _: () = {
    let all = tag::ALL;
    let mut i = 0;
    while i < all.len() {
        assert!(all[i] != 0, "tag 0 is reserved");
        let mut j = i + 1;
        while j < all.len() {
            assert!(all[i] != all[j], "two messages share a tag");
            j += 1;
        }
        i += 1;
    }
};

/// Whether `tag` is a handshake message's.
pub const fn is_handshake_tag(tag: u8) -> bool {
    tag <= HANDSHAKE_TAG_MAX
}

impl Body {
    /// Whether this is a handshake message (travels only in `Handshake` frames).
    pub const fn is_handshake(&self) -> bool {
        is_handshake_tag(self.tag())
    }
}
