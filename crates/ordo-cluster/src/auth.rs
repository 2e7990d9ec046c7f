//! Mutual authentication: an HMAC-SHA256 challenge–response over a shared cluster secret.
//!
//! ```text
//! client → server  Hello     { client_id, cluster, Nc }
//! server → client  Challenge { server_id, Ns, Ps = HMAC(K, "ordo-v1 server" ‖ Nc ‖ Ns ‖ server_id ‖ client_id ‖ cluster) }
//! client → server  Auth      { Pc = HMAC(K, "ordo-v1 client" ‖ Ns ‖ Nc ‖ client_id ‖ server_id ‖ cluster) }
//! server → client  Welcome                   (or Refused { reason }, then close)
//! ```
//!
//! Ids are `u64` little-endian; `cluster` is the UTF-8 name, last, so the concatenation is
//! unambiguous (everything before it has a fixed length). Nonces are 32 bytes from
//! `rand::rng()` (a CSPRNG seeded from the OS). Both proofs are verified in constant time
//! (`Mac::verify_slice`).
//!
//! # Invariants
//! * **Order.** The server sends its proof only after the client's `Hello`, and the client
//!   sends its proof only after checking the server's: a client never proves anything to a
//!   server that has not proved knowledge of the secret first, and neither side's proof is
//!   useful to an attacker in the other role (distinct labels; each proof binds both nonces,
//!   both ids and the cluster, so it cannot be replayed into another connection or reflected).
//! * **Refusal is final.** A wrong cluster name, a wrong proof or any message out of order ends
//!   the handshake with an [`AuthError`]; the transport then sends `Refused { reason }` (a
//!   short reason, never secret material), logs it with the peer's address, and closes.
//! * **Node id 0** ([`TOOL_NODE_ID`]) is a tool (`ordo cluster status`), not a member; it
//!   authenticates the same way.
//! * **The secret never leaves memory**: [`Secret`]'s `Debug` prints its length only.
//!
//! The handshake here is pure (messages in, messages out); `crate::transport` runs it over a
//! socket under `Limits::handshake_timeout`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::Sha256;

use crate::wire::Body;

type HmacSha256 = Hmac<Sha256>;

/// The shortest accepted secret, in bytes.
pub const SECRET_BYTES_MIN: usize = 16;

/// The node id tools use; members have non-zero ids.
pub const TOOL_NODE_ID: u64 = 0;

/// Bytes of a nonce and of a proof.
pub const NONCE_BYTES: usize = 32;

/// A handshake nonce.
pub type Nonce = [u8; NONCE_BYTES];

/// An HMAC-SHA256 proof.
pub type Proof = [u8; 32];

const SERVER_LABEL: &[u8] = b"ordo-v1 server";
const CLIENT_LABEL: &[u8] = b"ordo-v1 client";
const _: () = assert!(SERVER_LABEL.len() == CLIENT_LABEL.len());

/// Why a handshake (or loading a secret) failed.
#[derive(thiserror::Error, Debug)]
pub enum AuthError {
    /// The secret is shorter than [`SECRET_BYTES_MIN`].
    #[error("the cluster secret is {len} bytes, fewer than the {min} required")]
    SecretTooShort {
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },
    /// The secret file could not be read.
    #[error("cannot read the cluster secret from {path:?}: {source}")]
    SecretFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: std::io::Error,
    },
    /// The client named another cluster.
    #[error("the client belongs to cluster {found:?}, not {expected:?}")]
    WrongCluster {
        /// Our cluster.
        expected: String,
        /// The client's.
        found: String,
    },
    /// The server's proof does not verify: it does not hold our secret (or the cluster
    /// name differs).
    #[error("node {server_id}'s proof does not verify (wrong secret or cluster name)")]
    BadServerProof {
        /// The id the server claimed.
        server_id: u64,
    },
    /// The client's proof does not verify: it does not hold our secret.
    #[error("node {client_id}'s proof does not verify (wrong secret)")]
    BadClientProof {
        /// The id the client claimed.
        client_id: u64,
    },
    /// A message out of order.
    #[error("expected {expected}, got {found}")]
    Unexpected {
        /// The message the handshake was waiting for.
        expected: &'static str,
        /// The one that came.
        found: &'static str,
    },
    /// The other side refused us.
    #[error("refused: {reason}")]
    Refused {
        /// Its reason.
        reason: String,
    },
}

