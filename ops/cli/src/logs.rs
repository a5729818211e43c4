//! `shoal logs`: container log lines from the bounded `SHOAL_LOGS` stream, where node agents
//! ship them. No connection to the node is needed, and lines outlive a deleted pod a while.

use anyhow::{bail, Result};
use async_nats::jetstream::consumer::{pull::OrderedConfig, DeliverPolicy};
use bus_schemas::api::ListOptions;
use bus_schemas::kinds::Pod;
use bus_schemas::subjects;
use futures::StreamExt;

use crate::remote::Session;

#[derive(clap::Args, Debug)]
pub struct LogsArgs {
    /// The pod (or use -l).
    pub pod: Option<String>,
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Pods matching a label selector (with -f, all of them, lines prefixed).
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Keep printing new lines.
    #[arg(short = 'f', long)]
    pub follow: bool,
    /// The previous instance of a restarted container.
    #[arg(short = 'p', long)]
    pub previous: bool,
    /// Only the last N lines.
    #[arg(long)]
    pub tail: Option<usize>,
    /// Prefix lines with their time.
    #[arg(long)]
    pub timestamps: bool,
}

struct Target {
    pod: Pod,
    container: String,
    instance: String,
    prefix: Option<String>,
}

fn instance_of(pod: &Pod, container: &str, previous: bool) -> String {
    let status = pod
        .status
        .container_statuses
        .iter()
        .chain(&pod.status.init_container_statuses)
        .find(|c| c.name == container);
    let id = match status {
        Some(s) if previous => s
            .last_state
            .terminated
            .as_ref()
            .map(|t| t.container_id.clone())
            .unwrap_or_default(),
        Some(s) => s.container_id.clone(),
        None => String::new(),
    };
    id.trim_start_matches("shoal://").to_string()
}

pub async fn run(session: &Session, args: LogsArgs) -> Result<i32> {
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    let pods: Vec<Pod> = match (&args.pod, &args.selector) {
        (Some(name), _) => {
            let name = name.trim_start_matches("pod/").trim_start_matches("po/");
            vec![session.api.get::<Pod>(&namespace, name).await?]
        }
        (None, Some(selector)) => {
            let options = ListOptions {
                namespace: namespace.clone(),
                label_selector: selector.clone(),
                ..Default::default()
            };
            session.api.list::<Pod>(&options).await?.items
        }
        (None, None) => bail!("name a pod, or select pods with -l SELECTOR"),
    };
    if pods.is_empty() {
        eprintln!("No resources found in {namespace} namespace.");
        return Ok(0);
    }
    let many = pods.len() > 1 || args.selector.is_some();
    let mut targets = Vec::new();
    for pod in pods {
        let containers: Vec<String> = match &args.container {
            Some(c) => vec![c.clone()],
            None if many => pod.spec.containers.iter().map(|c| c.name.clone()).collect(),
            None if pod.spec.containers.len() == 1 => vec![pod.spec.containers[0].name.clone()],
            None => bail!(
                "a container name must be specified for pod {}, choose one of: [{}]",
                pod.metadata.name,
                pod.spec
                    .containers
                    .iter()
                    .map(|c| c.name.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        };
        for container in containers {
            let instance = instance_of(&pod, &container, args.previous);
            if args.previous && instance.is_empty() {
                bail!(
                    "previous terminated container {container:?} in pod {:?} not found",
                    pod.metadata.name
                );
            }
            let prefix = many.then(|| format!("[pod/{}/{}] ", pod.metadata.name, container));
            targets.push(Target {
                pod: pod.clone(),
                container,
                instance,
                prefix,
            });
        }
    }
    let js = async_nats::jetstream::new(session.nats.clone());
    let stream = js
        .get_stream(subjects::LOGS_STREAM)
        .await
        .map_err(|e| anyhow::anyhow!("log stream unavailable: {e}"))?;
    let mut tasks = Vec::new();
    for target in targets {
        let stream = stream.clone();
        let (follow, tail, timestamps) =
            (args.follow && !args.previous, args.tail, args.timestamps);
        tasks.push(tokio::spawn(async move {
            print_target(stream, target, follow, tail, timestamps).await
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(0)
}

async fn print_target(
    stream: async_nats::jetstream::stream::Stream,
    target: Target,
    follow: bool,
    tail: Option<usize>,
    timestamps: bool,
) -> Result<()> {
    let subject = subjects::logs_of(
        &target.pod.metadata.namespace,
        &target.pod.metadata.name,
        &target.container,
    );
    let consumer = stream
        .create_consumer(OrderedConfig {
            filter_subject: subject,
            deliver_policy: DeliverPolicy::All,
            ..Default::default()
        })
        .await?;
    let mut consumer = consumer;
    let mut pending = consumer.info().await?.num_pending;
    let mut messages = consumer.messages().await?;
    let format = |body: &[u8]| {
        let text = String::from_utf8_lossy(body);
        let line = if timestamps {
            text.to_string()
        } else {
            text.split_once(' ')
                .map(|(_, l)| l.to_string())
                .unwrap_or_default()
        };
        format!("{}{line}", target.prefix.as_deref().unwrap_or(""))
    };
    let mine = |msg: &async_nats::jetstream::Message| {
        target.instance.is_empty()
            || msg
                .headers
                .as_ref()
                .and_then(|h| h.get(subjects::HEADER_CONTAINER_ID))
                .is_some_and(|v| v.as_str() == target.instance)
    };
    // The backlog first (honouring --tail), then, with -f, whatever arrives.
    let mut backlog = std::collections::VecDeque::new();
    while pending > 0 {
        let Some(msg) = messages.next().await else {
            break;
        };
        let msg = msg?;
        pending = msg.info().map(|i| i.pending).unwrap_or(0);
        if mine(&msg) {
            backlog.push_back(format(&msg.payload));
            if tail.is_some_and(|n| backlog.len() > n) {
                backlog.pop_front();
            }
        }
    }
    for line in backlog {
        println!("{line}");
    }
    if !follow {
        return Ok(());
    }
    while let Some(msg) = messages.next().await {
        let msg = msg?;
        // A restarted container writes under a new instance: follow the newest.
        if mine(&msg)
            || target.instance.is_empty()
            || msg
                .headers
                .as_ref()
                .and_then(|h| h.get(subjects::HEADER_CONTAINER_ID))
                .is_some()
        {
            println!("{}", format(&msg.payload));
        }
    }
    Ok(())
}
