//! Issue 13 end to end: one trace from `shoal apply` to a container started, across separate
//! processes (nats-server + API, controllers, scheduler, a real node agent, the CLI), received
//! by an OTLP collector built here on the protocol's own definitions (http/protobuf), and the
//! same trace read back by `shoal trace deploy/NAME` from SHOAL_TRACES with no collector. Then
//! the collector stops: the actors keep serving and the dropped-spans counter rises.
//!
//! Needs root, busybox-static and `shoal-shim` built beside the `shoal` binary.

use std::collections::HashSet;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use shoal_bus::tied::TiedToThisThread;
use shoal_telemetry::opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use shoal_telemetry::opentelemetry_proto::tonic::trace::v1::Span;
use shoal_telemetry::prost::Message;
use shoal_telemetry::traceview::{attribute, bytes_to_hex};

mod up_cluster;

const SHOAL: &str = env!("CARGO_BIN_EXE_shoal");
const T: Duration = Duration::from_secs(120);

/// A received span and the process that sent it.
#[derive(Clone)]
struct Received {
    pid: String,
    span: Span,
}

/// The test's OTLP collector: POST /v1/traces, protobuf bodies.
struct Collector {
    port: u16,
    spans: Arc<Mutex<Vec<Received>>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Collector {
    fn start() -> Collector {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans: Arc<Mutex<Vec<Received>>> = Arc::default();
        let sink = spans.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let sink = sink.clone();
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                            let sink = sink.clone();
                            async move {
                                let body = req.into_body().collect().await.map(|b| b.to_bytes());
                                let decoded = body.ok().and_then(|b| {
                                    ExportTraceServiceRequest::decode(b.as_ref()).ok()
                                });
                                let status = if let Some(request) = decoded {
                                    let mut sink = sink.lock().unwrap();
                                    for rs in request.resource_spans {
                                        let pid = rs
                                            .resource
                                            .as_ref()
                                            .and_then(|r| attribute(&r.attributes, "process.pid"))
                                            .unwrap_or_default();
                                        for ss in rs.scope_spans {
                                            for span in ss.spans {
                                                sink.push(Received {
                                                    pid: pid.clone(),
                                                    span,
                                                });
                                            }
                                        }
                                    }
                                    200
                                } else {
                                    400
                                };
                                let mut response = Response::new(Full::new(Bytes::new()));
                                *response.status_mut() =
                                    hyper::StatusCode::from_u16(status).unwrap();
                                Ok::<_, Infallible>(response)
                            }
                        });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Collector {
            port,
            spans,
            runtime: Some(runtime),
        }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }

    fn spans(&self) -> Vec<Received> {
        self.spans.lock().unwrap().clone()
    }
}

/// Every process the test starts, stopped (and the node's network removed) even on failure.
struct Processes {
    children: Vec<Child>,
    bridge: String,
    pod_cidr: String,
    /// The node's `shoal up --data-dir`: its pods outlive it, and go once it has stopped.
    node_data_dir: PathBuf,
}

