//! Streaming exec sessions (`kubectl exec -i/-t`, `shoal exec -it`): the agent side of the
//! protocol in bus-schemas' README (*Exec sessions*).
//!
//! The runtime starts the command (on a pty, or pipes) and hands over its stdio; this module
//! moves bytes between those fds and the session's subjects: output in sequence-numbered
//! chunks on `…exec.<session>.out`, no more than [`EXEC_OUTPUT_WINDOW`] past the client's
//! last ack (so a slow client slows the command, as a slow terminal does), and stdin,
//! resizes and stdin-close from `…exec.<session>.in`. A client that goes silent for the
//! session's idle timeout, or leaves a gap in its input, gets the command killed; so does an
//! agent that dies (the shim's control socket closes). A bad message on `in` is logged and
//! dropped.

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::{
    ExecExit, ExecInput, ExecInputEvent, ExecOutput, ExecOutputEvent, ExecReply, ExecRequest,
    EXEC_OUTPUT_WINDOW,
};
use bus_schemas::{codec, subjects};
use futures::StreamExt;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use shoal_node::runtime::{ExecSession, SessionRequest};
use shoal_node::shim::SessionEvent;
use tokio::io::unix::AsyncFd;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::agent::AgentCtx;

/// Sessions one agent serves at once; more are refused rather than exhausting ptys and fds.
const MAX_SESSIONS: usize = 64;
/// Without a word from the client for this long (unless the request says otherwise), the
/// command is killed.
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(15);
/// How often the agent tells the client it is still there.
const HEARTBEAT_PERIOD: Duration = Duration::from_secs(3);
/// Largest output message.
const CHUNK_BYTES: usize = 32 * 1024;
/// Stdin received but not yet read by the command; past it the session ends (a client
/// that floods stdin into a command that does not read it).
const MAX_STDIN_BACKLOG: usize = 16 << 20;
/// After the command exits, how long output still in flight (its pipes' last bytes) may take.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

static SESSIONS: AtomicUsize = AtomicUsize::new(0);

/// Counts a running session; the slot is freed when dropped.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        let prev = SESSIONS.fetch_add(1, Ordering::AcqRel);
        if prev >= MAX_SESSIONS {
            SESSIONS.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        SESSIONS.fetch_sub(1, Ordering::AcqRel);
    }
}

fn failed(error: String) -> ExecReply {
    ExecReply {
        exit_code: -1,
        error,
        ..Default::default()
    }
}

/// Starts the session `req` asks for in `container_id`; the reply says whether it started.
/// Its input is subscribed before the reply goes out, so nothing the client sends after the
/// reply is missed.
pub async fn start(
    ctx: &Arc<AgentCtx>,
    nats: &async_nats::Client,
    container_id: String,
    req: ExecRequest,
) -> ExecReply {
    if !subjects::valid_exec_session(&req.session) {
        return failed(format!(
            "session: {:?} is not a session id (1–64 of A-Z a-z 0-9 _ -)",
            req.session
        ));
    }
    let Some(runtime) = ctx.backend.linux().cloned() else {
        return failed(
            "this node runs hollow (simulated) containers: there is nothing to attach a session to"
                .into(),
        );
    };
    let Some(slot) = Slot::take() else {
        return failed(format!(
            "node {} already serves {MAX_SESSIONS} exec sessions",
            ctx.config.node_name
        ));
    };
    let node = ctx.config.node_name.clone();
    let input = match nats
        .subscribe(subjects::exec_session_in(&node, &req.session))
        .await
    {
        Ok(s) => s,
        Err(e) => return failed(format!("subscribing for the session's input: {e}")),
    };
    let request = SessionRequest {
        argv: req.command.clone(),
        env: Vec::new(),
        tty: req.tty,
        stdin: req.stdin,
        size: req
            .terminal_size
            .filter(|s| s.width > 0 && s.height > 0)
            .map(|s| (s.width, s.height)),
    };
    let id = container_id.clone();
    let started = tokio::task::spawn_blocking(move || runtime.exec_session(&id, &request)).await;
    let session = match started {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return failed(e.to_string()),
        Err(e) => return failed(format!("starting the session: {e}")),
    };
    let idle = match req.idle_timeout_seconds {
        0 => DEFAULT_IDLE_TIMEOUT,
        n => Duration::from_secs(u64::from(n)),
    };
    let out = subjects::exec_session_out(&node, &req.session);
    let nats = nats.clone();
    let name = req.session.clone();
    tokio::spawn(async move {
        let _slot = slot;
        tracing::info!(session = %name, container = %container_id, tty = req.tty, stdin = req.stdin, "exec session started");
        let exit = run(&nats, out, input, session, idle).await;
        tracing::info!(session = %name, exit_code = exit.exit_code, error = %exit.error, "exec session ended");
    });
    ExecReply {
        started: true,
        ..Default::default()
    }
}

