//! Container logs written by the monitor: streams, rotation, previous, follow.

mod common;

use common::*;
use shoal_node::logs::{LogConfig, Stream};
use shoal_node::Runtime;
use std::time::Duration;

#[test]
fn stdout_stderr_rotation_and_previous_instance() {
    let env = Env::with(|cfg| {
        cfg.log = LogConfig {
            max_size: 600,
            max_files: 2,
        }
    });
    let sb = env.sandbox("logs");
    let c = env.run(
        &sb,
        "app",
        &["sh", "-c", "echo out1; echo err1 >&2; echo out2"],
    );
    env.wait_exit(&c.id);
    let lines = env.rt.logs(&c.id).unwrap().read_tail(10).unwrap();
    let got: Vec<(Stream, &str)> = lines
        .iter()
        .map(|l| (l.stream, l.content.as_str()))
        .collect();
    assert_eq!(got.len(), 3, "{lines:?}");
    assert!(got.contains(&(Stream::Stdout, "out1")) && got.contains(&(Stream::Stderr, "err1")));
    assert_eq!(
        got.iter()
            .filter(|g| g.0 == Stream::Stdout)
            .map(|g| g.1)
            .collect::<Vec<_>>(),
        ["out1", "out2"]
    );
    assert!(lines[0].time.ends_with('Z') && lines[0].time.contains('T'));
    let raw = std::fs::read_to_string(sb.log_dir("app").join("current.log")).unwrap();
    assert!(raw.lines().any(|l| l.ends_with(" stdout F out1")), "{raw}");
    env.rt.remove_container(&c.id).unwrap();

    // Same container name again: a new instance that overflows the tiny limit.
    let c2 = env.run(&sb, "app", &["seq", "1", "300"]);
    env.wait_exit(&c2.id);
    let reader = env.rt.logs(&c2.id).unwrap();
    let tail = reader.read_tail(1000).unwrap();
    assert_eq!(tail.last().unwrap().content, "300", "newest line kept");
    assert!(
        tail.len() < 300 && tail[0].content != "1",
        "oldest lines rotated away ({} kept)",
        tail.len()
    );
    let nums: Vec<u32> = tail.iter().map(|l| l.content.parse().unwrap()).collect();
    assert!(
        nums.windows(2).all(|w| w[1] == w[0] + 1),
        "contiguous newest lines"
    );
    assert!(!sb.log_dir("app").join("current.log.2").exists());
    let prev = reader.previous_tail(10).unwrap();
    // stdout and stderr are separate pipes: only per-stream order is defined.
    let mut prev: Vec<&str> = prev.iter().map(|l| l.content.as_str()).collect();
    prev.sort();
    assert_eq!(prev, ["err1", "out1", "out2"]);
}

#[test]
fn follow_sees_new_lines() {
    let env = Env::new();
    let sb = env.sandbox("follow");
    let c = env.run(
        &sb,
        "ticker",
        &["sh", "-c", "echo first; sleep 0.3; echo second; sleep 1000"],
    );
    let mut f = env.rt.logs(&c.id).unwrap().follow(true).unwrap();
    assert_eq!(
        f.next_line(Duration::from_secs(10)).map(|l| l.content),
        Some("first".into())
    );
    assert_eq!(
        f.next_line(Duration::from_secs(10)).map(|l| l.content),
        Some("second".into())
    );
    assert!(f.next_line(Duration::from_millis(50)).is_none());
    env.rt.stop_container(&c.id, Duration::ZERO).unwrap();
}
