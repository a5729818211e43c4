//! Keeps `shoal up`'s own nats-server running. Every actor of the cluster talks only through
//! it, so a server that exits on its own (a crash, an OOM kill, someone's `kill`) would leave
//! a cluster that looks up and does nothing. It is started again on the same port and store,
//! which it recovers; the actors' clients reconnect by themselves. Each exit is reported
//! with what the server printed, so the cause is not lost with the process.

use std::time::Duration;

use shoal_bus::natsd::Natsd;
use tokio::sync::oneshot;

/// The first wait before a restart; doubled after each failed one, up to [`MOST_BETWEEN`].
const FIRST_WAIT: Duration = Duration::from_millis(200);
const MOST_BETWEEN: Duration = Duration::from_secs(10);

/// A watched server; stop it with [`ServerWatch::stop_within`].
pub struct ServerWatch {
    stop: oneshot::Sender<Duration>,
    task: tokio::task::JoinHandle<()>,
}

impl ServerWatch {
    pub fn start(server: Natsd) -> ServerWatch {
        let (stop, stopped) = oneshot::channel();
        ServerWatch {
            stop,
            task: tokio::spawn(watch(server, stopped)),
        }
    }

    /// Stops the server gracefully, killing it after `limit`.
    pub async fn stop_within(self, limit: Duration) {
        if self.stop.send(limit).is_ok() {
            let _ = self.task.await;
        }
    }
}

async fn watch(mut server: Natsd, mut stopped: oneshot::Receiver<Duration>) {
    loop {
        tokio::select! {
            limit = &mut stopped => {
                server.stop_within(limit.unwrap_or_default()).await;
                return;
            }
            status = server.wait() => {
                let Some(status) = status else { return };
                eprintln!("{}", exit_report(&server, status));
            }
        }
        let mut wait = FIRST_WAIT;
        loop {
            tokio::select! {
                limit = &mut stopped => {
                    server.stop_within(limit.unwrap_or_default()).await;
                    return;
                }
                restarted = restart_after(&mut server, wait) => match restarted {
                    Ok(()) => {
                        eprintln!("nats-server is back on {}", server.url());
                        break;
                    }
                    Err(e) => {
                        wait = (wait * 2).min(MOST_BETWEEN);
                        eprintln!("error: restarting nats-server: {e}; trying again in {wait:?}");
                    }
                },
            }
        }
    }
}

async fn restart_after(
    server: &mut Natsd,
    wait: Duration,
) -> Result<(), shoal_bus::natsd::NatsdError> {
    tokio::time::sleep(wait).await;
    server.restart().await
}

fn exit_report(server: &Natsd, status: std::process::ExitStatus) -> String {
    let printed = server.printed();
    let printed = if printed.is_empty() {
        String::new()
    } else {
        format!("; it printed:\n{printed}\n")
    };
    format!(
        "warning: nats-server exited on its own ({status}); its log is {}{printed}; starting it again on the same port and store …",
        server.config().log_path().display()
    )
}
