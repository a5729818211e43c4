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

async fn watch(mut server: Natsd, stopped: oneshot::Receiver<Duration>) {
    tokio::select! {
        limit = stopped => server.stop_within(limit.unwrap_or_default()).await,
        () = keep_running(&mut server) => {}
    }
}

/// Waits for the server to exit, reports it and starts it again, for as long as it runs.
async fn keep_running(server: &mut Natsd) {
    while let Some(status) = server.wait().await {
        eprintln!(
            "warning: nats-server exited on its own ({status}); starting it again on the same port and store; its log is {}{}",
            server.config().log_path().display(),
            shoal_bus::natsd::what_it_printed(&server.printed()),
        );
        let mut wait = FIRST_WAIT;
        loop {
            tokio::time::sleep(wait).await;
            match server.restart().await {
                Ok(()) => break,
                Err(e) => {
                    wait = (wait * 2).min(MOST_BETWEEN);
                    eprintln!("error: restarting nats-server: {e}; trying again in {wait:?}");
                }
            }
        }
        eprintln!("nats-server is back on {}", server.url());
    }
    // No process to watch: only a stop ends this.
    std::future::pending().await
}