impl AuthError {
    /// The reason to put in `Refused`: short, and nothing the other side may not learn.
    pub fn refusal_reason(&self) -> String {
        match self {
            AuthError::WrongCluster { .. } => "wrong cluster name".to_owned(),
            AuthError::BadClientProof { .. } => "client proof invalid (wrong secret?)".to_owned(),
            AuthError::BadServerProof { .. } => {
                "server proof invalid (wrong secret or cluster?)".to_owned()
            }
            AuthError::Unexpected { expected, found } => {
                format!("expected {expected}, got {found}")
            }
            AuthError::Refused { .. } => "refused".to_owned(),
            AuthError::SecretTooShort { .. } | AuthError::SecretFile { .. } => {
                "local configuration error".to_owned()
            }
        }
    }
}

/// The shared cluster secret. Cheap to clone; `Debug` prints only its length.
#[derive(Clone)]
pub struct Secret(Arc<[u8]>);

impl Secret {
    /// A secret from raw bytes.
    ///
    /// # Errors
    /// [`AuthError::SecretTooShort`] below [`SECRET_BYTES_MIN`] bytes.
    pub fn from_bytes(bytes: impl Into<Vec<u8>>) -> Result<Self, AuthError> {
        let bytes = bytes.into();
        if bytes.len() < SECRET_BYTES_MIN {
            return Err(AuthError::SecretTooShort { len: bytes.len(), min: SECRET_BYTES_MIN });
        }
        Ok(Self(bytes.into()))
    }

    /// The secret in a file: its bytes, less one trailing `\n` or `\r\n` (so that the output
    /// of `openssl rand -hex 32 > FILE` works as is). Warns if the file is readable by group or
    /// others.
    ///
    /// # Errors
    /// [`AuthError::SecretFile`] or [`AuthError::SecretTooShort`].
    pub fn from_file(path: &Path) -> Result<Self, AuthError> {
        let file_error = |source| AuthError::SecretFile { path: path.to_owned(), source };
        let mut bytes = std::fs::read(path).map_err(file_error)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(path).map_err(file_error)?.permissions().mode();
            if mode & 0o077 != 0 {
                tracing::warn!(path = %path.display(), mode = format!("{mode:o}"),
                    "the cluster secret file is readable by group or others");
            }
        }
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        Self::from_bytes(bytes)
    }

    /// Its length in bytes.
    pub fn len_bytes(&self) -> usize {
        self.0.len()
    }

    fn mac(&self) -> HmacSha256 {
        // HMAC takes keys of any length; `new_from_slice` cannot fail for it.
        HmacSha256::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts keys of every length"))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secret({} bytes, redacted)", self.0.len())
    }
}

/// A fresh random nonce.
pub fn new_nonce() -> Nonce {
    let mut nonce = [0u8; NONCE_BYTES];
    rand::rng().fill_bytes(&mut nonce);
    nonce
}

fn proof_mac(
    secret: &Secret,
    label: &[u8],
    first_nonce: &Nonce,
    second_nonce: &Nonce,
    first_id: u64,
    second_id: u64,
    cluster: &str,
) -> HmacSha256 {
    let mut mac = secret.mac();
    mac.update(label);
    mac.update(first_nonce);
    mac.update(second_nonce);
    mac.update(&first_id.to_le_bytes());
    mac.update(&second_id.to_le_bytes());
    mac.update(cluster.as_bytes());
    mac
}

/// The server's proof: `HMAC(K, "ordo-v1 server" ‖ Nc ‖ Ns ‖ server_id ‖ client_id ‖ cluster)`.
pub fn server_proof(
    secret: &Secret,
    client_nonce: &Nonce,
    server_nonce: &Nonce,
    server_id: u64,
    client_id: u64,
    cluster: &str,
) -> Proof {
    proof_mac(secret, SERVER_LABEL, client_nonce, server_nonce, server_id, client_id, cluster)
        .finalize()
        .into_bytes()
        .into()
}

/// The client's proof: `HMAC(K, "ordo-v1 client" ‖ Ns ‖ Nc ‖ client_id ‖ server_id ‖ cluster)`.
pub fn client_proof(
    secret: &Secret,
    server_nonce: &Nonce,
    client_nonce: &Nonce,
    client_id: u64,
    server_id: u64,
    cluster: &str,
) -> Proof {
    proof_mac(secret, CLIENT_LABEL, server_nonce, client_nonce, client_id, server_id, cluster)
        .finalize()
        .into_bytes()
        .into()
}

