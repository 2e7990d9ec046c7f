//! The transport on loopback (port 0 only): calls and one-way messages, authentication
//! failures in both directions, hostile and broken connections (each closed, the server
//! serving on), timeouts, a vanishing peer, back-pressure, server shutdown and the pool.
//!
//! Raw `TcpStream`s play the misbehaving side: [`raw_authenticated`] does a correct client
//! handshake by hand and [`raw_accept_authenticated`] a correct server one, so a test can
//! then misbehave at will. A process-wide allocator records the largest single allocation, to
//! show that a large declared frame is never allocated up front: tests here keep every
//! allocation under [`ALLOCATION_BYTES_LIMIT`].
#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ordo_cluster::auth::{AuthError, ClientHandshake, Secret, ServerHandshake, client_proof};
use ordo_cluster::transport::{
    Handler, Limits, Peer, PeerPool, PolledPeer, Server, TransportError,
};
use ordo_cluster::wire::{Body, Kind, Message, error_code};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

// ---------------------------------------------------------------------------------------------
// Largest allocation

/// No test in this binary allocates this much at once; a frame buffer sized by a declared
/// length would.
const ALLOCATION_BYTES_LIMIT: usize = 4 << 20;

#[global_allocator]
static ALLOCATOR: ordo_testalloc::Largest = ordo_testalloc::Largest;

// ---------------------------------------------------------------------------------------------
// Fixtures

const CLUSTER: &str = "test-cluster";
const SERVER_ID: u64 = 1;
const CLIENT_ID: u64 = 2;
/// `Ping` with this payload makes [`TestHandler`] sleep for [`SLOW`].
const SLOW_PAYLOAD: u64 = 0x510;
const SLOW: Duration = Duration::from_millis(300);
/// How long a test waits for something that should happen at once.
const PROMPTLY: Duration = Duration::from_secs(2);

fn secret() -> Secret {
    Secret::from_bytes(*b"0123456789abcdef0123456789abcdef").unwrap()
}

fn wrong_secret() -> Secret {
    Secret::from_bytes(*b"fedcba9876543210fedcba9876543210").unwrap()
}

fn limits() -> Limits {
    Limits {
        call_timeout: PROMPTLY,
        handshake_timeout: Duration::from_millis(500),
        ..Limits::default()
    }
}

fn localhost() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// Answers `Ping` with `Pong`, `StatusRequest` with a status; records one-way messages.
#[derive(Default)]
struct TestHandler {
    one_way: Mutex<Vec<(u64, Body)>>,
}

impl Handler for TestHandler {
    fn request(&self, from: u64, body: Body) -> Body {
        match body {
            Body::Ping { payload } => {
                if payload == SLOW_PAYLOAD {
                    // Blocks the connection's task, as a misbehaving handler would.
                    std::thread::sleep(SLOW);
                }
                Body::Pong { payload }
            }
            Body::StatusRequest => Body::StatusReply {
                node_id: SERVER_ID,
                config_seq: from,
                role: "member".into(),
                clock_enabled: true,
                metrics: vec![("calls".into(), 1.0)],
            },
            other => Body::Error {
                code: error_code::UNSUPPORTED,
                message: format!("{} is not served", other.name()),
            },
        }
    }

    fn one_way(&self, from: u64, body: Body) {
        self.one_way.lock().unwrap().push((from, body));
    }
}

async fn server_with(limits: Limits, secret: Secret) -> (Server, Arc<TestHandler>) {
    let handler = Arc::new(TestHandler::default());
    let server = Server::bind(localhost(), SERVER_ID, CLUSTER, secret, limits, handler.clone())
        .await
        .unwrap();
    (server, handler)
}

async fn start_server() -> (Server, Arc<TestHandler>) {
    server_with(limits(), secret()).await
}

async fn connect(addr: SocketAddr) -> Result<Peer, TransportError> {
    Peer::connect(addr, CLIENT_ID, CLUSTER, secret(), limits()).await
}

/// Checks that the server still authenticates and serves a new client.
async fn assert_serves(server: &Server) {
    let peer = connect(server.local_addr()).await.unwrap();
    assert_eq!(peer.call(Body::Ping { payload: 11 }).await.unwrap(), Body::Pong { payload: 11 });
}

