//! Starting a real nats-server: a server that cannot bind its port says so at once instead of
//! being probed for the whole readiness limit (`Natsd::start_in` then tries another port).

use std::time::{Duration, Instant};

use shoal_bus::natsd::{Natsd, NatsdConfig, NatsdError};

#[tokio::test]
async fn a_server_whose_port_is_taken_fails_at_once_naming_its_log() {
    let dir = tempfile::tempdir().unwrap();
    // Another process's listener on the port, as when a parallel test took it first.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();

    let started = Instant::now();
    let result = Natsd::start(NatsdConfig::new(port, dir.path())).await;
    let Err(NatsdError::Exited {
        port: reported,
        log,
        ..
    }) = result
    else {
        panic!("expected the server to exit: {:?}", result.map(|s| s.url()));
    };
    assert_eq!(reported, port);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "waited {:?}: the readiness probe ignored the exit",
        started.elapsed()
    );
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        logged.contains(&port.to_string()),
        "the log names the port it could not bind: {logged}"
    );
}
