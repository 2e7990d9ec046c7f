//! # ordo — the engine
//!
//! A heap of versioned objects and transactions over it that are strictly serializable and
//! opaque, ordered by the time of an [`ordo_clock::Clock`] (FaRMv2 Alg. 2 on one machine).
