//! Cluster DNS: the naming actor against Debian's unbound serving the same records, under the
//! same load. Goal: ≥ 1.0× unbound's queries/s. Prints figures; never asserts.
//!
//! Layout: nats-server child (temp dir) and the API actor in this process; `--services`
//! Services created through the API (every `--headless-every`th headless, with an Endpoints
//! object of three ready addresses; the others ClusterIP), each with a named port `http`. The
//! naming actor serves them on 127.0.0.1:<free port>; unbound (`/usr/sbin/unbound -d`) serves
//! the very same records (taken from the naming actor's answers and checked to match) as
//! `local-data` of a static `cluster.local.` zone on another free port. Both get
//! `--server-threads` threads (unbound `num-threads`, the actor's UDP threads).
//!
//! Load: one client thread with `--sockets` UDP sockets, each keeping `--outstanding` queries
//! in flight (replies taken and new queries sent in batches, `recvmmsg`/`sendmmsg`, so the
//! client costs less per query than a server), cycling through every Service's A and
//! `_http._tcp` SRV question for `--seconds`; then an unloaded latency run (one query in flight). Each server's CPU time
//! during the run is read from /proc, so CPU per query compares the two even when the one
//! client thread, not the server, is what limits queries/s.
//!
//! Run: `cargo build --release -p shoal-loadtest --bin bench_dns && /work/target/release/bench_dns`

#[path = "common/mod.rs"]
mod common;

use std::collections::BTreeSet;
use std::io::{IoSlice, IoSliceMut};
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bus_schemas::kinds::{Endpoints, Service};
use clap::Parser;
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags};
use nix::sys::socket::{
    recvmmsg, sendmmsg, ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage,
};
use shoal_bus::ApiClient;
use shoal_naming::NamingConfig;

#[derive(Parser)]
#[command(about = "Cluster DNS: the naming actor vs unbound with the same records and load")]
struct Args {
    #[arg(long, default_value_t = 200)]
    services: usize,
    /// Every Nth Service is headless (with three ready endpoints); 0: none.
    #[arg(long, default_value_t = 4)]
    headless_every: usize,
    /// Serving threads of each server (unbound num-threads; the actor's UDP threads).
    #[arg(long, default_value_t = 1)]
    server_threads: usize,
    #[arg(long, default_value_t = 8)]
    sockets: usize,
    /// Queries in flight per socket.
    #[arg(long, default_value_t = 16)]
    outstanding: usize,
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Unloaded latency run (one query in flight), seconds.
    #[arg(long, default_value_t = 2)]
    latency_seconds: u64,
    /// Alternate runs per server; the best of each is reported (the machine may be shared).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    #[arg(long, default_value = "/usr/sbin/unbound")]
    unbound: PathBuf,
}

fn main() -> Result<()> {
    common::init_tracing();
    let args = Args::parse();
    if !args.unbound.exists() {
        bail!(
            "{} not found: install Debian's unbound (ops/scripts/setup.sh does)",
            args.unbound.display()
        );
    }
    let dir = tempfile::tempdir()?;
    let (runtime, natsd) = common::start_nats(dir.path())?;
    let url = natsd.url();
    let identities = common::Identities::of(&runtime, &natsd)?;
    let cp = common::start_control_plane(url.clone(), &identities, false)?;
    let result = runtime.block_on(bench(&args, &url, &identities, &cp, dir.path()));
    drop(natsd);
    result
}

