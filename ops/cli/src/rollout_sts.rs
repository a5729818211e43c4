//! `shoal rollout status|history|undo sts/NAME`: a StatefulSet's rollout read from its
//! status (kubectl's statefulset status viewer) and its ControllerRevisions.

use anyhow::{anyhow, bail, Result};
use bus_schemas::api::ListOptions;
use bus_schemas::kinds::{ControllerRevision, StatefulSet};
use bus_schemas::KindInfo;
use shoal_controllers::statefulset::revisions::template_of;

use crate::remote::Session;
use crate::rollout::{display, Progress};

/// kubectl's statefulset status viewer.
pub fn progress(set: &StatefulSet) -> Result<Progress> {
    let s = &set.status;
    let strategy = set.spec.update_strategy.type_.as_str();
    if !strategy.is_empty() && strategy != "RollingUpdate" {
        bail!("rollout status is only available for RollingUpdate strategy type");
    }
    if s.observed_generation == 0 || set.metadata.generation > s.observed_generation {
        return Ok(Progress::Waiting(
            "Waiting for statefulset spec update to be observed...".into(),
        ));
    }
    let replicas = set.replicas();
    if s.ready_replicas < replicas {
        return Ok(Progress::Waiting(format!(
            "Waiting for {} pods to be ready...",
            replicas - s.ready_replicas
        )));
    }
    let partition = set.partition().unwrap_or(0);
    if partition > 0 {
        let wanted = (replicas - partition).max(0);
        return Ok(if s.updated_replicas < wanted {
            Progress::Waiting(format!(
                "Waiting for partitioned roll out to finish: {} out of {wanted} new pods have been updated...",
                s.updated_replicas
            ))
        } else {
            Progress::Done(format!(
                "partitioned roll out complete: {} new pods have been updated...",
                s.updated_replicas
            ))
        });
    }
    Ok(if s.update_revision != s.current_revision {
        Progress::Waiting(format!(
            "waiting for statefulset rolling update to complete {} pods at revision {}...",
            s.updated_replicas, s.update_revision
        ))
    } else {
        Progress::Done(format!(
            "statefulset rolling update complete {} pods at revision {}...",
            s.current_replicas, s.current_revision
        ))
    })
}

/// The set's ControllerRevisions, newest first.
async fn revisions(session: &Session, set: &StatefulSet) -> Result<Vec<ControllerRevision>> {
    let options = ListOptions {
        namespace: set.metadata.namespace.clone(),
        ..Default::default()
    };
    let mut revisions: Vec<ControllerRevision> = session
        .api
        .list::<ControllerRevision>(&options)
        .await?
        .items
        .into_iter()
        .filter(|r| {
            r.metadata
                .controller_ref()
                .is_some_and(|o| o.uid == set.metadata.uid)
                && !r.metadata.is_deleting()
        })
        .collect();
    revisions.sort_by_key(|r| std::cmp::Reverse(r.revision));
    Ok(revisions)
}

fn numbers(revisions: &[ControllerRevision]) -> String {
    let mut n: Vec<String> = revisions.iter().map(|r| r.revision.to_string()).collect();
    n.reverse();
    if n.is_empty() {
        "none".into()
    } else {
        n.join(", ")
    }
}

pub async fn history(
    session: &Session,
    info: &KindInfo,
    ns: &str,
    name: &str,
    revision: Option<i64>,
) -> Result<i32> {
    let set: StatefulSet = session.api.get(ns, name).await?;
    let revisions = revisions(session, &set).await?;
    if let Some(number) = revision {
        let Some(r) = revisions.iter().find(|r| r.revision == number) else {
            bail!(
                "unable to find revision {number} of {}: available revisions are {}",
                display(info, name),
                numbers(&revisions)
            );
        };
        println!("{} with revision #{number}", display(info, name));
        print!("{}", serde_norway::to_string(&template_of(r))?);
        return Ok(0);
    }
    println!("{}", display(info, name));
    if revisions.is_empty() {
        println!("No rollout history found.");
        return Ok(0);
    }
    println!("{:<10}CHANGE-CAUSE", "REVISION");
    for r in revisions.iter().rev() {
        let cause = r
            .metadata
            .annotations
            .get(crate::rollout::CHANGE_CAUSE_ANNOTATION)
            .map_or("<none>", String::as_str);
        println!("{:<10}{cause}", r.revision);
    }
    Ok(0)
}

pub async fn undo(
    session: &Session,
    info: &KindInfo,
    ns: &str,
    name: &str,
    to: Option<i64>,
) -> Result<i32> {
    let what = display(info, name);
    for _ in 0..10 {
        let mut set: StatefulSet = session.api.get(ns, name).await?;
        let revisions = revisions(session, &set).await?;
        let target = match to.filter(|r| *r != 0) {
            Some(n) => revisions.iter().find(|r| r.revision == n).ok_or_else(|| {
                anyhow!(
                    "unable to find revision {n} of {what}: available revisions are {}",
                    numbers(&revisions)
                )
            })?,
            None => revisions.get(1).ok_or_else(|| {
                anyhow!(
                    "no earlier revision of {what} to roll back to: it has only {}",
                    numbers(&revisions)
                )
            })?,
        };
        let Some(template) = template_of(target) else {
            bail!(
                "revision {} of {what} holds no pod template",
                target.revision
            );
        };
        if template == set.spec.template {
            println!(
                "{what} skipped rollback (current template already matches revision {})",
                target.revision
            );
            return Ok(0);
        }
        set.spec.template = template;
        match session.api.update(&set).await {
            Ok(_) => {
                println!("{what} rolled back");
                return Ok(0);
            }
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!("{what} kept changing while rolling back: try again")
}
