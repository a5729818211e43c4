//! The time controllers that act on the wall clock (CronJob) read, injectable so tests
//! control it instead of sleeping until a minute turns.
//!
//! [`Clock::System`] is the machine's clock. [`Clock::manual`] is set by whoever holds it
//! (an in-process test). [`Clock::from_bus`] is a manual clock set through the request
//! subject [`bus_schemas::subjects::TEST_CLOCK`], so a test drives the clock of a `shoal up`
//! in another process; `shoal up` selects it only when `SHOAL_TEST_CLOCK=bus`.

use std::sync::Arc;

use bus_schemas::meta::Time;
use futures::StreamExt;
use tokio::sync::watch;

#[derive(Clone, Default)]
pub enum Clock {
    #[default]
    System,
    Manual(Arc<watch::Sender<Time>>),
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Clock::System => f.write_str("Clock::System"),
            Clock::Manual(t) => write!(f, "Clock::Manual({})", *t.borrow()),
        }
    }
}

impl Clock {
    pub fn manual(start: Time) -> Clock {
        Clock::Manual(Arc::new(watch::channel(start).0))
    }

    pub fn now(&self) -> Time {
        match self {
            Clock::System => chrono::Utc::now(),
            Clock::Manual(t) => *t.borrow(),
        }
    }

    /// Moves a manual clock to `t` (a system clock cannot be set).
    pub fn set(&self, t: Time) {
        if let Clock::Manual(tx) = self {
            tx.send_replace(t);
        }
    }

    /// Fires whenever a manual clock is set: a controller re-examines every object then, the
    /// way it would when a requeue delay ran out on a real clock.
    pub fn changes(&self) -> Option<watch::Receiver<Time>> {
        match self {
            Clock::System => None,
            Clock::Manual(t) => Some(t.subscribe()),
        }
    }

    /// A manual clock set by requests on the test-clock subject: the payload is an RFC 3339
    /// time, the reply `ok` once it is set (or the parse error).
    pub async fn from_bus(nats: async_nats::Client, start: Time) -> Result<Clock, String> {
        let clock = Clock::manual(start);
        let mut requests = nats
            .subscribe(bus_schemas::subjects::TEST_CLOCK)
            .await
            .map_err(|e| e.to_string())?;
        let setter = clock.clone();
        tokio::spawn(async move {
            while let Some(msg) = requests.next().await {
                let text = String::from_utf8_lossy(&msg.payload).into_owned();
                let answer = match chrono::DateTime::parse_from_rfc3339(text.trim()) {
                    Ok(t) => {
                        setter.set(t.with_timezone(&chrono::Utc));
                        "ok".to_string()
                    }
                    Err(e) => format!("not an RFC 3339 time {text:?}: {e}"),
                };
                if let Some(reply) = msg.reply {
                    let _ = nats.publish(reply, answer.into()).await;
                }
            }
        });
        Ok(clock)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_set_and_says_so() {
        let start = chrono::Utc::now() - chrono::Duration::days(1);
        let clock = Clock::manual(start);
        let changes = clock.changes().expect("manual clocks report changes");
        assert_eq!(clock.now(), start);
        let later = start + chrono::Duration::minutes(1);
        clock.set(later);
        assert_eq!(clock.now(), later);
        assert!(changes.has_changed().unwrap());
        assert!(Clock::System.changes().is_none());
    }
}