async fn bench(
    args: &Args,
    url: &str,
    identities: &common::Identities,
    cp: &common::ControlPlane,
    dir: &Path,
) -> Result<()> {
    // The Services are the operator's to create; the naming actor has its own identity.
    let admin = shoal_bus::connect(url, "bench-dns", &identities.admin).await?;
    let api = ApiClient::new(admin).with_deadline(Duration::from_secs(30));
    let nats = shoal_bus::connect(url, "bench-naming", &identities.naming).await?;
    let start = Instant::now();
    create_services(&api, args).await?;
    println!(
        "{} Services created ({} headless) in {:.1} s",
        args.services,
        headless_count(args),
        start.elapsed().as_secs_f64()
    );

    let config = NamingConfig {
        listen: vec!["127.0.0.1:0".parse()?],
        udp_threads: args.server_threads,
        serve_nats: false,
        informers: Some(cp.informers.clone()),
        ..Default::default()
    };
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if let Err(e) =
            shoal_naming::run_with_ready(config, nats, std::future::pending(), ready_tx).await
        {
            eprintln!("naming actor failed: {e}");
        }
    });
    let shoal = tokio::time::timeout(Duration::from_secs(60), ready_rx)
        .await
        .context("naming actor not ready within 60 s")?
        .context("naming actor stopped")?[0];

    let questions = questions(args);
    let last = questions.last().context("no questions")?.clone();
    let deadline = Instant::now() + Duration::from_secs(60);
    while ask_blocking(shoal, &last.0, last.1).is_none_or(|m| m.answers.is_empty()) {
        if Instant::now() > deadline {
            bail!("the naming actor did not serve {} within 60 s", last.0);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut zone = Vec::new();
    let mut expected = Vec::new();
    for (name, qtype) in &questions {
        let reply = ask_blocking(shoal, name, *qtype)
            .with_context(|| format!("no answer from the naming actor for {name}"))?;
        zone.extend(reply.answers.iter().map(|r| r.to_string()));
        expected.push(summary(&reply));
    }
    let zone: BTreeSet<String> = zone.into_iter().collect();

    let unbound = Unbound::start(&args.unbound, dir, &zone, args.server_threads)?;
    let mut same = 0;
    for ((name, qtype), want) in questions.iter().zip(&expected) {
        if ask_blocking(unbound.addr, name, *qtype)
            .map(|m| summary(&m))
            .as_ref()
            == Some(want)
        {
            same += 1;
        }
    }
    println!(
        "{} questions (A and _http._tcp SRV of every Service), {} records; unbound's answers \
         match the naming actor's for {same}/{}",
        questions.len(),
        zone.len(),
        questions.len()
    );
    println!(
        "server threads: {} each (unbound num-threads, naming UDP threads); client: 1 thread, \
         {} sockets × {} in flight, {} s per run, best of {} rounds; machine: {} cores",
        args.server_threads,
        args.sockets,
        args.outstanding,
        args.seconds,
        args.rounds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    let wire: Vec<Vec<u8>> = questions
        .iter()
        .map(|(n, t)| query_bytes(0, n, *t))
        .collect();
    let load = Load {
        sockets: args.sockets,
        outstanding: args.outstanding,
        duration: Duration::from_secs(args.seconds),
    };
    let unloaded = Load {
        sockets: 1,
        outstanding: 1,
        duration: Duration::from_secs(args.latency_seconds),
    };
    let shoal_cpu = || thread_cpu_ticks("dns-udp-");
    let unbound_pid = unbound.child.id();
    let unbound_cpu = move || process_cpu_ticks(unbound_pid);
    let mut best: [Option<Figures>; 2] = [None, None];
    for _ in 0..args.rounds.max(1) {
        for (slot, addr, cpu) in [
            (0, shoal, &shoal_cpu as &dyn Fn() -> u64),
            (1, unbound.addr, &unbound_cpu as &dyn Fn() -> u64),
        ] {
            let before = cpu();
            let figures = tokio::task::block_in_place(|| load.run(addr, &wire))?;
            let figures = figures.with_cpu(cpu() - before);
            if best[slot].as_ref().is_none_or(|b| figures.qps > b.qps) {
                best[slot] = Some(figures);
            }
        }
    }
    let [Some(s), Some(u)] = best else {
        bail!("no runs")
    };
    let ls = tokio::task::block_in_place(|| unloaded.run(shoal, &wire))?;
    let lu = tokio::task::block_in_place(|| unloaded.run(unbound.addr, &wire))?;

    println!();
    println!(
        "| figure | naming actor | unbound {} | shoal/unbound |",
        unbound_version(&args.unbound)
    );
    println!("|---|---|---|---|");
    println!(
        "| queries/s under load | {:.0} | {:.0} | **{:.2}×** |",
        s.qps,
        u.qps,
        s.qps / u.qps
    );
    println!(
        "| p50 / p99 latency under load | {} / {} | {} / {} | |",
        us(s.p50),
        us(s.p99),
        us(u.p50),
        us(u.p99)
    );
    println!(
        "| server CPU per query | {} | {} | {:.2}× less CPU |",
        cpu_per_query(&s),
        cpu_per_query(&u),
        cpu_us(&u) / cpu_us(&s)
    );
    println!(
        "| p50 / p99 latency, 1 in flight | {} / {} | {} / {} | |",
        us(ls.p50),
        us(ls.p99),
        us(lu.p50),
        us(lu.p99)
    );
    println!(
        "| lost or wrong answers | {} / {} | {} / {} | |",
        s.lost, s.bad, u.lost, u.bad
    );
    drop(unbound);
    Ok(())
}

fn headless_count(args: &Args) -> usize {
    (0..args.services).filter(|i| is_headless(args, *i)).count()
}

fn is_headless(args: &Args, i: usize) -> bool {
    args.headless_every > 0 && i % args.headless_every == args.headless_every - 1
}

async fn create_services(api: &ApiClient, args: &Args) -> Result<()> {
    let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(32));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..args.services {
        let (api, sem, headless) = (api.clone(), sem.clone(), is_headless(args, i));
        tasks.spawn(async move {
            let _permit = sem.acquire().await;
            let name = format!("svc-{i}");
            let mut spec = serde_json::json!({"ports": [{"name": "http", "port": 80}]});
            if headless {
                spec["clusterIP"] = "None".into();
            }
            let svc: Service = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "default"}, "spec": spec
            }))?;
            api.create(&svc).await?;
            if headless {
                let addresses: Vec<_> = (1..=3)
                    .map(|k| serde_json::json!({"ip": format!("10.{}.{}.{k}", 200 + i / 256, i % 256)}))
                    .collect();
                let ep: Endpoints = serde_json::from_value(serde_json::json!({
                    "metadata": {"name": name, "namespace": "default"},
                    "subsets": [{"addresses": addresses,
                                 "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}]
                }))?;
                api.create(&ep).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

fn questions(args: &Args) -> Vec<(String, RecordType)> {
    (0..args.services)
        .flat_map(|i| {
            [
                (format!("svc-{i}.default.svc.cluster.local."), RecordType::A),
                (
                    format!("_http._tcp.svc-{i}.default.svc.cluster.local."),
                    RecordType::SRV,
                ),
            ]
        })
        .collect()
}

fn query_bytes(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut msg = Message::new(id, MessageType::Query, OpCode::Query);
    msg.metadata.recursion_desired = true;
    msg.add_query(Query::query(
        Name::from_ascii(name).expect("benchmark names are valid"),
        qtype,
    ));
    msg.to_vec().expect("query encodes")
}

fn ask_blocking(server: SocketAddr, name: &str, qtype: RecordType) -> Option<Message> {
    let socket = UdpSocket::bind("127.0.0.1:0").ok()?;
    socket.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    socket
        .send_to(&query_bytes(0x4321, name, qtype), server)
        .ok()?;
    let mut buf = [0u8; 4096];
    let (n, _) = socket.recv_from(&mut buf).ok()?;
    Message::from_vec(&buf[..n]).ok()
}

/// Response code and sorted answer data: what "the same answer" means here.
fn summary(msg: &Message) -> (ResponseCode, Vec<String>) {
    let mut data: Vec<String> = msg.answers.iter().map(|r| r.to_string()).collect();
    data.sort();
    (msg.response_code, data)
}

// ---------------------------------------------------------------------------------------
// unbound

struct Unbound {
    child: Child,
    addr: SocketAddr,
}

impl Unbound {
    fn start(
        binary: &Path,
        dir: &Path,
        zone: &BTreeSet<String>,
        threads: usize,
    ) -> Result<Unbound> {
        let port = free_port()?;
        let conf = dir.join("unbound.conf");
        let mut text = format!(
            "server:\n  interface: 127.0.0.1\n  port: {port}\n  do-ip6: no\n  do-daemonize: no\n  \
             chroot: \"\"\n  username: \"\"\n  directory: \"{dir}\"\n  pidfile: \"{dir}/unbound.pid\"\n  \
             logfile: \"{dir}/unbound.log\"\n  use-syslog: no\n  verbosity: 0\n  \
             num-threads: {threads}\n  so-reuseport: yes\n  access-control: 127.0.0.0/8 allow\n  \
             module-config: \"iterator\"\n  local-zone: \"cluster.local.\" static\n",
            dir = dir.display()
        );
        for record in zone {
            text.push_str(&format!("  local-data: \"{record}\"\n"));
        }
        text.push_str("remote-control:\n  control-enable: no\n");
        std::fs::write(&conf, text)?;
        let child = Command::new(binary)
            .arg("-d")
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut unbound = Unbound {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while ask_blocking(unbound.addr, "cluster.local.", RecordType::SOA).is_none() {
            if let Some(status) = unbound.child.try_wait()? {
                let log = std::fs::read_to_string(dir.join("unbound.log")).unwrap_or_default();
                bail!("unbound exited ({status}): {log}");
            }
            if Instant::now() > deadline {
                bail!("unbound did not answer within 20 s");
            }
        }
        Ok(unbound)
    }
}

impl Drop for Unbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn unbound_version(binary: &Path) -> String {
    Command::new(binary)
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .map(|l| l.trim_start_matches("Version ").to_string())
        })
        .unwrap_or_default()
}

/// A port free for both UDP and TCP on 127.0.0.1 at the time of asking.
fn free_port() -> Result<u16> {
    for _ in 0..32 {
        let udp = UdpSocket::bind("127.0.0.1:0")?;
        let port = udp.local_addr()?.port();
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free port")
}

// ---------------------------------------------------------------------------------------
// CPU time from /proc (clock ticks)

fn ticks(stat: &str) -> u64 {
    // Fields after the last ')' start at field 3; utime and stime are fields 14 and 15.
    let Some(close) = stat.rfind(')') else {
        return 0;
    };
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(14) + field(15)
}

fn process_cpu_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| ticks(&s))
        .unwrap_or(0)
}

/// CPU of this process's threads whose name starts with `prefix`.
fn thread_cpu_ticks(prefix: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix))
        })
        .map(|t| {
            std::fs::read_to_string(t.path().join("stat"))
                .map(|s| ticks(&s))
                .unwrap_or(0)
        })
        .sum()
}