async fn write_message(s: &mut TcpStream, msg: Message) {
    s.write_all(&msg.encode_frame(u32::MAX).unwrap()).await.unwrap();
}

async fn read_message(s: &mut TcpStream) -> Message {
    let mut prefix = [0u8; 4];
    s.read_exact(&mut prefix).await.unwrap();
    let mut body = vec![0u8; usize::try_from(u32::from_le_bytes(prefix)).unwrap()];
    s.read_exact(&mut body).await.unwrap();
    Message::decode_body(&body).unwrap()
}

/// Reads until the server closes the connection (EOF or reset), returning what came first.
async fn read_until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let closing = async {
        let mut buf = [0u8; 1024];
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    tokio::time::timeout(PROMPTLY, closing).await.expect("the server did not close");
    got
}

/// A raw connection that has passed the handshake correctly, as node 5.
async fn raw_authenticated(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let (hs, hello) = ClientHandshake::start(5, CLUSTER, secret());
    write_message(&mut s, Message::handshake(hello)).await;
    let challenge = read_message(&mut s).await.body;
    let (hs, auth) = hs.on_challenge(challenge).unwrap();
    write_message(&mut s, Message::handshake(auth)).await;
    assert_eq!(hs.on_outcome(read_message(&mut s).await.body).unwrap(), SERVER_ID);
    s
}

/// Accepts one connection and passes the server's side of the handshake correctly.
async fn raw_accept_authenticated(listener: &TcpListener, me: u64) -> TcpStream {
    let (mut s, _) = listener.accept().await.unwrap();
    let hs = ServerHandshake::new(me, CLUSTER, secret());
    let (pending, challenge) = hs.on_hello(read_message(&mut s).await.body).unwrap();
    write_message(&mut s, Message::handshake(challenge)).await;
    hs.on_auth(pending, read_message(&mut s).await.body).unwrap();
    write_message(&mut s, Message::handshake(Body::Welcome)).await;
    s
}

/// Waits (briefly) until `f` holds.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < PROMPTLY, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Calls

