//! The command line.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "shoal",
    version,
    about = "Shoal: a container-cluster manager choreographed over NATS"
)]
pub struct Cli {
    /// NATS URL of the cluster.
    #[arg(
        long,
        global = true,
        env = "SHOAL_NATS",
        default_value = "nats://127.0.0.1:4222"
    )]
    pub nats: String,
    /// The credential (an nkey seed file) to connect with. Default: the admin credential
    /// `shoal up` wrote into this user's data dir, when there is one. `shoal up --join`
    /// and `shoal node` take a directory too: each actor then uses `DIR/<identity>.nk`.
    #[arg(long, global = true, env = "SHOAL_CREDS")]
    pub creds: Option<PathBuf>,
    /// The CA certificate of a TLS bus (`shoal up --tls`). Default: the one `shoal up`
    /// wrote into this user's data dir, when there is one.
    #[arg(long, global = true, env = "SHOAL_CA")]
    pub ca: Option<PathBuf>,
    /// More log output (-v info, -vv debug); SHOAL_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Log lines as text, or as JSON objects carrying the trace_id and span_id of their span.
    #[arg(
        long,
        global = true,
        env = "SHOAL_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormatArg,
    /// OTLP collector to send spans to (base URL; OTEL_EXPORTER_OTLP_PROTOCOL picks
    /// http/protobuf, the default, or grpc). Spans also go to the cluster's SHOAL_TRACES.
    #[arg(long, global = true, env = "OTEL_EXPORTER_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Start a one-machine cluster (nats-server + every actor) in the foreground.
    Up(Box<UpArgs>),
    /// Create or update objects from manifests.
    Apply(ApplyArgs),
    /// List objects.
    Get(GetArgs),
    /// Show one object in detail, with its events.
    Describe(DescribeArgs),
    /// Delete objects by name, manifest or selector.
    Delete(DeleteArgs),
    /// Add, change or remove labels.
    Label(LabelArgs),
    /// Add, change or remove annotations.
    Annotate(LabelArgs),
    /// Print client and server versions.
    Version,
    /// Run a node agent for this machine (or many hollow ones for scale tests).
    Node(NodeArgs),
    /// Manage the cluster's image registry.
    Image {
        #[command(subcommand)]
        command: ImageCommand,
    },
    /// Manage a Deployment's (or DaemonSet's) rollout: status, history, undo, pause, resume, restart.
    Rollout {
        #[command(subcommand)]
        command: RolloutCommand,
    },
    /// Set the replica count of a Deployment or ReplicaSet.
    Scale(ScaleArgs),
    /// Create a HorizontalPodAutoscaler for a Deployment or ReplicaSet.
    Autoscale(AutoscaleArgs),
    /// Create an object from the command line: `configmap`, `secret`, `job --from=cronjob/NAME`.
    Create(crate::create::CreateArgs),
    /// Mark a node unschedulable: new pods are no longer placed on it.
    Cordon(NodeNameArgs),
    /// Mark a node schedulable again.
    Uncordon(NodeNameArgs),
    /// Cordon a node, then evict its pods (for maintenance).
    Drain(DrainArgs),
    /// Print a container's logs.
    Logs(crate::logs::LogsArgs),
    /// Run a command in a running container.
    Exec(crate::exec::ExecArgs),
    /// Show CPU and memory use of pods or nodes.
    Top(crate::top::TopArgs),
    /// Issue, list, revoke and describe the identities that may use the bus.
    Creds {
        #[command(subcommand)]
        command: crate::creds::CredsCommand,
    },
    /// Show a trace as a waterfall: `deploy/NAME` (its latest rollout), `pod/NAME`, or a trace id.
    Trace(crate::trace::TraceArgs),
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormatArg {
    Text,
    Json,
}

#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// Node name (default: this machine's hostname).
    #[arg(long)]
    pub name: Option<String>,
    /// The node's pod address range.
    #[arg(long, default_value = "10.244.0.0/24")]
    pub pod_cidr: String,
    /// Where the runtime keeps images, sandboxes and containers.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// The per-node bridge pods attach to.
    #[arg(long, default_value = "shoal0")]
    pub bridge: String,
    /// The node's address, reported as InternalIP.
    #[arg(long, default_value = "")]
    pub host_ip: String,
    /// Restart back-off base in seconds (Kubernetes uses 10).
    #[arg(long, default_value_t = 10)]
    pub backoff_seconds: u64,
    /// Simulated containers (no kernel work): for scale tests only.
    #[arg(long)]
    pub hollow: bool,
    /// With --hollow: how many nodes this process hosts (named NAME-0, NAME-1, …).
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// With --hollow: simulated container start delay in milliseconds.
    #[arg(long, default_value_t = 0)]
    pub start_delay_ms: u64,
    /// With --hollow: fraction of container starts that fail.
    #[arg(long, default_value_t = 0.0)]
    pub failure_rate: f64,
    /// How often pod usage is sampled and published, in seconds (1 to 60): the autoscaler
    /// reacts no faster than this.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub metrics_period: u64,
    #[command(flatten)]
    pub net: crate::node::NodeNetArgs,
    #[command(flatten)]
    pub security: crate::node::NodeSecurityArgs,
}