impl Drop for Processes {
    fn drop(&mut self) {
        // The node and the other actors first, nats-server's owner (the first) last.
        for child in self.children.iter_mut().rev() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGINT);
            let _ = child.wait();
        }
        up_cluster::remove_pods(&self.node_data_dir, &self.bridge, &self.pod_cidr);
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .status();
        let _ = Command::new("nft")
            .args(["delete", "table", "ip", "shoal"])
            .stderr(Stdio::null())
            .status();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `shoal ARGS` as the admin whose credential is in `creds` (the API process's
/// `auth/creds`).
fn shoal(creds: &Path, url: &str, otlp: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(SHOAL)
        .args(args)
        .env("SHOAL_NATS", url)
        .env("SHOAL_CREDS", creds.join("admin.nk"))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn wait(what: &str, ok: impl FnMut() -> bool) {
    assert!(wait_until(ok), "timed out waiting for {what}");
}

/// Whether `ok` held within the deadline.
fn wait_until(mut ok: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !ok() {
        if start.elapsed() > T {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    true
}

/// The last lines a process wrote to its log in `dir`, to explain a timeout.
fn log_tail(dir: &Path, process: &str) -> String {
    let log = std::fs::read_to_string(dir.join(format!("{process}.log"))).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
        return String::new();
    };
    let _ = stream.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes());
    let mut page = String::new();
    let _ = stream.read_to_string(&mut page);
    page
}

fn dropped_otlp_spans(page: &str) -> f64 {
    page.lines()
        .find(|l| {
            l.starts_with("shoal_telemetry_dropped_spans_total") && l.contains("exporter=\"otlp\"")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

const APP: &str = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: traced}
spec:
  replicas: 1
  selector: {matchLabels: {app: traced}}
  template:
    metadata: {labels: {app: traced}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: shoal/busybox:1.35
        command: ["sh", "-c", "exec httpd -f -p 8080 -h /var/www"]
        readinessProbe: {httpGet: {path: /, port: 8080}, periodSeconds: 1}
"#;

/// A Prometheus server, stopped even when the test fails.
struct Prometheus(Child);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn promtool(server: &str, query: &str) -> String {
    let out = Command::new("promtool")
        .args(["query", "instant", server, query])
        .output()
        .expect("promtool (Debian's prometheus, installed by ops/scripts/setup.sh)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether a promtool answer (`metric{…} => VALUE @[time]` per series) has a positive value.
fn positive(answer: &str) -> bool {
    answer.lines().any(|l| {
        l.split_once("=> ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .is_some_and(|v| v > 0.0)
    })
}

/// Debian's Prometheus scrapes the cluster from the shipped config (its target pointed at
/// this test's processes) and has data for API latency and pod start latency, every target up.
fn prometheus_scrapes_the_cluster(dir: &std::path::Path, targets: &[&str]) {
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../prometheus/prometheus.yml"
    ))
    .unwrap();
    let list = targets
        .iter()
        .map(|t| format!("\"{t}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let config = shipped.replace("\"127.0.0.1:9464\"", &list);
    assert_ne!(config, shipped, "the shipped config scrapes 127.0.0.1:9464");
    let config_path = dir.join("prometheus.yml");
    std::fs::write(&config_path, config).unwrap();
    let port = free_port();
    let _prometheus = Prometheus(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("prom").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .tied_to_this_thread()
            .spawn()
            .expect("prometheus (Debian's, installed by ops/scripts/setup.sh)"),
    );
    let server = format!("http://127.0.0.1:{port}");
    wait("every target up", || {
        let out = promtool(&server, "up");
        out.lines().filter(|l| l.contains("=> 1 @")).count() == targets.len()
    });
    wait("API latency and pod start latency in Prometheus", || {
        let api = promtool(
            &server,
            "shoal_api_request_duration_seconds_bucket{actor=\"api\",le=\"+Inf\"}",
        );
        let pods = promtool(&server, "shoal_node_pod_start_sli_duration_seconds_count");
        positive(&api) && positive(&pods)
    });
}

/// The spans of `trace`: do they form one tree, rooted at the CLI's command?
fn one_tree(spans: &[&Received]) -> Result<(), String> {
    let ids: HashSet<&[u8]> = spans.iter().map(|r| r.span.span_id.as_slice()).collect();
    let roots: Vec<&&Received> = spans
        .iter()
        .filter(|r| r.span.parent_span_id.is_empty())
        .collect();
    if roots.len() != 1 {
        return Err(format!("{} roots", roots.len()));
    }
    if let Some(orphan) = spans.iter().find(|r| {
        !r.span.parent_span_id.is_empty() && !ids.contains(r.span.parent_span_id.as_slice())
    }) {
        return Err(format!(
            "{} has a parent not in the trace (yet)",
            orphan.span.name
        ));
    }
    Ok(())
}

#[test]
fn one_trace_runs_from_apply_to_the_container_start_across_every_process() {
    let mut collector = Collector::start();
    let otlp = collector.endpoint();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let metrics_addr = format!("127.0.0.1:{}", free_port());
    let node_metrics_addr = format!("127.0.0.1:{}", free_port());
    let n = port % 200 + 20;
    let mut processes = Processes {
        children: Vec::new(),
        bridge: format!("sht{n}"),
        pod_cidr: format!("10.229.{n}.0/24"),
        node_data_dir: dir.path().join("node"),
    };
    // The API process provisions the identities; the joined ones use its credentials
    // directory (each actor its own identity there).
    let creds = dir.path().join("api/auth/creds");
    let spawn = |args: Vec<String>, data: &str| {
        Command::new(SHOAL)
            .arg("up")
            .args(args)
            .arg("--creds")
            .arg(&creds)
            .arg("--data-dir")
            .arg(dir.path().join(data))
            .env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join(format!("{data}.log"))).unwrap())
            .tied_to_this_thread()
            .spawn()
            .unwrap()
    };
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
    processes.children.push(spawn(
        s(&[
            "--port",
            &port.to_string(),
            "--actors",
            "api",
            "--metrics-addr",
            &metrics_addr,
        ]),
        "api",
    ));
    wait("the API", || {
        shoal(&creds, &url, &otlp, &["get", "ns"]).0 == 0
    });
    for actor in ["controllers", "scheduler"] {
        processes.children.push(spawn(
            s(&["--join", &url, "--actors", actor, "--metrics-addr", ""]),
            actor,
        ));
    }
    // A node's identity is issued for it by name, as an operator would.
    let node = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_lowercase();
    let (code, _, err) = shoal(
        &creds,
        &url,
        &otlp,
        &[
            "creds",
            "create",
            "--role",
            "node",
            "--name",
            &node,
            "--data-dir",
            dir.path().join("api").to_str().unwrap(),
        ],
    );
    assert_eq!(code, 0, "{err}");
    processes.children.push(spawn(
        s(&[
            "--join",
            &url,
            "--actors",
            "node",
            "--metrics-addr",
            &node_metrics_addr,
            "--bridge",
            &processes.bridge,
            "--pod-cidr",
            &processes.pod_cidr,
        ]),
        "node",
    ));
    wait("the node", || {
        shoal(&creds, &url, &otlp, &["get", "no", "-o", "name"])
            .1
            .contains("node/")
    });
    let (code, _, err) = shoal(&creds, &url, &otlp, &["image", "build-busybox"]);
    assert_eq!(code, 0, "{err}");

    let manifest = dir.path().join("app.yaml");
    std::fs::write(&manifest, APP).unwrap();
    let (code, out, err) = shoal(
        &creds,
        &url,
        &otlp,
        &["apply", "-f", manifest.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("deployment/traced created"), "{out}");
    let ready = wait_until(|| {
        let (_, out, _) = shoal(&creds, &url, &otlp, &["get", "deploy", "traced"]);
        out.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("1/1"))
    });
    if !ready {
        let (_, pods, _) = shoal(&creds, &url, &otlp, &["describe", "pods"]);
        let logs: String = ["api", "controllers", "scheduler", "node"]
            .iter()
            .map(|p| format!("--- {p}.log\n{}", log_tail(dir.path(), p)))
            .collect();
        panic!("timed out waiting for the pod Ready\n{pods}\n{logs}");
    }

    // The collector's view: the trace rooted at `shoal apply`.
    let mut trace_id = String::new();
    wait(
        "one trace from apply to a started container, as one tree",
        || {
            let spans = collector.spans();
            let Some(root) = spans
                .iter()
                .find(|r| r.span.name == "shoal apply" && r.span.parent_span_id.is_empty())
            else {
                return false;
            };
            let trace: Vec<&Received> = spans
                .iter()
                .filter(|r| r.span.trace_id == root.span.trace_id)
                .collect();
            let actors: HashSet<String> = trace
                .iter()
                .filter_map(|r| attribute(&r.span.attributes, "shoal.actor"))
                .collect();
            let pids: HashSet<&str> = trace.iter().map(|r| r.pid.as_str()).collect();
            let started = trace.iter().any(|r| {
                r.span.name == "node.container_create_start"
                    && attribute(&r.span.attributes, "outcome").as_deref() == Some("ok")
            });
            let ready_probe = trace.iter().any(|r| {
                r.span.name == "node.probe"
                    && attribute(&r.span.attributes, "ready").as_deref() == Some("true")
            });
            let complete = ["cli", "api", "controllers", "scheduler", "node"]
                .iter()
                .all(|a| actors.contains(*a))
                && pids.len() >= 5
                && started
                && ready_probe;
            if complete && one_tree(&trace).is_ok() {
                trace_id = bytes_to_hex(&root.span.trace_id);
                return true;
            }
            false
        },
    );

    // A node's heartbeats and status, and the node lifecycle's reconciles they cause, are
    // routine: while the pod started the node beat every 2 s, yet none of it made a span.
    let routine: Vec<String> = collector
        .spans()
        .iter()
        .filter(|r| {
            let attr = |key| attribute(&r.span.attributes, key);
            (r.span.name == "api.request"
                && attr("kind").as_deref() == Some("node")
                && matches!(attr("verb").as_deref(), Some("heartbeat" | "node-status")))
                || (r.span.name == "reconcile"
                    && attr("controller").as_deref() == Some("node-lifecycle"))
        })
        .map(|r| format!("{} {:?}", r.span.name, r.span.attributes))
        .collect();
    assert!(routine.is_empty(), "routine work traced: {routine:#?}");

    // The same trace from SHOAL_TRACES, with no collector involved.
    let mut view = String::new();
    wait(
        "shoal trace deploy/traced to show the container start",
        || {
            let (code, out, _) = shoal(&creds, &url, "", &["trace", "deploy/traced"]);
            view = out;
            code == 0 && view.contains("node.container_create_start")
        },
    );
    assert!(view.starts_with(&format!("trace {trace_id}:")), "{view}");
    for (actor, span) in [
        ("cli", "shoal apply"),
        ("api", "api.cas_write"),
        ("controllers", "reconcile"),
        ("scheduler", "schedule"),
        ("scheduler", "scheduler.filter"),
        ("scheduler", "scheduler.score"),
        ("scheduler", "scheduler.bind"),
        ("node", "node.sandbox"),
        ("node", "node.probe"),
    ] {
        assert!(
            view.lines().any(|l| l.contains(actor) && l.contains(span)),
            "no {span} of {actor} in:\n{view}"
        );
    }
    let (code, json, err) = shoal(&creds, &url, "", &["trace", &trace_id, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
    let spans_in_json: usize = parsed["resourceSpans"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|rs| rs["scopeSpans"].as_array().unwrap())
        .map(|ss| ss["spans"].as_array().unwrap().len())
        .sum();
    assert!(spans_in_json >= 10, "{json}");
    assert_eq!(
        parsed["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"].as_str(),
        Some(trace_id.as_str())
    );

    prometheus_scrapes_the_cluster(dir.path(), &[&metrics_addr, &node_metrics_addr]);

    // The collector goes away: the cluster keeps serving, and the API process counts the
    // spans it could not send.
    let before = dropped_otlp_spans(&scrape(&metrics_addr));
    collector.stop();
    let (code, _, err) = shoal(
        &creds,
        &url,
        &otlp,
        &["scale", "deploy", "traced", "--replicas", "2"],
    );
    assert_eq!(code, 0, "{err}");
    wait("two pods Ready without a collector", || {
        let (_, out, _) = shoal(&creds, &url, &otlp, &["get", "deploy", "traced"]);
        out.lines()
            .nth(1)
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("2/2"))
    });
    wait("the dropped-spans counter to rise", || {
        dropped_otlp_spans(&scrape(&metrics_addr)) > before
    });
    let (code, _, err) = shoal(&creds, &url, "", &["delete", "deploy", "traced"]);
    assert_eq!(code, 0, "{err}");
}
