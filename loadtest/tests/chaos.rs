//! The chaos suite's short form: a minute of churn on the three-host R3 cluster with a few
//! faults (an actor SIGKILLed, a nats-server SIGKILLed and restarted, a host cut off for
//! 10 s), then the history check. The run exits non-zero on any violation; this test passes
//! only if it exits zero. Every process the run starts dies with it (its children are
//! killed on drop and tied to it), and the run dies with this test: killed if it outlives
//! its deadline, and tied to the test's thread should nextest kill the test first.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use shoal_bus::tied::TiedToThisThread;

struct Run(std::process::Child);

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_short_chaos_run_loses_and_duplicates_nothing() {
    let loadtest = std::path::PathBuf::from(env!("CARGO_BIN_EXE_shoal-loadtest"));
    let shoal = loadtest.with_file_name("shoal");
    assert!(
        shoal.is_file(),
        "{} is missing: build the workspace (cargo build -p shoal-cli) before this test",
        shoal.display()
    );
    let log = std::env::temp_dir().join(format!("shoal-chaos-{}.log", std::process::id()));
    let out = std::fs::File::create(&log).unwrap();
    let mut run = Run(Command::new(&loadtest)
        .args([
            "chaos",
            "--seconds",
            "60",
            "--fault-every",
            "12",
            "--nodes-per-host",
            "1",
            "--deployments",
            "2",
            "--throughput-writes",
            "300",
            "--settle-seconds",
            "60",
        ])
        .arg("--shoal-bin")
        .arg(&shoal)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .tied_to_this_thread()
        .spawn()
        .unwrap());
    let deadline = Instant::now() + Duration::from_secs(900);
    let status = loop {
        if let Some(status) = run.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the chaos run did not finish within 15 minutes; its output is in {}",
            log.display()
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let output = std::fs::read_to_string(&log).unwrap_or_default();
    println!("{output}");
    assert!(
        status.success(),
        "the chaos run failed ({status}):\n{output}"
    );
    assert!(output.contains("faults injected:"), "{output}");
    assert!(output.contains(" 0 lost, 0 duplicated"), "{output}");
    let _ = std::fs::remove_file(&log);
}
