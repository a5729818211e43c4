//! The NATS cluster's health as any client sees it: the servers it knows of (the connect URLs
//! each server gossips) and, per Shoal stream, its Raft leader and whether each other replica
//! is current or lagging. nats-server's `$SYS` views need the system account, which Shoal's
//! identities do not hold: stream info's `cluster` field carries the same per-stream facts.

use async_nats::jetstream;
use bus_schemas::subjects;

/// The streams whose replication `shoal version` reports, state first.
pub fn shoal_streams() -> Vec<String> {
    vec![
        subjects::OBJECTS_STREAM.to_string(),
        format!("OBJ_{}", subjects::IMAGE_STORE),
        subjects::METRICS_STREAM.to_string(),
        subjects::LOGS_STREAM.to_string(),
        subjects::TRACES_STREAM.to_string(),
    ]
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplicaState {
    Current,
    /// Behind the leader by this many operations (when the leader knows).
    Lagging(Option<u64>),
    Offline,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub server: String,
    pub state: ReplicaState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamHealth {
    pub stream: String,
    pub replicas_configured: usize,
    /// The server leading this stream's Raft group; `None` while it has no quorum.
    pub leader: Option<String>,
    /// The followers, as the leader sees them.
    pub followers: Vec<Replica>,
    /// Why the stream's info could not be read (no quorum, missing), when it could not.
    pub error: Option<String>,
}

impl StreamHealth {
    /// The health of stream `name` whose info could not be read, and why.
    pub fn unreadable(name: &str, error: impl Into<String>) -> StreamHealth {
        StreamHealth {
            stream: name.to_string(),
            replicas_configured: 0,
            leader: None,
            followers: Vec::new(),
            error: Some(error.into()),
        }
    }

    /// Every configured replica is the leader or a current follower.
    pub fn fully_replicated(&self) -> bool {
        self.every_follower(|state| *state == ReplicaState::Current)
    }

    /// [`Self::fully_replicated`], except that a follower at most `max_behind` operations
    /// behind counts as keeping up: under a steady stream of writes a healthy follower is
    /// always an entry or two behind whenever the leader is asked.
    pub fn keeping_up(&self, max_behind: u64) -> bool {
        self.every_follower(|state| match state {
            ReplicaState::Current => true,
            ReplicaState::Lagging(Some(behind)) => *behind <= max_behind,
            ReplicaState::Lagging(None) | ReplicaState::Offline => false,
        })
    }

    /// The stream has a leader and every configured follower, each one `ok`.
    fn every_follower(&self, ok: impl Fn(&ReplicaState) -> bool) -> bool {
        self.error.is_none()
            && self.leader.is_some()
            && self.followers.len() + 1 >= self.replicas_configured
            && self.followers.iter().all(|r| ok(&r.state))
    }

    /// `leader s1, s2 current, s3 lagging (12)`: the one-line form the CLI prints.
    pub fn summary(&self) -> String {
        if let Some(e) = &self.error {
            return format!("unavailable: {e}");
        }
        let mut parts = vec![format!(
            "R{} leader {}",
            self.replicas_configured,
            self.leader.as_deref().unwrap_or("none (no quorum)")
        )];
        for r in &self.followers {
            let state = match &r.state {
                ReplicaState::Current => "current".to_string(),
                ReplicaState::Lagging(Some(n)) => format!("lagging ({n} behind)"),
                ReplicaState::Lagging(None) => "lagging".to_string(),
                ReplicaState::Offline => "offline".to_string(),
            };
            parts.push(format!("{} {state}", r.server));
        }
        parts.join(", ")
    }
}

#[derive(Debug, Clone)]
pub struct ClusterHealth {
    /// The server this client is connected to.
    pub connected: String,
    /// The NATS cluster it is a server of (`None`: a server of its own).
    pub cluster: Option<String>,
    /// Client URLs of the cluster's servers, the connected one's included, as it gossips them
    /// (empty for a server outside any cluster).
    pub servers: Vec<String>,
    pub streams: Vec<StreamHealth>,
}

/// The NATS cluster the connected server belongs to (`None`: a server of its own). A
/// clustered server may not have heard of its peers yet, so this, not their URLs, decides.
pub fn cluster_name(info: &async_nats::ServerInfo) -> Option<String> {
    info.cluster.clone().filter(|c| !c.is_empty())
}

/// The client URLs of every server of the connected server's cluster, its own included (a
/// server lists its own beside its peers'), each once; empty outside a cluster.
pub fn cluster_urls(info: &async_nats::ServerInfo) -> Vec<String> {
    let mut urls: Vec<String> = info
        .connect_urls
        .iter()
        .map(|u| u.trim_start_matches("nats://").to_string())
        .collect();
    urls.sort();
    urls.dedup();
    urls
}

fn replica(peer: &jetstream::stream::PeerInfo) -> Replica {
    let state = if peer.offline {
        ReplicaState::Offline
    } else if peer.current {
        ReplicaState::Current
    } else {
        ReplicaState::Lagging(peer.lag)
    };
    Replica {
        server: peer.name.clone(),
        state,
    }
}

/// Reads one stream's replication state; a failure is kept in the result, not returned, so
/// one unavailable stream does not hide the others.
pub async fn stream_health(js: &jetstream::Context, name: &str) -> StreamHealth {
    let info = match js.get_stream(name).await {
        Ok(mut stream) => stream.info().await.cloned().map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let info = match info {
        Ok(info) => info,
        Err(e) => return StreamHealth::unreadable(name, e),
    };
    let (leader, followers) = match info.cluster {
        Some(cluster) => (
            cluster.leader,
            cluster.replicas.iter().map(replica).collect(),
        ),
        None => (None, Vec::new()),
    };
    StreamHealth {
        stream: name.to_string(),
        replicas_configured: info.config.num_replicas.max(1),
        leader,
        followers,
        error: None,
    }
}

impl ClusterHealth {
    pub async fn read(client: &async_nats::Client) -> ClusterHealth {
        let info = client.server_info();
        let js = jetstream::new(client.clone());
        let mut streams = Vec::new();
        for name in shoal_streams() {
            streams.push(stream_health(&js, &name).await);
        }
        ClusterHealth {
            connected: info.server_name.clone(),
            cluster: cluster_name(&info),
            servers: cluster_urls(&info),
            streams,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health(followers: Vec<Replica>) -> StreamHealth {
        StreamHealth {
            stream: "SHOAL_OBJECTS".into(),
            replicas_configured: 3,
            leader: Some("s1".into()),
            followers,
            error: None,
        }
    }

    #[test]
    fn a_lagging_follower_is_not_fully_replicated_and_is_named() {
        let h = health(vec![
            Replica {
                server: "s2".into(),
                state: ReplicaState::Current,
            },
            Replica {
                server: "s3".into(),
                state: ReplicaState::Lagging(Some(12)),
            },
        ]);
        assert!(!h.fully_replicated());
        assert!(!h.keeping_up(11));
        assert!(h.keeping_up(12));
        assert_eq!(
            h.summary(),
            "R3 leader s1, s2 current, s3 lagging (12 behind)"
        );
    }

    #[test]
    fn a_missing_follower_is_not_fully_replicated() {
        let h = health(vec![Replica {
            server: "s2".into(),
            state: ReplicaState::Current,
        }]);
        assert!(!h.fully_replicated());
    }

    #[test]
    fn all_current_is_fully_replicated() {
        let current = |s: &str| Replica {
            server: s.into(),
            state: ReplicaState::Current,
        };
        assert!(health(vec![current("s2"), current("s3")]).fully_replicated());
    }
}