/// The client's side of the handshake, before the challenge.
#[derive(Debug)]
pub struct ClientHandshake {
    me: u64,
    cluster: String,
    secret: Secret,
    nonce: Nonce,
}

/// The client's side after it sent `Auth`: waiting for `Welcome`.
#[derive(Debug)]
pub struct ClientAwaitingWelcome {
    server_id: u64,
}

impl ClientHandshake {
    /// Starts a handshake as node `me` of `cluster`, drawing a nonce; returns the `Hello`
    /// to send.
    pub fn start(me: u64, cluster: &str, secret: Secret) -> (Self, Body) {
        let nonce = new_nonce();
        let hello = Body::Hello { node_id: me, cluster: cluster.to_owned(), nonce };
        (Self { me, cluster: cluster.to_owned(), secret, nonce }, hello)
    }

    /// Checks the server's `Challenge` and returns the `Auth` to send.
    ///
    /// # Errors
    /// [`AuthError::Refused`] if the server refused, [`AuthError::BadServerProof`] if its
    /// proof does not verify, [`AuthError::Unexpected`] for any other message.
    pub fn on_challenge(self, msg: Body) -> Result<(ClientAwaitingWelcome, Body), AuthError> {
        let (server_id, server_nonce, proof) = match msg {
            Body::Challenge { node_id, nonce, proof } => (node_id, nonce, proof),
            Body::Refused { reason } => return Err(AuthError::Refused { reason }),
            other => {
                return Err(AuthError::Unexpected { expected: "Challenge", found: other.name() });
            }
        };
        proof_mac(
            &self.secret,
            SERVER_LABEL,
            &self.nonce,
            &server_nonce,
            server_id,
            self.me,
            &self.cluster,
        )
        .verify_slice(&proof)
        .map_err(|_| AuthError::BadServerProof { server_id })?;
        let proof = client_proof(
            &self.secret,
            &server_nonce,
            &self.nonce,
            self.me,
            server_id,
            &self.cluster,
        );
        Ok((ClientAwaitingWelcome { server_id }, Body::Auth { proof }))
    }
}

impl ClientAwaitingWelcome {
    /// The server's answer to `Auth`; returns the server's node id.
    ///
    /// # Errors
    /// [`AuthError::Refused`] or [`AuthError::Unexpected`].
    pub fn on_outcome(self, msg: Body) -> Result<u64, AuthError> {
        match msg {
            Body::Welcome => Ok(self.server_id),
            Body::Refused { reason } => Err(AuthError::Refused { reason }),
            other => Err(AuthError::Unexpected { expected: "Welcome", found: other.name() }),
        }
    }
}

/// The server's side of the handshake: its identity and secret (one per server, shared by
/// every connection).
#[derive(Debug, Clone)]
pub struct ServerHandshake {
    me: u64,
    cluster: String,
    secret: Secret,
}

/// The server's side after it sent `Challenge`: waiting for `Auth`.
#[derive(Debug)]
pub struct ServerAwaitingAuth {
    client_id: u64,
    client_nonce: Nonce,
    server_nonce: Nonce,
}

impl ServerHandshake {
    /// The server side for node `me` of `cluster`.
    pub fn new(me: u64, cluster: &str, secret: Secret) -> Self {
        Self { me, cluster: cluster.to_owned(), secret }
    }

    /// Checks the client's `Hello` and returns the `Challenge` to send.
    ///
    /// # Errors
    /// [`AuthError::WrongCluster`], [`AuthError::Refused`] or [`AuthError::Unexpected`].
    pub fn on_hello(&self, msg: Body) -> Result<(ServerAwaitingAuth, Body), AuthError> {
        let (client_id, cluster, client_nonce) = match msg {
            Body::Hello { node_id, cluster, nonce } => (node_id, cluster, nonce),
            Body::Refused { reason } => return Err(AuthError::Refused { reason }),
            other => return Err(AuthError::Unexpected { expected: "Hello", found: other.name() }),
        };
        if cluster != self.cluster {
            return Err(AuthError::WrongCluster { expected: self.cluster.clone(), found: cluster });
        }
        let server_nonce = new_nonce();
        let proof = server_proof(
            &self.secret,
            &client_nonce,
            &server_nonce,
            self.me,
            client_id,
            &self.cluster,
        );
        let challenge = Body::Challenge { node_id: self.me, nonce: server_nonce, proof };
        Ok((ServerAwaitingAuth { client_id, client_nonce, server_nonce }, challenge))
    }

