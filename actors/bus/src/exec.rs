//! The client side of streaming exec sessions (bus-schemas README, *Exec sessions*), shared
//! by the gateway (`kubectl exec -it`) and `shoal exec -it`.
//!
//! [`start`] subscribes to the session's output, asks the node agent to start the command,
//! and returns two halves: [`ExecInputs`] (stdin, resizes, stdin-close, cancel; cloneable,
//! every message numbered in order) and [`ExecOutputs`], whose [`ExecOutputs::next`] yields
//! the command's output in order and its exit, and meanwhile keeps the session alive:
//! heartbeats carrying the ack the agent's flow control waits for, and a deadline on the
//! agent's own heartbeats.

use std::sync::Arc;
use std::time::Duration;

use bus_schemas::api::{
    ExecExit, ExecInput, ExecInputEvent, ExecOutput, ExecOutputEvent, ExecReply, ExecRequest,
    TerminalSize, EXEC_OUTPUT_WINDOW,
};
use bus_schemas::{codec, subjects};
use futures::StreamExt;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// How often the client says it is still there (well inside the agent's idle timeout).
const HEARTBEAT_PERIOD: Duration = Duration::from_secs(3);
/// Without a message from the agent for this long (it heartbeats every 3 s), it is gone.
const AGENT_SILENCE: Duration = Duration::from_secs(20);
/// How long the agent may take to start the command.
const START_TIMEOUT: Duration = Duration::from_secs(40);

#[derive(Debug, thiserror::Error)]
pub enum ExecSessionError {
    /// The agent refused or could not start the command (pod or container not found, not
    /// running, executable missing…), or could not be reached.
    #[error("{0}")]
    Start(String),
    #[error("output message {expected} of the exec session was lost (got {got})")]
    Lost { expected: u64, got: u64 },
    #[error("node {node:?} stopped answering for the exec session")]
    AgentSilent { node: String },
    #[error("the exec session's output subscription ended")]
    Closed,
}

/// What the command printed, or how it ended (the last event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExecEvent {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    Exit(ExecExit),
}

struct InputState {
    seq: u64,
    /// Highest output seq consumed.
    ack: u64,
    /// Ack last sent to the agent.
    ack_sent: u64,
}

/// The sending half: cloneable; messages from all clones reach the agent in one numbered
/// order.
#[derive(Clone)]
pub struct ExecInputs {
    nats: async_nats::Client,
    subject: String,
    state: Arc<Mutex<InputState>>,
}

impl ExecInputs {
    async fn send(&self, event: ExecInputEvent) {
        let mut state = self.state.lock().await;
        state.seq += 1;
        state.ack_sent = state.ack;
        let message = ExecInput {
            seq: state.seq,
            ack: state.ack,
            event,
        };
        if let Ok(body) = codec::to_msgpack(&message) {
            // Published under the lock: the order of seq is the order on the wire.
            let _ = self.nats.publish(self.subject.clone(), body.into()).await;
        }
    }

    pub async fn stdin(&self, data: Vec<u8>) {
        self.send(ExecInputEvent::Stdin(data)).await
    }

    pub async fn resize(&self, width: u16, height: u16) {
        self.send(ExecInputEvent::Resize(TerminalSize { width, height }))
            .await
    }

    pub async fn close_stdin(&self) {
        self.send(ExecInputEvent::CloseStdin).await
    }

    /// Ends the session: the agent kills the command. Also what a client that leaves
    /// should send, so the command does not wait out the idle timeout.
    pub async fn cancel(&self) {
        self.send(ExecInputEvent::Cancel).await;
        let _ = self.nats.flush().await;
    }

    async fn heartbeat(&self) {
        self.send(ExecInputEvent::Heartbeat).await
    }
}

/// The receiving half.
pub struct ExecOutputs {
    node: String,
    output: async_nats::Subscriber,
    inputs: ExecInputs,
    expected: u64,
    last_heard: Instant,
    ticker: tokio::time::Interval,
    done: bool,
}