/// A file descriptor driven by tokio's reactor.
struct Fd(AsyncFd<OwnedFd>);

impl Fd {
    fn new(fd: OwnedFd) -> io::Result<Fd> {
        let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
        fcntl(&fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        // NOTE: `new` is deprecated for inner types whose fd could be closed or swapped under
        // the reactor; an OwnedFd cannot be, so it is sound here (its replacement `register`
        // is the same call marked unsafe, which this crate does not allow).
        #[allow(deprecated)]
        Ok(Fd(AsyncFd::new(fd)?))
    }

    /// Some bytes, or 0 at EOF (EIO from a pty master whose other side is gone is its EOF).
    async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let mut guard = self.0.readable().await?;
            match guard.try_io(|fd| nix::unistd::read(fd.get_ref(), buf).map_err(io::Error::from)) {
                Ok(Err(e)) if e.raw_os_error() == Some(libc_eio()) => return Ok(0),
                Ok(result) => return result,
                Err(_would_block) => continue,
            }
        }
    }

    async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.0.writable().await?;
            match guard.try_io(|fd| nix::unistd::write(fd.get_ref(), data).map_err(io::Error::from))
            {
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }

    /// One message from a SOCK_SEQPACKET socket; empty at EOF.
    async fn recv_message(&self) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let mut guard = self.0.readable().await?;
            let got = guard.try_io(|fd| {
                nix::sys::socket::recv(
                    fd.get_ref().as_raw_fd(),
                    &mut buf,
                    nix::sys::socket::MsgFlags::MSG_DONTWAIT,
                )
                .map_err(io::Error::from)
            });
            match got {
                Ok(Ok(n)) => {
                    buf.truncate(n);
                    return Ok(buf);
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }
}

fn libc_eio() -> i32 {
    nix::errno::Errno::EIO as i32
}

enum Chunk {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
}

