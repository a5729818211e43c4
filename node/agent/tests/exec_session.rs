//! Interactive exec sessions through a real node agent, real containers and a real
//! nats-server: a shell on a pseudo-terminal (input, resize, exit code), a pipe session with
//! stdin (EOF ends it), malformed input shrugged off, and a client that goes silent getting
//! its command killed.

mod common;

use std::time::Duration;

use bus_schemas::api::{
    ExecExit, ExecOutput, ExecOutputEvent, ExecReply, ExecRequest, TerminalSize,
};
use bus_schemas::{codec, subjects};
use common::{one_node, pod, wait_pod};
use futures::StreamExt;
use shoal_api::local::eventually;
use shoal_bus::exec::{self, ExecEvent, ExecOutputs};

const LIMIT: Duration = Duration::from_secs(30);

fn request(command: &[&str]) -> ExecRequest {
    ExecRequest {
        namespace: "default".into(),
        pod: "box".into(),
        command: command.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// Reads output until `seen` holds `want`; returns everything read. Fails on exit or after
/// the deadline.
async fn read_until(outputs: &mut ExecOutputs, seen: &mut String, want: &str) {
    let read = async {
        while !seen.contains(want) {
            match outputs.next().await.expect("session output") {
                ExecEvent::Stdout(d) | ExecEvent::Stderr(d) => {
                    seen.push_str(&String::from_utf8_lossy(&d))
                }
                ExecEvent::Exit(e) => panic!("exited {e:?} before {want:?}; output: {seen}"),
            }
        }
    };
    tokio::time::timeout(LIMIT, read)
        .await
        .unwrap_or_else(|_| panic!("never saw {want:?}; output: {seen:?}"));
}

async fn exit_of(outputs: &mut ExecOutputs, seen: &mut String) -> ExecExit {
    let read = async {
        loop {
            match outputs.next().await.expect("session output") {
                ExecEvent::Stdout(d) | ExecEvent::Stderr(d) => {
                    seen.push_str(&String::from_utf8_lossy(&d))
                }
                ExecEvent::Exit(e) => return e,
            }
        }
    };
    tokio::time::timeout(LIMIT, read)
        .await
        .unwrap_or_else(|_| panic!("the session never ended; output: {seen:?}"))
}

/// A one-shot exec (the path probes and hooks take), for looking at the container.
async fn one_shot(nats: &async_nats::Client, node: &str, command: &[&str]) -> ExecReply {
    let mut req = request(command);
    req.timeout_seconds = 10;
    let reply = nats
        .request(
            subjects::agent_request(node, "exec"),
            codec::to_msgpack(&req).unwrap().into(),
        )
        .await
        .expect("one-shot exec answered");
    codec::from_msgpack(&reply.payload).unwrap()
}

#[actix::test]
async fn sessions_run_on_a_terminal_or_pipes_and_end_when_their_client_goes_silent() {
    let (cluster, _dir, node) = one_node().await;
    let api = cluster.api();
    let n = node.name.clone();
    api.create(&pod(
        &n,
        "box",
        serde_json::json!({"containers": [{"name": "main", "image": "shoal/busybox:1.35",
            "command": ["sleep", "3600"]}]}),
    ))
    .await
    .unwrap();
    wait_pod(&api, "box", "Running", |p| p.status.phase == "Running").await;
    let nats = cluster.nats.clone();

    // A shell on a terminal: typed input runs, a resize reaches `stty`, the exit code comes back.
    let mut req = request(&["sh"]);
    req.stdin = true;
    req.tty = true;
    req.terminal_size = Some(TerminalSize {
        width: 80,
        height: 24,
    });
    req.session = exec::new_session_id();
    let session = req.session.clone();
    let (inputs, mut outputs) = exec::start(&nats, &n, req).await.expect("tty session");
    // Garbage on the session's input is dropped; the session and the agent carry on.
    nats.publish(
        subjects::exec_session_in(&n, &session),
        "not msgpack".into(),
    )
    .await
    .unwrap();
    let mut seen = String::new();
    inputs.stdin(b"echo $((6*7))\n".to_vec()).await;
    read_until(&mut outputs, &mut seen, "42").await;
    inputs.stdin(b"stty size\n".to_vec()).await;
    read_until(&mut outputs, &mut seen, "24 80").await;
    inputs.resize(100, 40).await;
    inputs.stdin(b"stty size\n".to_vec()).await;
    read_until(&mut outputs, &mut seen, "40 100").await;
    inputs
        .stdin(b"test -t 0 && echo stdin-is-a-$((1))-terminal\n".to_vec())
        .await;
    read_until(&mut outputs, &mut seen, "stdin-is-a-1-terminal").await;
    inputs.stdin(b"exit 3\n".to_vec()).await;
    let exit = exit_of(&mut outputs, &mut seen).await;
    assert_eq!(exit.exit_code, 3, "{exit:?}; output: {seen}");
    assert!(exit.error.is_empty(), "{exit:?}");

    // Pipes: stdin reaches `cat` and comes back on stdout; closing stdin ends it with 0.
    let mut req = request(&["cat"]);
    req.stdin = true;
    let (inputs, mut outputs) = exec::start(&nats, &n, req).await.expect("pipe session");
    let mut seen = String::new();
    inputs.stdin(b"hello through a pipe\n".to_vec()).await;
    read_until(&mut outputs, &mut seen, "hello through a pipe\n").await;
    inputs.close_stdin().await;
    let exit = exit_of(&mut outputs, &mut seen).await;
    assert_eq!(exit.exit_code, 0, "{exit:?}");
    assert_eq!(seen, "hello through a pipe\n");

    // Stderr stays apart without a terminal.
    let (_inputs, mut outputs) = exec::start(
        &nats,
        &n,
        request(&["sh", "-c", "echo out; echo err >&2; exit 4"]),
    )
    .await
    .expect("session without stdin");
    let (mut out, mut err) = (String::new(), String::new());
    let exit = loop {
        match tokio::time::timeout(LIMIT, outputs.next())
            .await
            .unwrap()
            .unwrap()
        {
            ExecEvent::Stdout(d) => out.push_str(&String::from_utf8_lossy(&d)),
            ExecEvent::Stderr(d) => err.push_str(&String::from_utf8_lossy(&d)),
            ExecEvent::Exit(e) => break e,
        }
    };
    assert_eq!(
        (out.as_str(), err.as_str(), exit.exit_code),
        ("out\n", "err\n", 4)
    );

    // What cannot start is refused at once, naming why.
    let err = exec::start(&nats, &n, request(&["no-such-command"]))
        .await
        .err()
        .expect("a missing executable is refused");
    assert!(err.to_string().contains("no-such-command"), "{err}");
    let mut missing = request(&["sh"]);
    missing.container = "nope".into();
    missing.tty = true;
    let err = exec::start(&nats, &n, missing)
        .await
        .err()
        .expect("no such container");
    assert!(err.to_string().contains("\"nope\" is not running"), "{err}");

    // A client that stops talking: the agent kills the command (and says why) after the
    // session's idle timeout.
    let mut req = request(&["sleep", "4242"]);
    req.stdin = true;
    req.idle_timeout_seconds = 2;
    req.session = exec::new_session_id();
    let mut watch = nats
        .subscribe(subjects::exec_session_out(&n, &req.session))
        .await
        .unwrap();
    let (inputs, outputs) = exec::start(&nats, &n, req)
        .await
        .expect("session to abandon");
    let running = one_shot(&nats, &n, &["ps"]).await;
    assert!(
        String::from_utf8_lossy(&running.stdout).contains("sleep 4242"),
        "{running:?}"
    );
    // Neither half is used again: no heartbeats, no acks.
    drop((inputs, outputs));
    let ended = tokio::time::timeout(LIMIT, async {
        while let Some(msg) = watch.next().await {
            let out: ExecOutput = codec::from_msgpack(&msg.payload).unwrap();
            if let ExecOutputEvent::Exit(e) = out.event {
                return e;
            }
        }
        panic!("the output subscription ended");
    })
    .await
    .expect("the abandoned session ends");
    assert!(ended.error.contains("sent nothing"), "{ended:?}");
    assert_eq!(ended.signal, "SIGKILL", "{ended:?}");
    eventually(
        "the abandoned command gone from the container",
        LIMIT,
        || async {
            let ps = one_shot(&nats, &n, &["ps"]).await;
            ps.error.is_empty() && !String::from_utf8_lossy(&ps.stdout).contains("sleep 4242")
        },
    )
    .await;
}