#[derive(Subcommand, Debug)]
pub enum ImageCommand {
    /// Import an OCI image layout (directory or tar) or a `docker save` tarball.
    Import { path: PathBuf },
    /// List the images the cluster holds.
    Ls,
    /// Build the busybox test image from Debian's busybox-static and import it.
    BuildBusybox {
        #[arg(long, default_value = "shoal/busybox")]
        name: String,
        #[arg(long, default_value = "1.35")]
        tag: String,
    },
}

#[derive(Args, Debug, Clone)]
pub struct UpArgs {
    /// Where the cluster keeps its state (the JetStream store).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Where Prometheus scrapes every actor of this process (`/metrics`); empty: nowhere.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub metrics_addr: String,
    /// Port of the nats-server this command starts.
    #[arg(long, default_value_t = 4222)]
    pub port: u16,
    /// Join an existing NATS (cluster) instead of starting nats-server; start only actors.
    /// `shoal up --nats URL` does the same.
    #[arg(long = "join")]
    pub join: Option<String>,
    /// With --join: create the state stream if it is missing (first start of a new cluster).
    #[arg(long)]
    pub init: bool,
    /// JetStream replicas of the cluster's state (objects, images, usage samples), set when
    /// the cluster is first created (with --join: with --init). Default: 1, or 3 (at most the
    /// number of servers) when this command starts a clustered server (--routes).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=5))]
    pub replicas: Option<u64>,
    /// Name of the nats-server this command starts; distinct per server of a NATS cluster.
    #[arg(long, default_value = "shoal")]
    pub server_name: String,
    /// Address the nats-server this command starts serves clients on; 0.0.0.0 to let actors
    /// and nodes of other machines join.
    #[arg(long, default_value = "127.0.0.1")]
    pub nats_host: String,
    /// With --routes: where this server listens for its peers' routes.
    #[arg(long, default_value = "0.0.0.0:6222")]
    pub cluster_listen: String,
    /// Form a NATS cluster with these peers' route URLs (comma list, e.g.
    /// nats://h2:6222,nats://h3:6222); the server also serves monitoring on port 8222.
    #[arg(long)]
    pub routes: Option<String>,
    /// Name of this machine's node (default: the hostname).
    #[arg(long)]
    pub node_name: Option<String>,
    /// With --join: the server's monitoring endpoint, checked for durability settings.
    #[arg(long)]
    pub monitor: Option<String>,
    /// Do not run a node agent for this machine.
    #[arg(long)]
    pub no_node: bool,
    /// The bridge this machine's pods attach to.
    #[arg(long, default_value = "shoal0")]
    pub bridge: String,
    /// Pod address range of this machine's node.
    #[arg(long, default_value = "10.244.0.0/24")]
    pub pod_cidr: String,
    /// The actors this process runs, as a comma list (`--no-node` drops `node`). Without
    /// `api`, --join is required: the API runs in another process of that cluster.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "api,controllers,scheduler,naming,autoscaler,node,gateway"
    )]
    pub actors: Vec<UpActor>,
    /// How often this machine's node samples pod usage, in seconds (1 to 60).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60))]
    pub metrics_period: u64,
    /// This machine's node: --allow-host-path (none by default) and --seccomp-profile-root.
    #[command(flatten)]
    pub node_security: crate::node::NodeSecurityArgs,
    /// Where the Kubernetes API gateway serves HTTPS (stock kubectl and client libraries);
    /// `shoal up` writes a kubeconfig for it into the data dir.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub gateway_listen: std::net::SocketAddr,
    /// Where the naming actor serves cluster DNS (UDP and TCP). Default: port 53 on the
    /// pod gateway of --pod-cidr, which is where this machine's node points its pods.
    /// Without a node in this process, naming runs only when this is given.
    #[arg(long)]
    pub dns_listen: Option<std::net::SocketAddr>,
    /// With --join: the controllers run behind leader election on this lease (seconds);
    /// a standby takes over this long after the leader stopped renewing.
    #[arg(long, default_value_t = 15, value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub lease_seconds: u64,
    /// How long a deleted object stays in the state log (watchable, its tombstone listed
    /// to watchers) before the API purges its subject: `90s`, `30m`, `1h`. A watch from
    /// before a purge gets 410 Gone and relists. Give every API replica the same value.
    #[arg(long, default_value = "1h", value_parser = parse_retention)]
    pub deleted_retention: std::time::Duration,
    /// How long an Event lives after its last write (Kubernetes' --event-ttl).
    #[arg(long, default_value = "1h", value_parser = parse_retention)]
    pub event_ttl: std::time::Duration,
    /// The Secret encryption key file (`NAME:BASE64` lines; the first encrypts, all
    /// decrypt), created with one key when missing. Default: DATA_DIR/secrets.key. Every
    /// API replica of a cluster needs the same file.
    #[arg(long)]
    pub secret_key_file: Option<PathBuf>,
    /// Clients (and the routes of a NATS cluster) speak TLS: a CA and a server certificate
    /// are made on first start in DATA_DIR/auth/tls/, and clients need that CA (`--ca`,
    /// SHOAL_CA; the CLI of this machine's user finds it by default).
    #[arg(long)]
    pub tls: bool,
    /// The global --creds: with --join, the actors' credential (a file, or a directory of
    /// `<identity>.nk` files).
    #[arg(skip)]
    pub creds: Option<PathBuf>,
    /// The global --ca.
    #[arg(skip)]
    pub ca: Option<PathBuf>,
}