/// Reads one output fd into `tx` until EOF; the bounded channel is the backpressure: while
/// the session holds back output (the client's window is full), this stops reading.
async fn pump_output(fd: Fd, stderr: bool, tx: mpsc::Sender<Chunk>) {
    let mut buf = vec![0u8; CHUNK_BYTES];
    loop {
        match fd.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let data = buf[..n].to_vec();
                let chunk = if stderr {
                    Chunk::Stderr(data)
                } else {
                    Chunk::Stdout(data)
                };
                if tx.send(chunk).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Writes stdin in arrival order; `None` closes it. Bytes still queued are counted in
/// `backlog`.
async fn write_stdin(
    fd: Fd,
    mut rx: mpsc::UnboundedReceiver<Option<Vec<u8>>>,
    backlog: Arc<AtomicUsize>,
) {
    let mut broken = false;
    while let Some(Some(data)) = rx.recv().await {
        backlog.fetch_sub(data.len(), Ordering::AcqRel);
        // A command that closed its stdin: drop the rest, as a pipe's reader would.
        if !broken && fd.write_all(&data).await.is_err() {
            broken = true;
        }
    }
}

/// Drives one session until the command has exited and its output is sent; returns how it
/// ended (also sent as the last message).
async fn run(
    nats: &async_nats::Client,
    out: String,
    mut input: async_nats::Subscriber,
    session: ExecSession,
    idle: Duration,
) -> ExecExit {
    let ExecSession {
        stdin,
        stdout,
        stderr,
        terminal,
        control,
        mut shim,
        pid: _,
    } = session;
    let (chunks_tx, mut chunks) = mpsc::channel::<Chunk>(4);
    let mut readers = Vec::new();
    for (fd, is_stderr) in [(Some(stdout), false), (stderr, true)] {
        if let Some(fd) = fd {
            match Fd::new(fd) {
                Ok(fd) => readers.push(tokio::spawn(pump_output(fd, is_stderr, chunks_tx.clone()))),
                Err(e) => tracing::warn!(error = %e, "exec session: output not readable"),
            }
        }
    }
    drop(chunks_tx);
    let backlog = Arc::new(AtomicUsize::new(0));
    let stdin_tx = match stdin.map(Fd::new) {
        Some(Ok(fd)) => {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(write_stdin(fd, rx, backlog.clone()));
            Some(tx)
        }
        _ => None,
    };
    let mut stdin_tx = stdin_tx;
    let (exit_tx, mut exited) = tokio::sync::oneshot::channel::<ExecExit>();
    let control = Arc::new(control);
    let watcher = {
        let control = control.clone();
        tokio::spawn(async move {
            let exit = watch_control(&control).await;
            let _ = exit_tx.send(exit);
        })
    };

    let mut seq = 0u64;
    let mut acked = 0u64;
    let mut next_in = 1u64;
    let mut last_heard = Instant::now();
    let mut outputs_open = true;
    let mut exit: Option<ExecExit> = None;
    let mut drain_deadline: Option<Instant> = None;
    let mut ending: Option<String> = None;
    let mut ticker = tokio::time::interval(HEARTBEAT_PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    let publish = |seq: u64, event: ExecOutputEvent| {
        let nats = nats.clone();
        let out = out.clone();
        async move {
            if let Ok(body) = codec::to_msgpack(&ExecOutput { seq, event }) {
                let _ = nats.publish(out, body.into()).await;
            }
        }
    };

    loop {
        if exit.is_some() && (!outputs_open || drain_deadline.is_some_and(|d| Instant::now() >= d))
        {
            break;
        }
        let window_open = seq < acked + EXEC_OUTPUT_WINDOW;
        tokio::select! {
            chunk = chunks.recv(), if outputs_open && window_open => match chunk {
                Some(Chunk::Stdout(data)) => { seq += 1; publish(seq, ExecOutputEvent::Stdout(data)).await; }
                Some(Chunk::Stderr(data)) => { seq += 1; publish(seq, ExecOutputEvent::Stderr(data)).await; }
                None => outputs_open = false,
            },
            msg = input.next(), if ending.is_none() => {
                let Some(msg) = msg else {
                    end(&mut ending, &control, "the agent lost its subscription to the session's input".into());
                    continue;
                };
                let message: ExecInput = match codec::from_msgpack(&msg.payload) {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(error = %e, "exec session: malformed input message dropped");
                        continue;
                    }
                };
                last_heard = Instant::now();
                acked = acked.max(message.ack.min(seq));
                if message.seq != next_in {
                    end(&mut ending, &control, format!(
                        "input message {next_in} was lost (got {}): stdin may be incomplete, so the command was stopped",
                        message.seq
                    ));
                    continue;
                }
                next_in += 1;
                match message.event {
                    ExecInputEvent::Stdin(data) => {
                        if let Some(tx) = &stdin_tx {
                            let queued = backlog.fetch_add(data.len(), Ordering::AcqRel) + data.len();
                            if queued > MAX_STDIN_BACKLOG {
                                end(&mut ending, &control, format!(
                                    "over {} MiB of stdin not read by the command", MAX_STDIN_BACKLOG >> 20
                                ));
                            } else {
                                let _ = tx.send(Some(data));
                            }
                        }
                    }
                    ExecInputEvent::Resize(size) => {
                        if let (Some(t), true) = (&terminal, size.width > 0 && size.height > 0) {
                            let _ = shoal_node::runtime::resize(t.as_fd(), size.width, size.height);
                        }
                    }
                    ExecInputEvent::CloseStdin => {
                        if let Some(tx) = stdin_tx.take() {
                            let _ = tx.send(None);
                        }
                    }
                    ExecInputEvent::Heartbeat => {}
                    ExecInputEvent::Cancel => end(&mut ending, &control, "the client ended the session".into()),
                }
            },
            got = &mut exited, if exit.is_none() => {
                let got = got.unwrap_or_else(|_| ExecExit { exit_code: -1, error: "the session's supervisor vanished".into(), ..Default::default() });
                exit = Some(got);
                drain_deadline = Some(Instant::now() + DRAIN_AFTER_EXIT);
            },
            _ = ticker.tick() => {
                if ending.is_none() && last_heard.elapsed() > idle {
                    end(&mut ending, &control, format!(
                        "the client sent nothing for {} s: the command was stopped", idle.as_secs()
                    ));
                }
                seq += 1;
                publish(seq, ExecOutputEvent::Heartbeat).await;
            },
            _ = tokio::time::sleep_until(drain_deadline.unwrap_or_else(|| Instant::now() + HEARTBEAT_PERIOD)), if drain_deadline.is_some() => {},
        }
    }
    let mut exit = exit.unwrap_or_default();
    if let Some(reason) = ending {
        exit.error = if exit.error.is_empty() {
            reason
        } else {
            format!("{reason} ({})", exit.error)
        };
    }
    seq += 1;
    publish(seq, ExecOutputEvent::Exit(exit.clone())).await;
    let _ = nats.flush().await;
    // Whatever is left goes: readers, the stdin writer, the control socket (the shim has
    // reported the exit, so it is on its way out), then the shim is reaped.
    for r in readers {
        r.abort();
    }
    drop(stdin_tx);
    watcher.abort();
    drop(control);
    let _ = tokio::task::spawn_blocking(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            match shim.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if std::time::Instant::now() > deadline => {
                    let _ = shim.kill();
                    let _ = shim.wait();
                    return;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
    })
    .await;
    exit
}

/// Asks the shim to kill the command (any message on the control socket does), once, and
/// remembers why for the exit message.
fn end(ending: &mut Option<String>, control: &Arc<OwnedFd>, reason: String) {
    if ending.is_some() {
        return;
    }
    tracing::info!(%reason, "exec session: stopping the command");
    let _ = nix::sys::socket::send(
        control.as_raw_fd(),
        b"kill",
        nix::sys::socket::MsgFlags::MSG_NOSIGNAL | nix::sys::socket::MsgFlags::MSG_DONTWAIT,
    );
    *ending = Some(reason);
}

/// The shim's report of the command's end.
async fn watch_control(control: &Arc<OwnedFd>) -> ExecExit {
    let lost = |why: String| ExecExit {
        exit_code: -1,
        error: why,
        ..Default::default()
    };
    let fd = match control.try_clone().and_then(Fd::new) {
        Ok(fd) => fd,
        Err(e) => return lost(format!("watching the session: {e}")),
    };
    loop {
        let message = match fd.recv_message().await {
            Ok(m) if m.is_empty() => {
                return lost("the session's supervisor exited without a word".into())
            }
            Ok(m) => m,
            Err(e) => return lost(format!("reading the session's supervisor: {e}")),
        };
        if let Some(SessionEvent::Exited {
            exit_code,
            signal,
            error: _,
        }) = shoal_node::runtime::decode_event(&message)
        {
            let signal = signal
                .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
                .map(|s| s.as_str().to_string())
                .unwrap_or_default();
            return ExecExit {
                exit_code,
                signal,
                error: String::new(),
            };
        }
    }
}
