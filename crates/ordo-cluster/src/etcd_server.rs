//! Private etcd members for tests, benchmarks and `ordo cluster up`.
//!
//! [`EtcdServer::start`] runs the `etcd` binary (Debian's `etcd-server`; `$ORDO_ETCD` overrides
//! the path) on free loopback ports with its data in a directory it is given, waits until it
//! answers, and stops it when dropped (or explicitly, or leaves it running with
//! [`EtcdServer::detach`]). Never a fixed port: two test binaries may run at once.
//!
//! [`EtcdCluster::start`] runs `members` such processes as one etcd cluster on loopback (the
//! other side of `ordo bench etcd-compare`, and tests of etcd losing a member). Each member gets
//! its own client and peer port, its data under `dir/member-<i>/`, and the same
//! `--initial-cluster` (naming every member), `--initial-cluster-state new` and a per-cluster
//! `--initial-cluster-token`, so that two clusters started side by side can never join each
//! other. `start` returns once every member's `/health` says `true`, which etcd 3.4 answers only
//! with a leader elected and a quorum read through it: the cluster is serving. Dropping the
//! handle kills every member; [`EtcdCluster::stop_member`] kills one (a crash).
//!
//! # Ports
//! The ports of one start are all reserved at once (every listener held until the last is
//! bound), so they are distinct; another process may still take one between our release and
//! etcd's bind. Such a start is seen in the member's log (`address already in use`) and retried
//! with fresh ports, at most [`START_ATTEMPTS_MAX`] times.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What went wrong starting etcd.
#[derive(Debug, thiserror::Error)]
pub enum EtcdServerError {
    /// The binary could not be started.
    #[error(
        "cannot start etcd ({binary}): {source}; install it with `apt-get install -y etcd-server` \
         or set ORDO_ETCD to its path"
    )]
    Spawn {
        /// The binary tried.
        binary: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// It exited or did not answer in time.
    #[error("etcd did not become ready within {waited_ms} ms (log: {log})")]
    NotReady {
        /// How long we waited.
        waited_ms: u64,
        /// Its log file.
        log: PathBuf,
    },
    /// A cluster size etcd does not support.
    #[error("an etcd cluster has 1 to {MEMBERS_MAX} members, not {members}")]
    Members {
        /// The size asked for.
        members: usize,
    },
    /// An I/O error preparing its directory or ports.
    #[error("preparing etcd in {dir}: {source}")]
    Io {
        /// The directory.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// A running etcd member.
pub struct EtcdServer {
    child: Option<Child>,
    client_url: String,
    log: PathBuf,
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// How many times [`EtcdCluster::start`] picks fresh ports after losing one to another process.
pub const START_ATTEMPTS_MAX: usize = 3;

/// How long a start waits for every member to report healthy.
const READY_LIMIT: Duration = Duration::from_secs(20);

/// How many members [`EtcdCluster::start`] accepts (etcd advises at most 7 voting members).
pub const MEMBERS_MAX: usize = 7;

/// `n` distinct loopback ports, free a moment ago (every listener is held until all are bound).
fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()?;
    listeners.iter().map(|l| Ok(l.local_addr()?.port())).collect()
}

/// What one member process is started with.
struct MemberSpec<'a> {
    name: &'a str,
    dir: &'a Path,
    client_url: &'a str,
    peer_url: &'a str,
    initial_cluster: &'a str,
    /// `--initial-cluster-token`; `None` leaves etcd's default (the single-member server).
    token: Option<&'a str>,
}

impl EtcdServer {
    /// Spawns one member (its directory created, its log at `dir/etcd.log`) without waiting.
    fn spawn(spec: &MemberSpec<'_>) -> Result<Self, EtcdServerError> {
        let dir = spec.dir;
        let io = |source| EtcdServerError::Io { dir: dir.to_path_buf(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        let binary = std::env::var("ORDO_ETCD").unwrap_or_else(|_| "etcd".to_string());
        let log = dir.join("etcd.log");
        let log_file = std::fs::File::create(&log).map_err(io)?;
        let log_err = log_file.try_clone().map_err(io)?;
        let mut command = Command::new(&binary);
        command
            .arg("--name")
            .arg(spec.name)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen-client-urls")
            .arg(spec.client_url)
            .arg("--advertise-client-urls")
            .arg(spec.client_url)
            .arg("--listen-peer-urls")
            .arg(spec.peer_url)
            .arg("--initial-advertise-peer-urls")
            .arg(spec.peer_url)
            .arg("--initial-cluster")
            .arg(spec.initial_cluster);
        if let Some(token) = spec.token {
            command
                .arg("--initial-cluster-state")
                .arg("new")
                .arg("--initial-cluster-token")
                .arg(token);
        }
        command.stdin(Stdio::null()).stdout(log_file).stderr(log_err);
        {
            use std::os::unix::process::CommandExt;
            // Its own process group: a terminal's ^C to `ordo cluster up` does not reach it.
            command.process_group(0);
        }
        let child = command.spawn().map_err(|source| EtcdServerError::Spawn { binary, source })?;
        Ok(EtcdServer { child: Some(child), client_url: spec.client_url.to_string(), log })
    }

    /// Starts a single-member etcd with its data under `dir` (created if missing).
    pub fn start(dir: &Path) -> Result<Self, EtcdServerError> {
        let io = |source| EtcdServerError::Io { dir: dir.to_path_buf(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        let client_port = free_port().map_err(io)?;
        let peer_port = free_port().map_err(io)?;
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let mut server = EtcdServer::spawn(&MemberSpec {
            name: "ordo",
            dir,
            client_url: &client_url,
            peer_url: &peer_url,
            initial_cluster: &format!("ordo={peer_url}"),
            token: None,
        })?;
        server.wait_ready(READY_LIMIT)?;
        Ok(server)
    }

    /// Whether the process has exited (or cannot be asked); `true` once stopped.
    fn exited(&mut self) -> bool {
        match self.child.as_mut() {
            None => true,
            Some(child) => matches!(child.try_wait(), Ok(Some(_)) | Err(_)),
        }
    }

    /// `host:port` of the client endpoint.
    fn client_addr(&self) -> &str {
        self.client_url.trim_start_matches("http://")
    }

    /// Whether its log shows it lost a port to another process.
    fn lost_port(&self) -> bool {
        std::fs::read_to_string(&self.log).is_ok_and(|t| t.contains("address already in use"))
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), EtcdServerError> {
        let started = Instant::now();
        let addr = self.client_addr().to_string();
        loop {
            let exited = self.exited();
            if !exited && health(&addr) {
                return Ok(());
            }
            if exited || started.elapsed() > limit {
                self.stop();
                return Err(EtcdServerError::NotReady {
                    waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    log: self.log.clone(),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The client endpoint (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> &str {
        &self.client_url
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills it (SIGKILL) and waits for it: a crash, as tests of "etcd lost" need.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Leaves it running after this handle is dropped (for `ordo cluster up`).
    pub fn detach(mut self) -> Option<u32> {
        self.child.take().map(|c| c.id())
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A running etcd cluster of several members on loopback (module docs).
pub struct EtcdCluster {
    members: Vec<EtcdServer>,
    dir: PathBuf,
}

/// Distinguishes the `--initial-cluster-token` of clusters started by one process.
static CLUSTER_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl EtcdCluster {
    /// Starts `members` members (1 to [`MEMBERS_MAX`]) with their data under `dir/member-<i>/`
    /// and waits until every one reports healthy (a leader is elected). A cluster always starts
    /// new: a `member-<i>/` already in `dir` is removed first.
    ///
    /// # Errors
    /// [`EtcdServerError::Members`] for a size outside 1 to [`MEMBERS_MAX`],
    /// [`EtcdServerError::Spawn`] when the binary is missing, [`EtcdServerError::NotReady`] when
    /// a member exits or the cluster is not healthy within 20 s (naming the first unhealthy
    /// member's log), [`EtcdServerError::Io`] for its directories and ports. Members already
    /// started are killed before an error is returned.
    pub fn start(dir: &Path, members: usize) -> Result<Self, EtcdServerError> {
        if !(1..=MEMBERS_MAX).contains(&members) {
            return Err(EtcdServerError::Members { members });
        }
        let mut attempt = 1;
        loop {
            let mut cluster =
                EtcdCluster { members: Vec::with_capacity(members), dir: dir.to_path_buf() };
            match cluster.start_once(dir, members, attempt) {
                Ok(()) => return Ok(cluster),
                Err(e) => {
                    let lost_port = cluster.members.iter().any(EtcdServer::lost_port);
                    if !(lost_port && attempt < START_ATTEMPTS_MAX) {
                        return Err(e);
                    }
                    attempt += 1;
                }
            }
        }
    }

    /// One start with fresh ports into `self.members` (empty on entry); on error every member
    /// started is killed, and left in `self.members` so that its log can be read.
    fn start_once(
        &mut self,
        dir: &Path,
        members: usize,
        attempt: usize,
    ) -> Result<(), EtcdServerError> {
        let io = |source| EtcdServerError::Io { dir: dir.to_path_buf(), source };
        let ports = free_ports(2 * members).map_err(io)?;
        let (client_ports, peer_ports) = ports.split_at(members);
        let names: Vec<String> = (0..members).map(|i| format!("member-{i}")).collect();
        let peer_urls: Vec<String> =
            peer_ports.iter().map(|p| format!("http://127.0.0.1:{p}")).collect();
        let initial_cluster = names
            .iter()
            .zip(&peer_urls)
            .map(|(name, url)| format!("{name}={url}"))
            .collect::<Vec<_>>()
            .join(",");
        let serial = CLUSTER_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let token = format!("ordo-{}-{serial}-{attempt}", std::process::id());
        for (i, name) in names.iter().enumerate() {
            let member_dir = dir.join(name);
            // A previous attempt's data would carry the old ports and token: start clean.
            if member_dir.exists() {
                std::fs::remove_dir_all(&member_dir).map_err(io)?;
            }
            let spawned = EtcdServer::spawn(&MemberSpec {
                name,
                dir: &member_dir,
                client_url: &format!("http://127.0.0.1:{}", client_ports[i]),
                peer_url: &peer_urls[i],
                initial_cluster: &initial_cluster,
                token: Some(&token),
            });
            match spawned {
                Ok(member) => self.members.push(member),
                Err(e) => {
                    self.stop_all();
                    return Err(e);
                }
            }
        }
        self.wait_ready(READY_LIMIT)
    }

    /// Polls every member's `/health` until all say `true`; kills them all on failure.
    fn wait_ready(&mut self, limit: Duration) -> Result<(), EtcdServerError> {
        let started = Instant::now();
        loop {
            let mut first_down = None;
            for (i, member) in self.members.iter_mut().enumerate() {
                if member.exited() {
                    first_down = Some((i, true));
                    break;
                }
                if first_down.is_none() && !health(member.client_addr()) {
                    first_down = Some((i, false));
                }
            }
            let Some((i, exited)) = first_down else { return Ok(()) };
            if exited || started.elapsed() > limit {
                let log = self.members[i].log.clone();
                self.stop_all();
                return Err(EtcdServerError::NotReady {
                    waited_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    log,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The client endpoints (`http://127.0.0.1:PORT`), one per member in member order, stopped
    /// members included.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// The directory holding the members' data and logs (`member-<i>/`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The members, in order.
    pub fn members(&self) -> &[EtcdServer] {
        &self.members
    }

    /// Kills member `i` (SIGKILL, a crash) and waits for it; nothing when `i` is out of range
    /// or already stopped. The others go on: with a majority left the cluster keeps serving.
    pub fn stop_member(&mut self, i: usize) {
        if let Some(member) = self.members.get_mut(i) {
            member.stop();
        }
    }

    /// Kills every member.
    fn stop_all(&mut self) {
        for member in &mut self.members {
            member.stop();
        }
    }
}

/// Whether etcd's `/health` endpoint at `addr` says it is healthy (plain HTTP/1.0 over TCP).
pub fn health(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(sock) = addr.parse::<std::net::SocketAddr>() else { return false };
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&sock, Duration::from_millis(200))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"GET /health HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut reply = Vec::new();
    let _ = stream.take(4096).read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply);
    text.starts_with("HTTP/1.") && text.contains("200") && text.contains("\"health\":\"true\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_reserved_together_are_distinct() {
        let mut ports = free_ports(2 * MEMBERS_MAX).unwrap();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 2 * MEMBERS_MAX);
    }

    #[test]
    fn a_cluster_of_no_members_or_too_many_is_refused_before_anything_starts() {
        let dir = std::env::temp_dir().join(format!("ordo-etcd-members-{}", std::process::id()));
        for members in [0, MEMBERS_MAX + 1] {
            let err = EtcdCluster::start(&dir, members).err().unwrap();
            assert!(matches!(err, EtcdServerError::Members { members: m } if m == members));
        }
        assert!(!dir.exists());
    }
}