/// What `shoal up --actors` can start.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpActor {
    Api,
    Controllers,
    Scheduler,
    /// Cluster DNS: answers from the caches, no leader, one replica per node is fine.
    Naming,
    Node,
    /// HorizontalPodAutoscalers: leader-elected like the controllers when joined.
    Autoscaler,
    /// The Kubernetes API gateway (HTTPS): stateless, any number of replicas.
    Gateway,
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    /// File, directory or `-` (stdin); may repeat.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Accepted for kubectl compatibility: Shoal's apply is always server-side.
    #[arg(long)]
    pub server_side: bool,
    /// The name this apply owns its fields under.
    #[arg(long, default_value = shoal_bus::client::DEFAULT_APPLY_MANAGER)]
    pub field_manager: String,
    /// Take over fields other managers own instead of failing with a conflict.
    #[arg(long)]
    pub force_conflicts: bool,
    /// Delete objects of the applied kinds that match `-l`, were last applied by this field
    /// manager and are not in the manifests.
    #[arg(long, requires = "selector")]
    pub prune: bool,
    /// The label selector `--prune` is limited to.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
}

#[derive(Args, Debug)]
pub struct GetArgs {
    /// KIND[,KIND…] (pods, po, deploy,svc …).
    pub kinds: String,
    pub name: Option<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[arg(long)]
    pub field_selector: Option<String>,
    /// wide, yaml, json or name.
    #[arg(short = 'o', long)]
    pub output: Option<String>,
    /// After listing, keep printing changes.
    #[arg(short = 'w', long)]
    pub watch: bool,
    #[arg(long)]
    pub show_labels: bool,
    /// Print tables without their header line.
    #[arg(long)]
    pub no_headers: bool,
    /// A named object that does not exist is no error.
    #[arg(long)]
    pub ignore_not_found: bool,
    /// With `-w`: print only changes, not the list first.
    #[arg(long)]
    pub watch_only: bool,
    /// Prefix names with their kind (`pod/web-1`), as when several kinds are listed.
    #[arg(long)]
    pub show_kind: bool,
    /// Keep `metadata.managedFields` in `-o yaml|json` (left out by default, as kubectl does).
    #[arg(long)]
    pub show_managed_fields: bool,
}

