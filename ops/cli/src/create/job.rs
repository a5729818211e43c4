//! `shoal create job NAME --from=cronjob/CJ`: kubectl's way to run a CronJob once, now.

use anyhow::{bail, Context, Result};
use bus_schemas::kinds::CronJob;

use crate::kinds;
use crate::remote::Session;

pub async fn job_from(
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
