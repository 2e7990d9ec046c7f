//! A private etcd member for tests, benchmarks and `ordo cluster up`.
//!
//! [`EtcdServer::start`] runs the `etcd` binary (Debian's `etcd-server`; `$ORDO_ETCD` overrides
//! the path) on free loopback ports with its data in a directory it is given, waits until it
//! answers, and stops it when dropped (or explicitly, or leaves it running with
//! [`EtcdServer::detach`]). Never a fixed port: two test binaries may run at once.

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

impl EtcdServer {
    /// Starts a single-member etcd with its data under `dir` (created if missing).
    pub fn start(dir: &Path) -> Result<Self, EtcdServerError> {
        let io = |source| EtcdServerError::Io { dir: dir.to_path_buf(), source };
        std::fs::create_dir_all(dir).map_err(io)?;
        let client_port = free_port().map_err(io)?;
        let peer_port = free_port().map_err(io)?;
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let binary = std::env::var("ORDO_ETCD").unwrap_or_else(|_| "etcd".to_string());
        let log = dir.join("etcd.log");
        let log_file = std::fs::File::create(&log).map_err(io)?;
        let log_err = log_file.try_clone().map_err(io)?;
        let mut command = Command::new(&binary);
        command
            .arg("--name")
            .arg("ordo")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen-client-urls")
            .arg(&client_url)
            .arg("--advertise-client-urls")
            .arg(&client_url)
            .arg("--listen-peer-urls")
            .arg(&peer_url)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer_url)
            .arg("--initial-cluster")
            .arg(format!("ordo={peer_url}"))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err);
        {
            use std::os::unix::process::CommandExt;
            // Its own process group: a terminal's ^C to `ordo cluster up` does not reach it.
            command.process_group(0);
        }
        let child = command.spawn().map_err(|source| EtcdServerError::Spawn { binary, source })?;
        let mut server = EtcdServer { child: Some(child), client_url, log };
        server.wait_ready(Duration::from_secs(20))?;
        Ok(server)
    }

    fn wait_ready(&mut self, limit: Duration) -> Result<(), EtcdServerError> {
        let started = Instant::now();
        let addr = self.client_url.trim_start_matches("http://").to_string();
        loop {
            let exited =
                matches!(self.child.as_mut().map(Child::try_wait), Some(Ok(Some(_)) | Err(_)));
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