fn clock_ticks_per_second() -> f64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .map_or(100.0, |t| t as f64)
}

// ---------------------------------------------------------------------------------------
// Load generator

struct Load {
    sockets: usize,
    outstanding: usize,
    duration: Duration,
}

struct Figures {
    qps: f64,
    answered: u64,
    p50: Duration,
    p99: Duration,
    lost: u64,
    bad: u64,
    cpu_ticks: u64,
}

impl Figures {
    fn with_cpu(mut self, ticks: u64) -> Figures {
        self.cpu_ticks = ticks;
        self
    }
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn cpu_us(f: &Figures) -> f64 {
    f.cpu_ticks as f64 / clock_ticks_per_second() * 1e6 / f.answered.max(1) as f64
}

fn cpu_per_query(f: &Figures) -> String {
    format!("{:.1} µs", cpu_us(f))
}

/// A query slot: when its query was sent, and the generation its id carries.
#[derive(Clone, Copy)]
struct Slot {
    sent: Option<Instant>,
    generation: u8,
}

/// Replies taken (and replacement queries sent) per system call by the client.
const CLIENT_BATCH: usize = 64;

/// The client's side of one socket: its slots and its batch buffers.
struct Client {
    socket: UdpSocket,
    slots: Vec<Slot>,
    rx: MultiHeaders<SockaddrStorage>,
    tx: MultiHeaders<SockaddrStorage>,
    replies: Vec<Vec<u8>>,
    lens: Vec<usize>,
    outgoing: Vec<Vec<u8>>,
}

/// Round-robin over the questions, stamping slot and generation into the id.
struct Questions<'a> {
    wire: &'a [Vec<u8>],
    next: usize,
}