#[derive(Args, Debug)]
pub struct DescribeArgs {
    pub kind: String,
    pub name: String,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct DeleteArgs {
    pub kind: Option<String>,
    pub names: Vec<String>,
    #[arg(short = 'f', long = "filename")]
    pub files: Vec<String>,
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// background, foreground or orphan.
    #[arg(long, default_value = "background")]
    pub cascade: String,
    #[arg(long)]
    pub grace_period: Option<i64>,
    /// Remove the objects from the API at once, without waiting for their node to confirm
    /// (kubectl's --force: a grace period of 0 unless --grace-period says otherwise).
    #[arg(long)]
    pub force: bool,
    /// Do not fail when the object does not exist.
    #[arg(long)]
    pub ignore_not_found: bool,
    /// Return only once the objects are gone: their finalizers done, their pods' containers
    /// stopped by their nodes. kubectl waits by default; shoal returns at once unless asked
    /// (`--wait`, `--wait=true`).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub wait: bool,
    /// With --wait: give up after this long (e.g. 90s, 5m; 0 waits forever).
    #[arg(long, default_value = "0s")]
    pub timeout: String,
}

#[derive(Args, Debug)]
pub struct LabelArgs {
    pub kind: String,
    pub name: String,
    /// key=value to set, key- to remove.
    #[arg(required = true)]
    pub changes: Vec<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Allow replacing an existing value.
    #[arg(long)]
    pub overwrite: bool,
}

#[derive(Subcommand, Debug)]
pub enum RolloutCommand {
    /// Wait for a rollout to finish, printing its progress.
    Status(RolloutStatusArgs),
    /// List a Deployment's revisions, or show one revision's pod template.
    History(RolloutHistoryArgs),
    /// Roll back to an earlier revision (default: the previous one).
    Undo(RolloutUndoArgs),
    /// Stop rolling out template changes until resumed.
    Pause(RolloutTarget),
    /// Resume a paused rollout.
    Resume(RolloutTarget),
    /// Replace every pod, by changing the template's restartedAt annotation.
    Restart(RolloutTarget),
}

/// `deploy/NAME`, or `deploy NAME`.
#[derive(Args, Debug)]
pub struct RolloutTarget {
    pub kind: String,
    pub name: Option<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct RolloutStatusArgs {
    #[command(flatten)]
    pub target: RolloutTarget,
    /// Give up after this long (e.g. 90s, 5m; 0 waits forever).
    #[arg(long, default_value = "0s")]
    pub timeout: String,
    /// Wait for the rollout to finish; -w=false prints the current status once.
    #[arg(short = 'w', long, default_value_t = true, action = clap::ArgAction::Set)]
    pub watch: bool,
}

#[derive(Args, Debug)]
pub struct RolloutHistoryArgs {
    #[command(flatten)]
    pub target: RolloutTarget,
    /// Show this revision's pod template.
    #[arg(long)]
    pub revision: Option<i64>,
}

#[derive(Args, Debug)]
pub struct RolloutUndoArgs {
    #[command(flatten)]
    pub target: RolloutTarget,
    /// The revision to roll back to (default: the previous one).
    #[arg(long)]
    pub to_revision: Option<i64>,
}

#[derive(Args, Debug)]
pub struct AutoscaleArgs {
    /// `deploy/NAME` or `rs/NAME` (or KIND followed by NAME).
    pub target: String,
    #[arg(value_name = "NAME")]
    pub name_arg: Option<String>,
    /// Lower bound of replicas (default 1).
    #[arg(long)]
    pub min: Option<i32>,
    /// Upper bound of replicas.
    #[arg(long)]
    pub max: i32,
    /// Target average CPU utilization, percent of the pods' requests (default 80).
    #[arg(long)]
    pub cpu_percent: Option<i32>,
    /// The HPA's name (default: the workload's).
    #[arg(long)]
    pub name: Option<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct ScaleArgs {
    /// `deploy/NAME`, or KIND followed by NAME (deployments and replicasets).
    pub kind: String,
    pub name: Option<String>,
    #[arg(long)]
    pub replicas: i32,
    /// Only scale if the object has this many replicas now.
    #[arg(long)]
    pub current_replicas: Option<i32>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
}

#[derive(Args, Debug)]
pub struct NodeNameArgs {
    pub node: String,
}

#[derive(Args, Debug)]
pub struct DrainArgs {
    pub node: String,
    /// Leave DaemonSet-managed pods in place (their controller would recreate them anyway).
    #[arg(long)]
    pub ignore_daemonsets: bool,
    /// Evict pods with emptyDir volumes (their data is lost).
    #[arg(long)]
    pub delete_emptydir_data: bool,
    /// Evict pods no controller manages (nothing recreates them).
    #[arg(long)]
    pub force: bool,
    /// Seconds each pod gets to stop; negative uses the pod's own terminationGracePeriodSeconds.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub grace_period: i64,
    /// Give up waiting for the pods to go after this long (e.g. 2m; 0 waits forever).
    #[arg(long, default_value = "0s")]
    pub timeout: String,
}

/// `N` seconds, or `N` followed by `s`, `m`, `h` or `d`; at least one second.
pub fn parse_retention(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let (digits, unit) = match text.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?}: expected a number and a unit, like 90s, 30m or 1h"))?;
    let per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        other => return Err(format!("{text:?}: unknown unit {other:?} (s, m, h or d)")),
    };
    if n == 0 {
        return Err(format!("{text:?}: must be at least one second"));
    }
    n.checked_mul(per)
        .map(std::time::Duration::from_secs)
        .ok_or_else(|| format!("{text:?}: too long"))
}

#[cfg(test)]
mod retention_tests {
    use super::parse_retention;
    use std::time::Duration;

    #[test]
    fn retentions_parse_with_units_and_bad_ones_say_why() {
        assert_eq!(parse_retention("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_retention("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_retention("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_retention("5"), Ok(Duration::from_secs(5)));
        assert!(parse_retention("0s").unwrap_err().contains("at least"));
        assert!(parse_retention("3w").unwrap_err().contains("unknown unit"));
        assert!(parse_retention("h")
            .unwrap_err()
            .contains("expected a number"));
    }
}
