//! `shoal create`: objects made from the command line rather than a manifest.
//!
//! Layout:
//! - `config`: `create configmap|secret` from literals, files and env files.
//! - `job`: `create job NAME --from=cronjob/CJ`, a CronJob run once, now.

mod config;
mod job;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::remote::Session;

#[derive(Args, Debug)]
pub struct CreateArgs {
    #[command(subcommand)]
    pub what: CreateCommand,
}

#[derive(Subcommand, Debug)]
pub enum CreateCommand {
    /// A ConfigMap from literals, files or env files.
    #[command(visible_alias = "cm")]
    Configmap(config::DataArgs),
    /// A Secret: `generic`, `tls` or `docker-registry`.
    Secret {
        #[command(subcommand)]
        command: config::SecretCommand,
    },
    /// A Job; `--from=cronjob/NAME` takes a CronJob's template and runs it now.
    Job {
        name: String,
        /// `cronjob/NAME` (or `cj/NAME`).
        #[arg(long)]
        from: String,
        #[arg(short = 'n', long)]
        namespace: Option<String>,
    },
}

pub async fn run(session: &Session, args: CreateArgs) -> Result<i32> {
    match args.what {
        CreateCommand::Configmap(data) => config::configmap(session, data).await,
        CreateCommand::Secret { command } => config::secret(session, command).await,
        CreateCommand::Job {
            name,
            from,
            namespace,
        } => job::job_from(session, &name, &from, namespace).await,
    }
}
