//! The UDP fast path: a few plain threads on one shared socket (the kernel wakes one per
//! arrival), each answering from the index with its own buffers; no async runtime between
//! the socket and the lookup.
//!
//! Under load, system calls cost more than answering, so each thread takes every datagram
//! already queued in one `recvmmsg` (up to [`BATCH`], waiting only for the first) and sends
//! the answers in one `sendmmsg`: the busier the server, the fewer calls per query.

use std::net::UdpSocket;
use std::os::fd::AsRawFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{
    recvmmsg, sendmmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};

use crate::answer::{respond, Transport};
use crate::index::Index;

/// How often a thread waiting for datagrams looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(200);
/// Datagrams taken per system call at most.
pub const BATCH: usize = 32;
/// Queries larger than this are cut (and so FORMERR): real ones are a few hundred bytes.
const MAX_QUERY: usize = 4096;

/// Starts `threads` threads serving `socket` until `stop` is set.
pub fn spawn(
    socket: UdpSocket,
    index: Arc<Index>,
    threads: usize,
    stop: Arc<AtomicBool>,
) -> std::io::Result<Vec<JoinHandle<()>>> {
    socket.set_read_timeout(Some(STOP_POLL))?;
    let mut handles = Vec::with_capacity(threads.max(1));
    for i in 0..threads.max(1) {
        let socket = socket.try_clone()?;
        let (index, stop) = (index.clone(), stop.clone());
        let handle = std::thread::Builder::new()
            .name(format!("dns-udp-{i}"))
            .spawn(move || Worker::new().serve(&socket, &index, &stop))?;
        handles.push(handle);
    }
    Ok(handles)
}

/// One thread's buffers, reused for every batch.
struct Worker {
    queries: Vec<Vec<u8>>,
    answers: Vec<Vec<u8>>,
    peers: Vec<Option<SockaddrStorage>>,
    received: Vec<(usize, Option<SockaddrStorage>)>,
    rx: MultiHeaders<SockaddrStorage>,
    tx: MultiHeaders<SockaddrStorage>,
}

impl Worker {
    fn new() -> Worker {
        Worker {
            queries: vec![vec![0u8; MAX_QUERY]; BATCH],
            answers: (0..BATCH).map(|_| Vec::with_capacity(1500)).collect(),
            peers: Vec::with_capacity(BATCH),
            received: Vec::with_capacity(BATCH),
            rx: MultiHeaders::preallocate(BATCH, None),
            tx: MultiHeaders::preallocate(BATCH, None),
        }
    }

    fn serve(mut self, socket: &UdpSocket, index: &Index, stop: &AtomicBool) {
        let fd = socket.as_raw_fd();
        while !stop.load(Ordering::Relaxed) {
            match self.receive(fd) {
                Ok(()) => {}
                Err(Errno::EAGAIN | Errno::EINTR) => continue,
                Err(e) => {
                    tracing::debug!(error = %e, "UDP receive failed");
                    continue;
                }
            }
            let mut ready = 0;
            self.peers.clear();
            for (i, (len, peer)) in self.received.iter().enumerate() {
                let (query, answer) = (&self.queries[i][..*len], &mut self.answers[ready]);
                // respond() does not panic on any input (it is fuzzed); should a bug slip
                // through, the thread must go on serving rather than take the listener down.
                let answered = catch_unwind(AssertUnwindSafe(|| {
                    respond(index, query, Transport::Udp, answer)
                }))
                .unwrap_or_else(|_| {
                    tracing::error!("answering a query panicked; query dropped");
                    false
                });
                if answered && peer.is_some() {
                    self.peers.push(*peer);
                    ready += 1;
                }
            }
            if ready > 0 {
                self.send(socket, ready);
            }
        }
    }

    /// Blocks for the first datagram (up to the socket's read timeout), then takes whatever
    /// else is queued, into `queries`/`received`.
    fn receive(&mut self, fd: std::os::fd::RawFd) -> Result<(), Errno> {
        self.received.clear();
        let mut slices: Vec<[std::io::IoSliceMut<'_>; 1]> = self
            .queries
            .iter_mut()
            .map(|q| [std::io::IoSliceMut::new(q)])
            .collect();
        let got = recvmmsg(
            fd,
            &mut self.rx,
            slices.iter_mut(),
            MsgFlags::MSG_WAITFORONE,
            None,
        )?;
        self.received.extend(got.map(|m| (m.bytes, m.address)));
        Ok(())
    }

    fn send(&mut self, socket: &UdpSocket, ready: usize) {
        let slices: Vec<[std::io::IoSlice<'_>; 1]> = self.answers[..ready]
            .iter()
            .map(|a| [std::io::IoSlice::new(a)])
            .collect();
        let none: [ControlMessage<'_>; 0] = [];
        let sent = sendmmsg(
            socket.as_raw_fd(),
            &mut self.tx,
            slices.iter(),
            &self.peers[..ready],
            none,
            MsgFlags::empty(),
        );
        // sendmmsg stops at the first message that fails (an unreachable peer, say); the
        // others are then sent one by one. (A failure after the first message is reported
        // as a short count, which is not read here: those answers are lost like any UDP
        // datagram, and their clients retry.)
        if let Err(e) = sent {
            tracing::debug!(error = %e, "UDP batch send failed; sending one by one");
            for (answer, peer) in self.answers[..ready].iter().zip(&self.peers) {
                let Some(addr) = peer.as_ref().and_then(socket_addr) else {
                    continue;
                };
                let _ = socket.send_to(answer, addr);
            }
        }
    }
}

fn socket_addr(s: &SockaddrStorage) -> Option<std::net::SocketAddr> {
    if let Some(v4) = s.as_sockaddr_in() {
        return Some(std::net::SocketAddr::V4((*v4).into()));
    }
    s.as_sockaddr_in6()
        .map(|v6| std::net::SocketAddr::V6((*v6).into()))
}
