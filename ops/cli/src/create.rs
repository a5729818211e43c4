//! `shoal create`: objects made from the command line rather than a manifest. For now
//! `create job NAME --from=cronjob/CJ`, kubectl's way to run a CronJob once, now.

use anyhow::{bail, Context, Result};
use bus_schemas::kinds::CronJob;
use clap::{Args, Subcommand};

use crate::kinds;
use crate::remote::Session;

#[derive(Args, Debug)]
pub struct CreateArgs {
    #[command(subcommand)]
    pub what: CreateCommand,
}

#[derive(Subcommand, Debug)]
pub enum CreateCommand {
    /// Create a Job; `--from=cronjob/NAME` takes a CronJob's template and runs it now.
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
        CreateCommand::Job {
            name,
            from,
            namespace,
        } => job_from(session, &name, &from, namespace).await,
    }
}

async fn job_from(
    session: &Session,
    name: &str,
    from: &str,
    namespace: Option<String>,
) -> Result<i32> {
    let (info, source) = kinds::split_slash(from)?;
    let Some(source) = source else {
        bail!("--from takes cronjob/NAME, not {from:?}");
    };
    if info.kind != "CronJob" {
        bail!(
            "--from: cannot create a job from a {}: only from a cronjob",
            info.kind
        );
    }
    let namespace = kinds::namespace_for(info, &namespace);
    let cronjob: CronJob = session
        .api
        .get(&namespace, &source)
        .await
        .with_context(|| format!("reading cronjob {namespace}/{source}"))?;
    let mut job = shoal_controllers::cronjob::manual_job(&cronjob, name);
    job.metadata.namespace = namespace;
    let created = session.api.create(&job).await?;
    println!("job.batch/{} created", created.metadata.name);
    Ok(0)
}