#[tokio::test]
async fn ping_pong_status_and_one_way() {
    let (server, handler) = start_server().await;
    let peer = connect(server.local_addr()).await.unwrap();
    assert_eq!(peer.remote_id(), SERVER_ID);
    assert_eq!(peer.remote_addr(), server.local_addr());
    assert_eq!(peer.call(Body::Ping { payload: 7 }).await.unwrap(), Body::Pong { payload: 7 });
    let status = peer.call(Body::StatusRequest).await.unwrap();
    assert!(matches!(status, Body::StatusReply { config_seq: CLIENT_ID, .. }), "{status:?}");
    let unsupported = peer.call(Body::ReadObject { addr: 1 }).await.unwrap();
    assert!(matches!(unsupported, Body::Error { code: error_code::UNSUPPORTED, .. }));

    peer.send(Body::LeaseAck { config_seq: 3 }).await.unwrap();
    eventually("the one-way message arrived", || !handler.one_way.lock().unwrap().is_empty()).await;
    assert_eq!(handler.one_way.lock().unwrap()[0], (CLIENT_ID, Body::LeaseAck { config_seq: 3 }));

    // A tool (node 0) authenticates the same way.
    let tool = Peer::connect(server.local_addr(), 0, CLUSTER, secret(), limits()).await.unwrap();
    let status = tool.call(Body::StatusRequest).await.unwrap();
    assert!(matches!(status, Body::StatusReply { config_seq: 0, .. }));

    assert_eq!(peer.calls_in_flight(), 0);
    let stats = server.stats();
    assert_eq!((stats.handshakes_ok, stats.handshakes_failed, stats.connections_open), (2, 0, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_concurrent_calls_each_get_their_own_answer() {
    let (server, _) = start_server().await;
    // Few permits and a short queue, so callers wait on both.
    let tight = Limits { in_flight_max: 8, queue_depth: 4, ..limits() };
    let peer =
        Peer::connect(server.local_addr(), CLIENT_ID, CLUSTER, secret(), tight).await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..40u64 {
        let peer = peer.clone();
        tasks.spawn(async move {
            for i in 0..50u64 {
                let payload = task * 1000 + i;
                let answer = peer.call(Body::Ping { payload }).await.unwrap();
                assert_eq!(answer, Body::Pong { payload });
            }
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    assert_eq!(peer.calls_in_flight(), 0);
}

// ---------------------------------------------------------------------------------------------
// Authentication

#[tokio::test]
async fn client_with_wrong_secret_is_refused_and_server_keeps_serving() {
    let (server, _) = start_server().await;
    let addr = server.local_addr();
    // A well-behaved client checks the server's proof first, so it is the one to notice.
    let got = Peer::connect(addr, CLIENT_ID, CLUSTER, wrong_secret(), limits()).await;
    assert!(
        matches!(got, Err(TransportError::Auth { source: AuthError::BadServerProof { .. }, .. })),
        "{got:?}"
    );
    eventually("the server counted the failure", || server.stats().handshakes_failed == 1).await;

    // A client that skips that check and proves with the wrong secret is refused by the server.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let client_nonce = [4; 32];
    let hello = Body::Hello { node_id: CLIENT_ID, cluster: CLUSTER.into(), nonce: client_nonce };
    write_message(&mut s, Message::handshake(hello)).await;
    let Body::Challenge { node_id, nonce, .. } = read_message(&mut s).await.body else {
        panic!("expected a challenge")
    };
    let proof = client_proof(&wrong_secret(), &nonce, &client_nonce, CLIENT_ID, node_id, CLUSTER);
    write_message(&mut s, Message::handshake(Body::Auth { proof })).await;
    let refused = read_message(&mut s).await;
    assert!(
        matches!(&refused.body, Body::Refused { reason } if reason.contains("client proof")),
        "{refused:?}"
    );
    assert!(read_until_closed(&mut s).await.is_empty());
    assert_eq!(server.stats().handshakes_failed, 2);

    assert_serves(&server).await;
}

#[tokio::test]
async fn server_with_wrong_secret_is_detected_by_the_client() {
    let (server, _) = server_with(limits(), wrong_secret()).await;
    let got = connect(server.local_addr()).await;
    assert!(
        matches!(
            got,
            Err(TransportError::Auth {
                source: AuthError::BadServerProof { server_id: SERVER_ID },
                ..
            })
        ),
        "{got:?}"
    );
    // It still serves clients that hold its secret.
    let peer = Peer::connect(server.local_addr(), CLIENT_ID, CLUSTER, wrong_secret(), limits())
        .await
        .unwrap();
    assert_eq!(peer.call(Body::Ping { payload: 1 }).await.unwrap(), Body::Pong { payload: 1 });
}

#[tokio::test]
async fn wrong_cluster_name_is_refused() {
    let (server, _) = start_server().await;
    let got = Peer::connect(server.local_addr(), CLIENT_ID, "other", secret(), limits()).await;
    assert!(
        matches!(&got, Err(TransportError::Refused { reason, .. }) if reason == "wrong cluster name"),
        "{got:?}"
    );
    assert_eq!(server.stats().handshakes_failed, 1);
    assert_serves(&server).await;
}

#[tokio::test]
async fn application_frame_before_the_handshake_is_refused() {
    let (server, _) = start_server().await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    write_message(&mut s, Message::new(Kind::Request, 1, Body::Ping { payload: 1 })).await;
    let refused = read_message(&mut s).await;
    assert_eq!(refused.kind, Kind::Handshake);
    assert!(
        matches!(&refused.body, Body::Refused { reason } if reason.contains("expected Hello")),
        "{refused:?}"
    );
    assert!(read_until_closed(&mut s).await.is_empty());
    assert_eq!(server.stats().handshakes_failed, 1);
    assert_serves(&server).await;
}

#[tokio::test]
async fn handshake_times_out_on_either_side() {
    let quick = Limits { handshake_timeout: Duration::from_millis(100), ..limits() };
    // A listener that accepts and never answers.
    let silent = TcpListener::bind(localhost()).await.unwrap();
    let addr = silent.local_addr().unwrap();
    let got = Peer::connect(addr, CLIENT_ID, CLUSTER, secret(), quick).await;
    assert!(matches!(got, Err(TransportError::HandshakeTimeout { after_ms: 100, .. })), "{got:?}");

    // A client that connects and never speaks.
    let (server, _) = server_with(quick, secret()).await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    assert!(read_until_closed(&mut s).await.is_empty());
    assert_eq!(server.stats().handshakes_failed, 1);
    drop(silent);
}

// ---------------------------------------------------------------------------------------------
// Hostile and broken connections

#[tokio::test]
async fn garbage_bytes_close_only_that_connection() {
    let (server, _) = start_server().await;
    let before = connect(server.local_addr()).await.unwrap();

    // "GET " read as a length is far above the pre-authentication frame limit.
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: ordo\r\n\r\n").await.unwrap();
    read_until_closed(&mut s).await;

    // A small frame whose body is not a message (bad version).
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    s.write_all(&[5, 0, 0, 0, 9, 9, 9, 9, 9]).await.unwrap();
    let reply = read_until_closed(&mut s).await;
    let (refused, _) = Message::decode_frame(&reply, u32::MAX).unwrap();
    assert!(matches!(&refused.body, Body::Refused { reason } if reason.contains("version")));

    // After authentication: a frame that decodes to nothing.
    let mut s = raw_authenticated(server.local_addr()).await;
    s.write_all(&[3, 0, 0, 0, 1, 2, 3]).await.unwrap();
    read_until_closed(&mut s).await;

    let stats = server.stats();
    assert_eq!((stats.handshakes_failed, stats.connections_failed), (2, 1));
    assert_eq!(before.call(Body::Ping { payload: 3 }).await.unwrap(), Body::Pong { payload: 3 });
    assert_serves(&server).await;
}

#[tokio::test]
async fn declared_4gib_frame_is_closed_without_allocating() {
    // Before authentication, and after it with the default limit: refused on the prefix.
    let (server, _) = start_server().await;
    let mut s = TcpStream::connect(server.local_addr()).await.unwrap();
    s.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
    read_until_closed(&mut s).await;
    let mut s = raw_authenticated(server.local_addr()).await;
    s.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
    read_until_closed(&mut s).await;
    let stats = server.stats();
    assert_eq!((stats.handshakes_failed, stats.connections_failed), (1, 1));

    // With no limit at all, the body buffer still grows only with the bytes that arrive.
    let unlimited = Limits { frame_bytes_max: u32::MAX, ..limits() };
    let (open, _) = server_with(unlimited, secret()).await;
    let mut s = raw_authenticated(open.local_addr()).await;
    s.write_all(&u32::MAX.to_le_bytes()).await.unwrap();
    s.write_all(&[1; 1000]).await.unwrap();
    s.shutdown().await.unwrap();
    read_until_closed(&mut s).await;
    assert_eq!(open.stats().connections_failed, 1);
    let largest = ordo_testalloc::largest_bytes();
    assert!(largest < ALLOCATION_BYTES_LIMIT, "an allocation of {largest} bytes");
    assert_serves(&server).await;
    assert_serves(&open).await;
}

#[tokio::test]
async fn truncated_frame_then_eof_is_closed() {
    let (server, _) = start_server().await;
    for authenticated in [false, true] {
        let mut s = if authenticated {
            raw_authenticated(server.local_addr()).await
        } else {
            TcpStream::connect(server.local_addr()).await.unwrap()
        };
        s.write_all(&[100, 0, 0, 0]).await.unwrap();
        s.write_all(&[1; 10]).await.unwrap();
        s.shutdown().await.unwrap();
        read_until_closed(&mut s).await;
    }
    let stats = server.stats();
    assert_eq!((stats.handshakes_failed, stats.connections_failed), (1, 1));
    assert_serves(&server).await;
}

#[tokio::test]
async fn connections_above_the_limit_are_closed_on_accept() {
    let one = Limits { connections_max: 1, ..limits() };
    let (server, _) = server_with(one, secret()).await;
    let first = connect(server.local_addr()).await.unwrap();
    let mut second = TcpStream::connect(server.local_addr()).await.unwrap();
    assert!(read_until_closed(&mut second).await.is_empty());
    assert_eq!(server.stats().connections_rejected, 1);
    assert_eq!(first.call(Body::Ping { payload: 4 }).await.unwrap(), Body::Pong { payload: 4 });
}

// ---------------------------------------------------------------------------------------------
// Timeouts, vanishing peers, back-pressure

/// A server on a runtime of its own (as in another process), so that a handler that blocks
/// stalls only the server: on a shared runtime a blocked worker can hold up the timers of the
/// client's calls. Dropping the guard stops it.
struct ServerThread {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ServerThread {
    fn start() -> Self {
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let (server, _) = start_server().await;
                addr_tx.send(server.local_addr()).unwrap();
                let _ = stopped.await;
            });
        });
        let addr = addr_rx.recv().unwrap();
        Self { addr, stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for ServerThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

#[tokio::test]
async fn call_times_out_when_the_handler_is_slow() {
    let server = ServerThread::start();
    let peer = connect(server.addr).await.unwrap();
    let quick = Duration::from_millis(50);
    let start = Instant::now();
    let got = peer.call_timeout(Body::Ping { payload: SLOW_PAYLOAD }, quick).await;
    assert!(
        matches!(got, Err(TransportError::Timeout { peer: SERVER_ID, after_ms: 50, .. })),
        "{got:?}"
    );
    assert!(start.elapsed() < SLOW, "the timeout waited for the handler");
    // The timed-out call left nothing behind; its late answer is dropped, the next call is
    // answered.
    assert_eq!(peer.calls_in_flight(), 0);
    assert_eq!(peer.call(Body::Ping { payload: 5 }).await.unwrap(), Body::Pong { payload: 5 });
}

#[tokio::test]
async fn call_times_out_when_the_peer_never_answers() {
    let listener = TcpListener::bind(localhost()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let silent = tokio::spawn(async move {
        let mut s = raw_accept_authenticated(&listener, 9).await;
        let mut sink = Vec::new();
        let _ = s.read_to_end(&mut sink).await; // reads everything, answers nothing
    });
    let peer = connect(addr).await.unwrap();
    assert_eq!(peer.remote_id(), 9);
    for payload in 0..20 {
        let got = peer.call_timeout(Body::Ping { payload }, Duration::from_millis(10)).await;
        assert!(matches!(got, Err(TransportError::Timeout { peer: 9, .. })), "{got:?}");
        assert_eq!(peer.calls_in_flight(), 0, "timed-out calls must not accumulate");
    }
    peer.close();
    silent.await.unwrap();
}

#[tokio::test]
async fn killed_peer_fails_pending_call_with_peer_gone() {
    let listener = TcpListener::bind(localhost()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let killer = tokio::spawn(async move {
        let mut s = raw_accept_authenticated(&listener, 9).await;
        let request = read_message(&mut s).await;
        assert_eq!(request.kind, Kind::Request);
        drop(s); // dies with the request unanswered
    });
    let peer = connect(addr).await.unwrap();
    let start = Instant::now();
    let got = peer.call_timeout(Body::Ping { payload: 1 }, Duration::from_secs(10)).await;
    assert!(matches!(got, Err(TransportError::PeerGone { peer: 9, .. })), "{got:?}");
    assert!(start.elapsed() < PROMPTLY, "PeerGone came only after {:?}", start.elapsed());
    killer.await.unwrap();
    assert!(peer.is_closed());
    let got = peer.call(Body::Ping { payload: 2 }).await;
    assert!(matches!(got, Err(TransportError::PeerGone { .. })), "{got:?}");
    let got = peer.send(Body::LeaseAck { config_seq: 1 }).await;
    assert!(matches!(got, Err(TransportError::PeerGone { .. })), "{got:?}");
    assert_eq!(peer.calls_in_flight(), 0);
}

#[tokio::test]
async fn send_waits_when_the_peer_stops_reading() {
    let listener = TcpListener::bind(localhost()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let stalled = tokio::spawn(async move {
        let s = raw_accept_authenticated(&listener, 9).await;
        let _ = released.await; // holds the socket open, reading nothing
        drop(s);
    });
    let one = Limits { queue_depth: 1, ..limits() };
    let peer = Peer::connect(addr, CLIENT_ID, CLUSTER, secret(), one).await.unwrap();

    // 128 KiB frames: the kernel's socket buffers (a few MiB) fill, then the writer blocks,
    // then the one-frame queue, then `send`.
    const FRAME_WORDS: usize = 16 << 10;
    const SENDS_MAX: usize = 1000;
    let image = Body::ObjectImage { header: 0, len_bytes: 0, words: vec![7; FRAME_WORDS] };
    let mut sent = 0;
    while sent < SENDS_MAX {
        let sending = peer.send(image.clone());
        if tokio::time::timeout(Duration::from_millis(100), sending).await.is_err() {
            break;
        }
        sent += 1;
    }
    assert!(sent < SENDS_MAX, "{sent} sends of 128 KiB completed to a peer that reads nothing");
    // Still blocked: nothing is buffered beyond the queue.
    let again = tokio::time::timeout(Duration::from_millis(50), peer.send(image.clone())).await;
    assert!(again.is_err());
    assert!(!peer.is_closed());

    release.send(()).unwrap();
    stalled.await.unwrap();
    eventually("the connection closed", || peer.is_closed()).await;
}

// ---------------------------------------------------------------------------------------------
// Lifecycle and the pool

#[tokio::test]
async fn server_shutdown_closes_its_connections() {
    let (server, _) = start_server().await;
    let addr = server.local_addr();
    let peer = connect(addr).await.unwrap();
    server.shutdown();
    eventually("the connection closed", || peer.is_closed()).await;
    let got = peer.call(Body::Ping { payload: 1 }).await;
    assert!(matches!(got, Err(TransportError::PeerGone { peer: SERVER_ID, .. })), "{got:?}");
    drop(server);
    let mut refused = false;
    for _ in 0..100 {
        if connect(addr).await.is_err() {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(refused, "the listener outlived the server");
}

#[tokio::test]
async fn locally_closed_peer_fails_with_closed() {
    let (server, _) = start_server().await;
    let peer = connect(server.local_addr()).await.unwrap();
    let clone = peer.clone();
    assert!(peer.same_connection(&clone));
    clone.close();
    assert!(peer.is_closed());
    let got = peer.call(Body::Ping { payload: 1 }).await;
    assert!(matches!(got, Err(TransportError::Closed { peer: SERVER_ID, .. })), "{got:?}");
}

#[tokio::test]
async fn bad_limits_and_node_zero_are_refused() {
    let handler: Arc<dyn Handler> = Arc::new(TestHandler::default());
    let no_queue = Limits { queue_depth: 0, ..limits() };
    let got = Server::bind(localhost(), 1, CLUSTER, secret(), no_queue, handler.clone()).await;
    assert!(matches!(got, Err(TransportError::BadLimits { .. })));
    let got = Peer::connect(localhost(), 1, CLUSTER, secret(), no_queue).await;
    assert!(matches!(got, Err(TransportError::BadLimits { .. })));
    let got = Server::bind(localhost(), 0, CLUSTER, secret(), limits(), handler).await;
    assert!(matches!(got, Err(TransportError::ReservedNodeId)));
}

#[tokio::test]
async fn pool_connects_once_and_reconnects_with_backoff() {
    let backoff = Duration::from_millis(100);
    let pool =
        PeerPool::new(CLIENT_ID, CLUSTER, secret(), limits()).with_backoff(backoff, backoff * 4);
    let got = pool.get(SERVER_ID).await;
    assert!(matches!(got, Err(TransportError::UnknownPeer { peer: SERVER_ID })), "{got:?}");

    let (server, _) = start_server().await;
    pool.set_addr(SERVER_ID, server.local_addr());
    let a = pool.get(SERVER_ID).await.unwrap();
    let b = pool.get(SERVER_ID).await.unwrap();
    assert!(a.same_connection(&b));
    let answer = pool.call(SERVER_ID, Body::Ping { payload: 8 }).await.unwrap();
    assert_eq!(answer, Body::Pong { payload: 8 });
    assert_eq!(server.stats().handshakes_ok, 1);

    // The node goes away: the next get tries at once and fails, then backs off.
    drop(server);
    eventually("the connection closed", || a.is_closed()).await;
    let got = pool.get(SERVER_ID).await;
    assert!(matches!(got, Err(TransportError::Io { .. })), "{got:?}");
    let got = pool.get(SERVER_ID).await;
    assert!(matches!(got, Err(TransportError::Backoff { failures: 1, .. })), "{got:?}");
    tokio::time::sleep(backoff + Duration::from_millis(20)).await;
    let got = pool.get(SERVER_ID).await;
    assert!(matches!(got, Err(TransportError::Io { .. })), "{got:?}");
    let got = pool.get(SERVER_ID).await;
    assert!(
        matches!(got, Err(TransportError::Backoff { failures: 2, retry_in_ms, .. }) if retry_in_ms > 100),
        "{got:?}"
    );

    // It comes back elsewhere: a new address clears the back-off.
    let (server, _) = start_server().await;
    pool.set_addr(SERVER_ID, server.local_addr());
    let c = pool.get(SERVER_ID).await.unwrap();
    assert!(!c.same_connection(&a));
    assert_eq!(c.call(Body::Ping { payload: 9 }).await.unwrap(), Body::Pong { payload: 9 });

    pool.remove(SERVER_ID);
    assert!(c.is_closed());
    assert!(pool.addr(SERVER_ID).is_none());
}

#[tokio::test]
async fn pool_refuses_a_node_that_answers_with_another_id() {
    let (server, _) = start_server().await;
    let pool = PeerPool::new(CLIENT_ID, CLUSTER, secret(), limits());
    pool.set_addr(3, server.local_addr());
    let got = pool.get(3).await;
    assert!(
        matches!(got, Err(TransportError::WrongPeer { expected: 3, found: SERVER_ID, .. })),
        "{got:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The polled connection (the transaction path's calls from application threads)

async fn connect_polled(addr: SocketAddr) -> Arc<PolledPeer> {
    Arc::new(PolledPeer::connect(addr, CLIENT_ID, CLUSTER, secret(), limits()).await.unwrap())
}

/// Runs a blocking closure off the runtime's threads.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

#[tokio::test]
async fn polled_calls_are_answered_and_the_claim_is_exclusive() {
    let (server, handler) = start_server().await;
    let polled = connect_polled(server.local_addr()).await;
    assert_eq!(polled.remote_id(), SERVER_ID);
    let p = Arc::clone(&polled);
    blocking(move || {
        for (payload, poll) in [(1, true), (2, false), (3, true)] {
            let claim = p.claim().expect("nobody else holds it");
            let got = claim.call(Body::Ping { payload }, PROMPTLY, poll).unwrap();
            assert_eq!(got, Body::Pong { payload });
        }
        let held = p.claim().expect("free");
        assert!(p.claim().is_none(), "a second caller must get the runtime's connection");
        held.send(Body::LeaseAck { config_seq: 4 }).unwrap();
        assert!(p.claim().is_some(), "the claim ends with its call");
    })
    .await;
    assert_eq!(polled.calls_issued(), 3);
    eventually("the one-way message arrives", || handler.one_way.lock().unwrap().len() == 1).await;
    assert_eq!(handler.one_way.lock().unwrap()[0], (CLIENT_ID, Body::LeaseAck { config_seq: 4 }));
}

#[tokio::test]
async fn polled_call_times_out_and_the_late_answer_is_skipped() {
    let server = ServerThread::start();
    let polled = connect_polled(server.addr).await;
    let p = Arc::clone(&polled);
    blocking(move || {
        let quick = Duration::from_millis(50);
        let start = Instant::now();
        let got = p.claim().unwrap().call(Body::Ping { payload: SLOW_PAYLOAD }, quick, true);
        assert!(
            matches!(got, Err(TransportError::Timeout { peer: SERVER_ID, after_ms: 50, .. })),
            "{got:?}"
        );
        assert!(start.elapsed() < SLOW, "the timeout waited for the handler");
        // The connection stays open; the next call gets its own answer, not the late one.
        let got = p.claim().unwrap().call(Body::Ping { payload: 5 }, PROMPTLY, true).unwrap();
        assert_eq!(got, Body::Pong { payload: 5 });
        assert!(!p.is_closed());
    })
    .await;
}

#[tokio::test]
async fn polled_call_fails_with_peer_gone_when_the_peer_dies() {
    let listener = TcpListener::bind(localhost()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let killer = tokio::spawn(async move {
        let mut s = raw_accept_authenticated(&listener, 9).await;
        let request = read_message(&mut s).await;
        assert_eq!(request.kind, Kind::Request);
        drop(s); // dies with the request unanswered
    });
    let polled = connect_polled(addr).await;
    let p = Arc::clone(&polled);
    blocking(move || {
        let start = Instant::now();
        let got =
            p.claim().unwrap().call(Body::Ping { payload: 1 }, Duration::from_secs(10), false);
        assert!(matches!(got, Err(TransportError::PeerGone { peer: 9, .. })), "{got:?}");
        assert!(start.elapsed() < PROMPTLY, "PeerGone came only after {:?}", start.elapsed());
        assert!(p.is_closed());
        assert!(p.claim().is_none(), "a closed connection cannot be claimed");
    })
    .await;
    killer.await.unwrap();
}

#[tokio::test]
async fn polled_connection_refuses_malformed_and_oversized_answers() {
    for reply in [vec![5, 0, 0, 0, 0xff, 1, 2, 3, 4], u32::MAX.to_le_bytes().to_vec()] {
        let listener = TcpListener::bind(localhost()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let liar = tokio::spawn(async move {
            let mut s = raw_accept_authenticated(&listener, 9).await;
            let _request = read_message(&mut s).await;
            s.write_all(&reply).await.unwrap();
            s.write_all(&[1; 1000]).await.unwrap();
            read_until_closed(&mut s).await;
        });
        let polled = connect_polled(addr).await;
        let p = Arc::clone(&polled);
        blocking(move || {
            let got = p.claim().unwrap().call(Body::Ping { payload: 1 }, PROMPTLY, true);
            assert!(matches!(got, Err(TransportError::Wire { .. })), "{got:?}");
            assert!(p.is_closed());
        })
        .await;
        liar.await.unwrap();
    }
    let largest = ordo_testalloc::largest_bytes();
    assert!(largest < ALLOCATION_BYTES_LIMIT, "an allocation of {largest} bytes");
}

#[tokio::test]
async fn polled_connection_refuses_requests_and_close_wakes_a_blocked_call() {
    let listener = TcpListener::bind(localhost()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (asked_tx, asked_rx) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(async move {
        let mut s = raw_accept_authenticated(&listener, 9).await;
        let _request = read_message(&mut s).await;
        // A client connection serves nothing: our request gets NOT_SERVED.
        write_message(&mut s, Message::new(Kind::Request, 77, Body::Ping { payload: 1 })).await;
        let refused = read_message(&mut s).await;
        assert_eq!((refused.kind, refused.request_id), (Kind::Response, 77));
        assert!(
            matches!(refused.body, Body::Error { code: error_code::NOT_SERVED, .. }),
            "{refused:?}"
        );
        asked_tx.send(()).unwrap();
        read_until_closed(&mut s).await; // never answers
    });
    let polled = connect_polled(addr).await;
    let p = Arc::clone(&polled);
    let call = tokio::task::spawn_blocking(move || {
        p.claim().unwrap().call(Body::Ping { payload: 2 }, Duration::from_secs(30), true)
    });
    asked_rx.await.unwrap();
    let start = Instant::now();
    polled.close();
    let got = call.await.unwrap();
    assert!(matches!(got, Err(TransportError::Closed { peer: 9, .. })), "{got:?}");
    assert!(start.elapsed() < PROMPTLY, "close took {:?} to wake the call", start.elapsed());
    server.await.unwrap();
}

#[tokio::test]
async fn pool_keeps_a_polled_connection_beside_the_runtime_one() {
    let (server, _) = start_server().await;
    let pool = PeerPool::new(CLIENT_ID, CLUSTER, secret(), limits());
    pool.set_addr(SERVER_ID, server.local_addr());
    assert!(pool.ready_polled(SERVER_ID).is_none(), "connected only on first use");
    let polled = pool.get_polled(SERVER_ID).await.unwrap();
    let peer = pool.get(SERVER_ID).await.unwrap();
    assert!(Arc::ptr_eq(&polled, &pool.ready_polled(SERVER_ID).unwrap()));
    assert_eq!(peer.call(Body::Ping { payload: 3 }).await.unwrap(), Body::Pong { payload: 3 });
    eventually("two connections are open", || server.stats().connections_open == 2).await;
    // A broken polled connection is replaced on the next use.
    polled.close();
    assert!(pool.ready_polled(SERVER_ID).is_none());
    let again = pool.get_polled(SERVER_ID).await.unwrap();
    assert!(!Arc::ptr_eq(&polled, &again));
    pool.remove(SERVER_ID);
    assert!(again.is_closed(), "removing the node closes both connections");
}
