//! The hollow runtime's memory budget: <= 2 MiB per simulated node.

use shoal_node::{ContainerSpec, HollowConfig, HollowRuntime, Runtime, SandboxSpec};
use std::time::Duration;

/// Resident set size in bytes (coarse, but an upper bound for what we allocate;
/// a counting allocator would need `unsafe`, which this crate denies in tests).
fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = s
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

#[test]
fn hollow_nodes_fit_the_memory_budget() {
    const NODES: usize = 1000;
    const PODS: usize = 30;
    let before = rss();
    let nodes: Vec<HollowRuntime> = (0..NODES)
        .map(|i| {
            HollowRuntime::new(HollowConfig {
                start_delay: Duration::from_millis(50),
                seed: i as u64 + 1,
                ..Default::default()
            })
        })
        .collect();
    for (n, rt) in nodes.iter().enumerate() {
        for p in 0..PODS {
            let sb = rt
                .create_sandbox(&SandboxSpec::new(
                    format!("pod-{n}-{p}"),
                    format!("pod-{p}"),
                    "ns",
                ))
                .unwrap();
            for c in ["app", "sidecar"] {
                rt.start_container(&sb, &ContainerSpec::new(c, "registry.local/app:1"))
                    .unwrap();
            }
        }
    }
    let per_node = rss().saturating_sub(before) / NODES;
    println!(
        "hollow node with {PODS} pods / {} containers: {per_node} bytes",
        PODS * 2
    );
    assert!(per_node < 2 << 20, "{per_node} bytes per hollow node");
    assert!(
        per_node < 64 << 10,
        "expected a small footprint, got {per_node}"
    );
    assert_eq!(nodes[0].list_containers().unwrap().len(), PODS * 2);
}
