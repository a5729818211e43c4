//! A cloneable shutdown signal: one trigger, any number of waiters.

use tokio::sync::watch;

#[derive(Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

pub struct Trigger {
    tx: watch::Sender<bool>,
}

pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (Trigger { tx }, Shutdown { rx })
}

impl Trigger {
    pub fn fire(&self) {
        self.tx.send_replace(true);
    }
}

impl Drop for Trigger {
    fn drop(&mut self) {
        self.tx.send_replace(true);
    }
}

impl Shutdown {
    /// Resolves once the trigger fires (or is dropped).
    pub async fn wait(mut self) {
        while !*self.rx.borrow_and_update() {
            if self.rx.changed().await.is_err() {
                return;
            }
        }
    }

    pub fn is_fired(&self) -> bool {
        *self.rx.borrow()
    }
}
