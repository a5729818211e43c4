//! Container start latency: Shoal's runtime vs `runc run`, same busybox rootfs.
//!
//! Measures N runs (default 50) of "start `/bin/true` in a fresh container and
//! reap it" three ways:
//!   * shoal container-only: one sandbox reused; start + wait + remove
//!   * shoal sandbox+container: create sandbox, start, wait, remove sandbox
//!   * runc: `runc run` (create + start + wait + delete) with a fresh id
//!
//! Prints median / p90 / p99 and the shoal/runc ratio. No asserts on timings.
//!
//! Needs root, runc, and the shim built next to this binary:
//!   cargo build --release -p shoal-node --bin shoal-shim
//!   cargo run --release -p shoal-loadtest --bin bench_runtime -- [N]

use shoal_node::net::NetworkConfig;
use shoal_node::{ContainerSpec, LinuxRuntime, Runtime, RuntimeConfig, SandboxInfo, SandboxSpec};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const IMAGE: &str = "bench/busybox:1";

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn report(name: &str, mut v: Vec<Duration>) -> Duration {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "{name:<26} n={:<4} median {:7.2} ms   p90 {:7.2} ms   p99 {:7.2} ms",
        v.len(),
        ms(pct(&v, 0.5)),
        ms(pct(&v, 0.9)),
        ms(pct(&v, 0.99))
    );
    pct(&v, 0.5)
}

fn quiet(cmd: &mut Command) -> bool {
    cmd.stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// Removes the private node namespace and the temp dir even on panic.
struct Cleanup {
    dir: PathBuf,
    netns: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        quiet(Command::new("ip").args(["netns", "del", &self.netns]));
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn runc_bundle(dir: &Path, layer: &Path) -> PathBuf {
    let bundle = dir.join("runc-bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    assert!(
        quiet(
            Command::new("cp")
                .arg("-a")
                .arg(layer)
                .arg(bundle.join("rootfs"))
        ),
        "copy rootfs"
    );
    assert!(
        quiet(Command::new("runc").arg("spec").current_dir(&bundle)),
        "runc spec"
    );
    let path = bundle.join("config.json");
    let mut cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    cfg["process"]["args"] = serde_json::json!(["/bin/true"]);
    cfg["process"]["terminal"] = serde_json::json!(false);
    std::fs::write(&path, serde_json::to_vec_pretty(&cfg).unwrap()).unwrap();
    bundle
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(50);
    let tag = format!("{:x}", std::process::id());
    let dir = std::env::temp_dir().join(format!("shoal-bench-{tag}"));
    let netns = format!("shbench{tag}");
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Cleanup {
        dir: dir.clone(),
        netns: netns.clone(),
    };
    // The bridge lives in a private namespace: nothing touches the host network.
    assert!(
        quiet(Command::new("ip").args(["netns", "add", &netns])),
        "ip netns add"
    );
    let cidr = format!("10.213.{}.0/24", std::process::id() % 250)
        .parse()
        .unwrap();
    let mut net = NetworkConfig::new(format!("shb{tag}"), cidr);
    net.host_netns = Some(PathBuf::from(format!("/run/netns/{netns}")));
    let mut cfg = RuntimeConfig::new(dir.join("state"), net);
    cfg.cgroup_parent = format!("shoalbench-{tag}");
    let rt = LinuxRuntime::new(cfg)
        .expect("runtime (is shoal-shim built next to this binary? or set SHOAL_SHIM)");
    let layout = dir.join("layout");
    shoal_node::testimage::build_busybox_layout(&layout, "bench/busybox", "1").unwrap();
    rt.images().import(&layout).unwrap();
    let info = rt.images().resolve(IMAGE).unwrap();
    let layer = rt.images().unpack(&info.layers[0]).unwrap();
    let spec = ContainerSpec::new("true", IMAGE).command(["/bin/true"]);

    // Per-phase times (start, wait for exit, remove) of the container-only runs.
    let phases = std::cell::RefCell::new([Vec::new(), Vec::new(), Vec::new()]);
    let one = |sb: &SandboxInfo| {
        let t0 = Instant::now();
        let c = rt.start_container(sb, &spec).expect("start");
        let t1 = Instant::now();
        let st = rt.wait_container(&c.id, Duration::from_secs(30)).unwrap();
        assert_eq!(st.exit_code(), Some(0), "{st:?}");
        let t2 = Instant::now();
        rt.remove_container(&c.id).unwrap();
        let mut p = phases.borrow_mut();
        p[0].push(t1 - t0);
        p[1].push(t2 - t1);
        p[2].push(t2.elapsed());
    };

    // Warm-up (page cache, bridge creation).
    let sb = rt
        .create_sandbox(&SandboxSpec::new(
            format!("bench-{tag}"),
            "bench",
            "default",
        ))
        .unwrap();
    for _ in 0..3 {
        one(&sb);
    }
    phases.replace([Vec::new(), Vec::new(), Vec::new()]);
    let mut container_only = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        one(&sb);
        container_only.push(t.elapsed());
    }
    rt.remove_sandbox(&sb.id).unwrap();
    let container_phases = phases.replace([Vec::new(), Vec::new(), Vec::new()]);

    let mut with_sandbox = Vec::with_capacity(n);
    let mut sandbox_create = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let sb = rt
            .create_sandbox(&SandboxSpec::new(
                format!("bench-{tag}-{i}"),
                "bench",
                "default",
            ))
            .unwrap();
        sandbox_create.push(t.elapsed());
        one(&sb);
        rt.remove_sandbox(&sb.id).unwrap();
        with_sandbox.push(t.elapsed());
    }

    let bundle = runc_bundle(&dir, &layer);
    let mut runc = Vec::with_capacity(n);
    for i in 0..n + 3 {
        let id = format!("shoalbench-{tag}-{i}");
        let t = Instant::now();
        let ok = quiet(
            Command::new("runc")
                .args(["run", "--bundle"])
                .arg(&bundle)
                .arg(&id)
                .stdin(Stdio::null()),
        );
        let elapsed = t.elapsed();
        assert!(ok, "runc run failed");
        if i >= 3 {
            runc.push(elapsed);
        }
    }

    println!("start + reap /bin/true in a fresh container, {n} runs each");
    let a = report("shoal container-only", container_only);
    let b = report("shoal sandbox+container", with_sandbox);
    let r = report("runc run", runc);
    let [start, wait, remove] = container_phases;
    println!("container-only phases:");
    report("  start_container", start);
    report("  wait_container", wait);
    report("  remove_container", remove);
    report("create_sandbox alone", sandbox_create);
    println!(
        "ratio shoal/runc (median): container-only {:.2}x, sandbox+container {:.2}x",
        a.as_secs_f64() / r.as_secs_f64(),
        b.as_secs_f64() / r.as_secs_f64()
    );
    let _ = rt
        .cgroup_driver()
        .delete(&rt.config().cgroup_parent, Duration::from_secs(10));
}