impl ExecOutputs {
    /// The next output, or the exit (after which the session is over and this returns
    /// `Closed`). Must be polled for the session to stay alive.
    pub async fn next(&mut self) -> Result<ExecEvent, ExecSessionError> {
        if self.done {
            return Err(ExecSessionError::Closed);
        }
        loop {
            tokio::select! {
                msg = self.output.next() => {
                    let Some(msg) = msg else { return Err(ExecSessionError::Closed) };
                    let Ok(out) = codec::from_msgpack::<ExecOutput>(&msg.payload) else {
                        tracing::warn!(node = %self.node, "exec session: malformed output message dropped");
                        continue;
                    };
                    self.last_heard = Instant::now();
                    if out.seq != self.expected {
                        self.done = true;
                        self.inputs.cancel().await;
                        return Err(ExecSessionError::Lost { expected: self.expected, got: out.seq });
                    }
                    self.expected += 1;
                    let send_ack = {
                        let mut state = self.inputs.state.lock().await;
                        state.ack = out.seq;
                        state.ack - state.ack_sent >= EXEC_OUTPUT_WINDOW / 2
                    };
                    if send_ack {
                        self.inputs.heartbeat().await;
                    }
                    match out.event {
                        ExecOutputEvent::Stdout(d) => return Ok(ExecEvent::Stdout(d)),
                        ExecOutputEvent::Stderr(d) => return Ok(ExecEvent::Stderr(d)),
                        ExecOutputEvent::Heartbeat => continue,
                        ExecOutputEvent::Exit(exit) => {
                            self.done = true;
                            return Ok(ExecEvent::Exit(exit));
                        }
                    }
                }
                _ = self.ticker.tick() => {
                    if self.last_heard.elapsed() > AGENT_SILENCE {
                        self.done = true;
                        self.inputs.cancel().await;
                        return Err(ExecSessionError::AgentSilent { node: self.node.clone() });
                    }
                    self.inputs.heartbeat().await;
                }
            }
        }
    }
}

/// A fresh unguessable session id.
pub fn new_session_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Starts `request` (its `session` set here when empty) on `node`'s agent.
pub async fn start(
    nats: &async_nats::Client,
    node: &str,
    mut request: ExecRequest,
) -> Result<(ExecInputs, ExecOutputs), ExecSessionError> {
    if request.session.is_empty() {
        request.session = new_session_id();
    }
    // Subscribed before the request: the agent may send output before its reply arrives.
    let output = nats
        .subscribe(subjects::exec_session_out(node, &request.session))
        .await
        .map_err(|e| ExecSessionError::Start(format!("subscribing for the session: {e}")))?;
    let body = codec::to_msgpack(&request)
        .map_err(|e| ExecSessionError::Start(format!("encoding the exec request: {e}")))?;
    let subject = subjects::agent_request(node, "exec");
    let reply = tokio::time::timeout(START_TIMEOUT, nats.request(subject, body.into()))
        .await
        .map_err(|_| ExecSessionError::Start(format!("node {node:?} did not answer in time")))?
        .map_err(|e| {
            ExecSessionError::Start(format!(
                "node {node:?} did not answer: is its agent running? ({e})"
            ))
        })?;
    let reply: ExecReply = codec::from_msgpack(&reply.payload)
        .map_err(|e| ExecSessionError::Start(format!("the agent's answer: {e}")))?;
    if !reply.error.is_empty() {
        return Err(ExecSessionError::Start(reply.error));
    }
    if !reply.started {
        return Err(ExecSessionError::Start(format!(
            "the agent of node {node:?} does not serve interactive exec sessions (an older version?)"
        )));
    }
    let inputs = ExecInputs {
        nats: nats.clone(),
        subject: subjects::exec_session_in(node, &request.session),
        state: Arc::new(Mutex::new(InputState {
            seq: 0,
            ack: 0,
            ack_sent: 0,
        })),
    };
    let mut ticker = tokio::time::interval_at(Instant::now() + HEARTBEAT_PERIOD, HEARTBEAT_PERIOD);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let outputs = ExecOutputs {
        node: node.to_string(),
        output,
        inputs: inputs.clone(),
        expected: 1,
        last_heard: Instant::now(),
        ticker,
        done: false,
    };
    Ok((inputs, outputs))
}
