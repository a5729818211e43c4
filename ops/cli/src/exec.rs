//! `shoal exec [-i] [-t] POD [-c C] -- CMD…`: runs a command in a running container, through
//! the pod's node agent, and exits with the command's exit code. Without `-i`/`-t` it is the
//! agent's one-shot exec; with them a streaming session (`shoal_bus::exec`): this terminal in
//! raw mode, its size followed (SIGWINCH), stdin sent as it is read.

use std::io::{IsTerminal, Read, Write};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bus_schemas::api::{ExecExit, ExecReply, ExecRequest, TerminalSize};
use bus_schemas::kinds::Pod;
use bus_schemas::{codec, subjects};

use shoal_bus::exec::ExecEvent;
use tokio::signal::unix::{signal, SignalKind};

use crate::remote::Session;

#[derive(clap::Args, Debug)]
pub struct ExecArgs {
    pub pod: String,
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Pass this process' stdin to the command.
    #[arg(short = 'i', long)]
    pub stdin: bool,
    /// Run the command on a terminal (this one, in raw mode, when stdin is a terminal).
    #[arg(short = 't', long)]
    pub tty: bool,
    /// Seconds before the command is killed (not with -i/-t: a session lasts while it is
    /// used).
    #[arg(long, default_value_t = 60)]
    pub timeout: u32,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub async fn run(session: &Session, args: ExecArgs) -> Result<i32> {
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    let name = args
        .pod
        .trim_start_matches("pod/")
        .trim_start_matches("po/");
    let pod: Pod = session.api.get(&namespace, name).await?;
    if pod.spec.node_name.is_empty() {
        bail!("pod {name:?} is not scheduled to a node yet: nothing runs to exec into");
    }
    if args.stdin || args.tty {
        return interactive(session, &pod.spec.node_name, &namespace, name, &args).await;
    }
    let request = ExecRequest {
        namespace: namespace.clone(),
        pod: name.to_string(),
        container: args.container.clone().unwrap_or_default(),
        command: args.command.clone(),
        timeout_seconds: args.timeout,
        ..Default::default()
    };
    let subject = subjects::agent_request(&pod.spec.node_name, "exec");
    let answer = tokio::time::timeout(
        Duration::from_secs(args.timeout as u64 + 10),
        session
            .nats
            .request(subject.clone(), codec::to_msgpack(&request)?.into()),
    );
    // A credential without exec rights is refused by the server at once: say so.
    let reply = shoal_bus::violations::refused_or(&session.nats, &subject, answer)
        .await
        .map_err(|v| anyhow::anyhow!("{v}"))?
        .context("the node agent did not answer in time")?
        .with_context(|| {
            format!(
                "node {:?} did not answer: is its agent running?",
                pod.spec.node_name
            )
        })?;
    let reply: ExecReply = codec::from_msgpack(&reply.payload)?;
    if !reply.error.is_empty() {
        bail!("{}", reply.error);
    }
    std::io::stdout().write_all(&reply.stdout)?;
    std::io::stderr().write_all(&reply.stderr)?;
    Ok(reply.exit_code)
}

/// This terminal in raw mode (keys go to the remote terminal as typed, ^C included) until
/// dropped.
struct RawMode {
    saved: nix::sys::termios::Termios,
}

impl RawMode {
    fn enter() -> Option<RawMode> {
        use nix::sys::termios::{cfmakeraw, tcgetattr, tcsetattr, SetArg};
        let stdin = std::io::stdin();
        let saved = tcgetattr(&stdin).ok()?;
        let mut raw = saved.clone();
        cfmakeraw(&mut raw);
        tcsetattr(&stdin, SetArg::TCSANOW, &raw).ok()?;
        Some(RawMode { saved })
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        use nix::sys::termios::{tcsetattr, SetArg};
        let _ = tcsetattr(std::io::stdin(), SetArg::TCSANOW, &self.saved);
    }
}

fn terminal_size() -> Option<TerminalSize> {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    shoal_node::pty::size(stdin.as_fd())
        .ok()
        .filter(|(w, h)| *w > 0 && *h > 0)
        .map(|(width, height)| TerminalSize { width, height })
}

async fn interactive(
    session: &Session,
    node: &str,
    namespace: &str,
    pod: &str,
    args: &ExecArgs,
) -> Result<i32> {
    let local_tty = args.tty && std::io::stdin().is_terminal();
    let request = ExecRequest {
        namespace: namespace.to_string(),
        pod: pod.to_string(),
        container: args.container.clone().unwrap_or_default(),
        command: args.command.clone(),
        stdin: args.stdin,
        tty: args.tty,
        terminal_size: if local_tty { terminal_size() } else { None },
        ..Default::default()
    };
    let (inputs, mut outputs) = shoal_bus::exec::start(&session.nats, node, request).await?;
    let raw = if local_tty { RawMode::enter() } else { None };
    let mut tasks = Vec::new();
    if args.stdin {
        // A thread of its own, not tokio's stdin: a read blocked on the terminal would keep
        // the runtime from shutting down after the command exited.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
        std::thread::spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        if tx.blocking_send(buf[..n].to_vec()).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let inputs = inputs.clone();
        tasks.push(tokio::spawn(async move {
            while let Some(data) = rx.recv().await {
                inputs.stdin(data).await;
            }
            inputs.close_stdin().await;
        }));
    }
    if local_tty {
        let inputs = inputs.clone();
        tasks.push(tokio::spawn(async move {
            let Ok(mut winch) = signal(SignalKind::window_change()) else {
                return;
            };
            while winch.recv().await.is_some() {
                if let Some(size) = terminal_size() {
                    inputs.resize(size.width, size.height).await;
                }
            }
        }));
    }
    let ended = loop {
        let event = tokio::select! {
            event = outputs.next() => event,
            // In raw mode ^C is a key for the remote terminal; otherwise it means "stop":
            // the command is killed now rather than after the agent's idle timeout.
            _ = tokio::signal::ctrl_c(), if raw.is_none() => {
                inputs.cancel().await;
                break Ok(ExecExit { exit_code: 130, ..Default::default() });
            }
        };
        match event {
            Ok(ExecEvent::Stdout(d)) => {
                let mut out = std::io::stdout().lock();
                out.write_all(&d)?;
                out.flush()?;
            }
            Ok(ExecEvent::Stderr(d)) => {
                let mut err = std::io::stderr().lock();
                err.write_all(&d)?;
                err.flush()?;
            }
            Ok(ExecEvent::Exit(exit)) => break Ok(exit),
            Err(e) => break Err(e),
        }
    };
    for t in tasks {
        t.abort();
    }
    drop(raw);
    let exit = ended?;
    if !exit.error.is_empty() {
        bail!("{}", exit.error);
    }
    Ok(exit.exit_code)
}
