//! `shoal exec POD [-c C] -- CMD…`: runs a command in a running container, through the
//! pod's node agent, and exits with the command's exit code.

use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bus_schemas::api::{ExecReply, ExecRequest};
use bus_schemas::kinds::Pod;
use bus_schemas::{codec, subjects};

use crate::remote::Session;

#[derive(clap::Args, Debug)]
pub struct ExecArgs {
    pub pod: String,
    #[arg(short = 'c', long)]
    pub container: Option<String>,
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Seconds before the command is killed.
    #[arg(long, default_value_t = 60)]
    pub timeout: u32,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

pub async fn run(session: &Session, args: ExecArgs) -> Result<i32> {
    let namespace = args.namespace.clone().unwrap_or_else(|| "default".into());
    let name = args
        .pod
        .trim_start_matches("pod/")
        .trim_start_matches("po/");
    let pod: Pod = session.api.get(&namespace, name).await?;
    if pod.spec.node_name.is_empty() {
        bail!("pod {name:?} is not scheduled to a node yet: nothing runs to exec into");
    }
    let request = ExecRequest {
        namespace: namespace.clone(),
        pod: name.to_string(),
        container: args.container.clone().unwrap_or_default(),
        command: args.command.clone(),
        timeout_seconds: args.timeout,
    };
    let subject = subjects::agent_request(&pod.spec.node_name, "exec");
    let reply = tokio::time::timeout(
        Duration::from_secs(args.timeout as u64 + 10),
        session
            .nats
            .request(subject, codec::to_msgpack(&request)?.into()),
    )
    .await
    .context("the node agent did not answer in time")?
    .with_context(|| {
        format!(
            "node {:?} did not answer: is its agent running?",
            pod.spec.node_name
        )
    })?;
    let reply: ExecReply = codec::from_msgpack(&reply.payload)?;
    if !reply.error.is_empty() {
        bail!("{}", reply.error);
    }
    std::io::stdout().write_all(&reply.stdout)?;
    std::io::stderr().write_all(&reply.stderr)?;
    Ok(reply.exit_code)
}