impl Questions<'_> {
    fn fill(&mut self, slot: usize, s: &mut Slot, packet: &mut Vec<u8>) {
        packet.clear();
        packet.extend_from_slice(&self.wire[self.next % self.wire.len()]);
        self.next += 1;
        s.generation = s.generation.wrapping_add(1);
        packet[0] = s.generation;
        packet[1] = slot as u8;
        s.sent = Some(Instant::now());
    }
}

#[derive(Default)]
struct Tally {
    latencies: Vec<u32>,
    lost: u64,
    bad: u64,
}

impl Client {
    fn new(server: SocketAddr, outstanding: usize) -> Result<Client> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.connect(server)?;
        socket.set_nonblocking(true)?;
        Ok(Client {
            socket,
            slots: vec![
                Slot {
                    sent: None,
                    generation: 0
                };
                outstanding
            ],
            rx: MultiHeaders::preallocate(CLIENT_BATCH, None),
            tx: MultiHeaders::preallocate(CLIENT_BATCH, None),
            replies: vec![vec![0u8; 1500]; CLIENT_BATCH],
            lens: Vec::with_capacity(CLIENT_BATCH),
            outgoing: (0..CLIENT_BATCH).map(|_| Vec::with_capacity(128)).collect(),
        })
    }

    /// Sends `outgoing[..n]` in one call. Queries the kernel refuses are found by the
    /// timeout scan and counted lost.
    fn flush(&mut self, n: usize) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let slices: Vec<[IoSlice<'_>; 1]> = self.outgoing[..n]
            .iter()
            .map(|p| [IoSlice::new(p)])
            .collect();
        let to: Vec<Option<SockaddrStorage>> = vec![None; n];
        let none: [ControlMessage<'_>; 0] = [];
        match sendmmsg(
            self.socket.as_raw_fd(),
            &mut self.tx,
            slices.iter(),
            &to,
            none,
            MsgFlags::empty(),
        ) {
            Ok(_) | Err(Errno::EAGAIN) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Fills every slot.
    fn start(&mut self, questions: &mut Questions<'_>) -> Result<()> {
        let mut n = 0;
        for slot in 0..self.slots.len() {
            questions.fill(slot, &mut self.slots[slot], &mut self.outgoing[n]);
            n += 1;
            if n == CLIENT_BATCH {
                self.flush(n)?;
                n = 0;
            }
        }
        self.flush(n)
    }

    /// Takes every reply queued, and sends a new query for each.
    fn drain(&mut self, questions: &mut Questions<'_>, tally: &mut Tally) -> Result<()> {
        loop {
            self.lens.clear();
            {
                let mut slices: Vec<[IoSliceMut<'_>; 1]> = self
                    .replies
                    .iter_mut()
                    .map(|r| [IoSliceMut::new(r)])
                    .collect();
                match recvmmsg(
                    self.socket.as_raw_fd(),
                    &mut self.rx,
                    slices.iter_mut(),
                    MsgFlags::MSG_DONTWAIT,
                    None,
                ) {
                    Ok(got) => self.lens.extend(got.map(|m| m.bytes)),
                    Err(Errno::EAGAIN) => return Ok(()),
                    Err(Errno::ECONNREFUSED) => {
                        bail!("the server refused the queries: is it running?")
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            let mut n = 0;
            for (i, &len) in self.lens.iter().enumerate() {
                let reply = &self.replies[i][..len];
                if len < 12 {
                    tally.bad += 1;
                    continue;
                }
                let (generation, slot) = (reply[0], reply[1] as usize);
                let Some(s) = self.slots.get_mut(slot) else {
                    tally.bad += 1;
                    continue;
                };
                let (Some(sent), true) = (s.sent, s.generation == generation) else {
                    continue; // a reply to a query already given up on
                };
                // NOERROR with at least one answer, as every question here has.
                if reply[3] & 0x0f != 0 || u16::from_be_bytes([reply[6], reply[7]]) == 0 {
                    tally.bad += 1;
                }
                tally
                    .latencies
                    .push(sent.elapsed().as_nanos().min(u32::MAX as u128) as u32);
                questions.fill(slot, s, &mut self.outgoing[n]);
                n += 1;
            }
            self.flush(n)?;
            if self.lens.len() < CLIENT_BATCH {
                return Ok(());
            }
        }
    }

    /// Re-sends queries unanswered for a second, counting them lost.
    fn expire(&mut self, questions: &mut Questions<'_>, tally: &mut Tally) -> Result<()> {
        let mut n = 0;
        for slot in 0..self.slots.len() {
            let s = &mut self.slots[slot];
            if s.sent.is_some_and(|t| t.elapsed() > Duration::from_secs(1)) {
                tally.lost += 1;
                questions.fill(slot, s, &mut self.outgoing[n]);
                n += 1;
                if n == CLIENT_BATCH {
                    self.flush(n)?;
                    n = 0;
                }
            }
        }
        self.flush(n)
    }
}

impl Load {
    /// Closed loop: every answer (or a 1 s timeout) frees its slot for the next question.
    fn run(&self, server: SocketAddr, wire: &[Vec<u8>]) -> Result<Figures> {
        assert!(self.outstanding <= 256, "ids carry the slot in one byte");
        let mut clients = (0..self.sockets)
            .map(|_| Client::new(server, self.outstanding))
            .collect::<Result<Vec<_>>>()?;
        let mut questions = Questions { wire, next: 0 };
        let mut tally = Tally {
            latencies: Vec::with_capacity(1 << 22),
            ..Default::default()
        };
        for c in &mut clients {
            c.start(&mut questions)?;
        }
        let start = Instant::now();
        let mut last_scan = start;
        while start.elapsed() < self.duration {
            let ready: Vec<bool> = {
                let mut fds: Vec<PollFd> = clients
                    .iter()
                    .map(|c| PollFd::new(c.socket.as_fd(), PollFlags::POLLIN))
                    .collect();
                nix::poll::poll(&mut fds, 10u16)?;
                fds.iter()
                    .map(|f| f.revents().is_some_and(|r| r.contains(PollFlags::POLLIN)))
                    .collect()
            };
            for (c, ready) in clients.iter_mut().zip(ready) {
                if ready {
                    c.drain(&mut questions, &mut tally)?;
                }
            }
            if last_scan.elapsed() > Duration::from_millis(100) {
                last_scan = Instant::now();
                for c in &mut clients {
                    c.expire(&mut questions, &mut tally)?;
                }
            }
        }
        let elapsed = start.elapsed();
        let mut latencies = tally.latencies;
        latencies.sort_unstable();
        let pct = |q: f64| {
            if latencies.is_empty() {
                return Duration::ZERO;
            }
            let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
            Duration::from_nanos(latencies[i] as u64)
        };
        Ok(Figures {
            qps: latencies.len() as f64 / elapsed.as_secs_f64(),
            answered: latencies.len() as u64,
            p50: pct(0.50),
            p99: pct(0.99),
            lost: tally.lost,
            bad: tally.bad,
            cpu_ticks: 0,
        })
    }
}