    /// Checks the client's `Auth`; returns the client's node id. The caller then sends
    /// `Welcome`.
    ///
    /// # Errors
    /// [`AuthError::BadClientProof`], [`AuthError::Refused`] (the client found our proof
    /// wrong) or [`AuthError::Unexpected`].
    pub fn on_auth(&self, state: ServerAwaitingAuth, msg: Body) -> Result<u64, AuthError> {
        let proof = match msg {
            Body::Auth { proof } => proof,
            Body::Refused { reason } => return Err(AuthError::Refused { reason }),
            other => return Err(AuthError::Unexpected { expected: "Auth", found: other.name() }),
        };
        let ServerAwaitingAuth { client_id, client_nonce, server_nonce } = state;
        proof_mac(
            &self.secret,
            CLIENT_LABEL,
            &server_nonce,
            &client_nonce,
            client_id,
            self.me,
            &self.cluster,
        )
        .verify_slice(&proof)
        .map_err(|_| AuthError::BadClientProof { client_id })?;
        Ok(client_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(b: u8) -> Secret {
        Secret::from_bytes(vec![b; 32]).unwrap()
    }

    fn run(
        client_secret: Secret,
        server_secret: Secret,
        client_cluster: &str,
    ) -> Result<(u64, u64), AuthError> {
        let server = ServerHandshake::new(7, "c", server_secret);
        let (client, hello) = ClientHandshake::start(3, client_cluster, client_secret);
        let (pending, challenge) = server.on_hello(hello)?;
        let (client, auth) = client.on_challenge(challenge)?;
        let client_id = server.on_auth(pending, auth)?;
        let server_id = client.on_outcome(Body::Welcome)?;
        Ok((client_id, server_id))
    }

    #[test]
    fn matching_secrets_authenticate_both_ways() {
        assert_eq!(run(secret(1), secret(1), "c").unwrap(), (3, 7));
    }

    #[test]
    fn a_wrong_secret_fails_on_either_side() {
        // The server's proof is checked first, so the client detects the mismatch.
        assert!(matches!(
            run(secret(1), secret(2), "c"),
            Err(AuthError::BadServerProof { server_id: 7 })
        ));
    }

    #[test]
    fn a_client_without_the_secret_is_caught_by_the_server() {
        let server = ServerHandshake::new(7, "c", secret(1));
        let (_client, hello) = ClientHandshake::start(3, "c", secret(2));
        let (pending, _challenge) = server.on_hello(hello).unwrap();
        let forged = Body::Auth { proof: [0; 32] };
        assert!(matches!(
            server.on_auth(pending, forged),
            Err(AuthError::BadClientProof { client_id: 3 })
        ));
    }

    #[test]
    fn the_server_proof_is_not_a_client_proof() {
        let k = secret(1);
        let (a, b) = ([1; 32], [2; 32]);
        assert_ne!(server_proof(&k, &a, &b, 1, 2, "c"), client_proof(&k, &a, &b, 1, 2, "c"));
    }

    #[test]
    fn wrong_cluster_is_refused() {
        assert!(matches!(run(secret(1), secret(1), "other"), Err(AuthError::WrongCluster { .. })));
    }

    #[test]
    fn short_secrets_are_rejected_and_debug_hides_the_bytes() {
        assert!(matches!(
            Secret::from_bytes(vec![1; 15]),
            Err(AuthError::SecretTooShort { len: 15, .. })
        ));
        let s = Secret::from_bytes(b"correct horse battery staple".to_vec()).unwrap();
        let shown = format!("{s:?}");
        assert!(!shown.contains("horse"), "{shown}");
        assert!(shown.contains("28 bytes"), "{shown}");
    }

    #[test]
    fn secret_files_lose_one_trailing_newline() {
        let dir = std::env::temp_dir().join(format!("ordo-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("secret");
        std::fs::write(&path, b"0123456789abcdef0123\r\n").unwrap();
        assert_eq!(Secret::from_file(&path).unwrap().len_bytes(), 20);
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(Secret::from_file(&path), Err(AuthError::SecretFile { .. })));
    }
}
