//! Starting a real nats-server: a server that cannot bind its port says so at once instead of
//! being probed for the whole readiness limit (`Natsd::start_in` then tries another port),
//! and what it printed on its way out is in the error.

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

#[tokio::test]
async fn what_a_server_prints_before_it_exits_is_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    // A stand-in that fails as nats-server does on a configuration it cannot use: a line on
    // stderr (its log is not open yet), then an exit status.
    let fake = dir.path().join("nats-server");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'nats-server: bad listen address' >&2\nexit 3\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // Each nextest test is a process of its own: the variable reaches this test only.
    std::env::set_var("SHOAL_NATS_SERVER", &fake);

    let result = Natsd::start(NatsdConfig::new(1, dir.path().join("store"))).await;
    let Err(e @ NatsdError::Exited { .. }) = result else {
        panic!("expected the server to exit: {:?}", result.map(|s| s.url()));
    };
    let NatsdError::Exited { said, .. } = &e else {
        unreachable!()
    };
    assert_eq!(said, "nats-server: bad listen address");
    let shown = e.to_string();
    assert!(
        shown.contains("exit status: 3")
            && shown.ends_with("it printed:\nnats-server: bad listen address"),
        "{shown}"
    );
}
