//! `shoal rollout status|history|undo|pause|resume|restart`, as kubectl does them.
//!
//! The deployment controller does the rollouts; these commands only read its bookkeeping and
//! change the Deployment's spec:
//! - revisions are the `deployment.kubernetes.io/revision` annotations of the ReplicaSets the
//!   Deployment controls (controller ownerReference), one per pod template;
//! - undo copies an old ReplicaSet's template (minus `pod-template-hash`) back into the
//!   Deployment, and the controller makes that ReplicaSet the newest revision again;
//! - restart changes the template's `kubectl.kubernetes.io/restartedAt` annotation, so the
//!   template hash (and with it every pod) changes.

use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use bus_schemas::api::{ListOptions, PatchRequest};
use bus_schemas::kinds::{DaemonSet, Deployment, ReplicaSet};
use bus_schemas::meta::find_condition;
use bus_schemas::KindInfo;
use bus_schemas::Resource;
use shoal_controllers::deployment::{revision_of, strip_hash, RESTARTED_AT_ANNOTATION};

use crate::cli::{
    RolloutCommand, RolloutHistoryArgs, RolloutStatusArgs, RolloutTarget, RolloutUndoArgs,
};
use crate::kinds;
use crate::remote::Session;

/// Annotation kubectl's `--record` (and people) put on a Deployment to say why it changed.
pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";
/// How often `rollout status` and `drain` look again.
pub const POLL: Duration = Duration::from_millis(250);
/// Conflicting writers are rare for these commands; a few re-reads settle them.
const CONFLICT_RETRIES: usize = 10;

/// `deployment.apps/web`, `node/n1`: kind, API group and name, as kubectl prints them.
pub fn display(info: &KindInfo, name: &str) -> String {
    match info.api_version.split_once('/') {
        Some((group, _)) => format!("{}.{group}/{name}", info.singular()),
        None => format!("{}/{name}", info.singular()),
    }
}

/// `deploy/web` or `deploy web` → (Deployment, "web").
pub fn target(kind: &str, name: Option<&str>, usage: &str) -> Result<(&'static KindInfo, String)> {
    if kind.contains('/') {
        if name.is_some() {
            bail!("give either KIND/NAME or KIND NAME, not both (e.g. `{usage}`)");
        }
        let (info, name) = kinds::split_slash(kind)?;
        match name.filter(|n| !n.is_empty()) {
            Some(name) => Ok((info, name)),
            None => bail!("missing name after {kind:?} (e.g. `{usage}`)"),
        }
    } else {
        let info = kinds::resolve(kind)?;
        match name {
            Some(name) => Ok((info, name.to_string())),
            None => bail!("which {}? give its name (e.g. `{usage}`)", info.singular()),
        }
    }
}

/// `90`, `90s`, `5m`, `1h30m`, `500ms`; zero means no limit (None).
pub fn parse_timeout(text: &str) -> Result<Option<Duration>> {
    let bad = || anyhow!("invalid duration {text:?}: use a number with a unit, like 90s, 5m or 1h");
    let text = text.trim();
    if text.is_empty() {
        return Err(bad());
    }
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok((seconds > 0).then(|| Duration::from_secs(seconds)));
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(number * scale).map_err(|_| bad())?;
    }
    Ok((!total.is_zero()).then_some(total))
}

pub async fn run(session: &Session, command: RolloutCommand) -> Result<i32> {
    match command {
        RolloutCommand::Status(args) => status(session, args).await,
        RolloutCommand::History(args) => history(session, args).await,
        RolloutCommand::Undo(args) => undo(session, args).await,
        RolloutCommand::Pause(t) => set_paused(session, t, true).await,
        RolloutCommand::Resume(t) => set_paused(session, t, false).await,
        RolloutCommand::Restart(t) => restart(session, t).await,
    }
}

/// Resolves a rollout target and checks its kind is one of `allowed`.
fn resolve(
    t: &RolloutTarget,
    verb: &str,
    allowed: &[&str],
) -> Result<(&'static KindInfo, String, String)> {
    let usage = format!("shoal rollout {verb} deploy/NAME");
    let (info, name) = target(&t.kind, t.name.as_deref(), &usage)?;
    if !allowed.contains(&info.kind) {
        bail!(
            "rollout {verb} is not supported for {}: it works on {}",
            info.plural,
            allowed
                .iter()
                .map(|k| k.to_ascii_lowercase() + "s")
                .collect::<Vec<_>>()
                .join(" and ")
        );
    }
    let namespace = kinds::namespace_for(info, &t.namespace);
    Ok((info, namespace, name))
}

// ---------------------------------------------------------------------------------------
// status

/// Where a rollout stands: a progress line, or done.
#[derive(Debug, PartialEq)]
pub(crate) enum Progress {
    Waiting(String),
    Done(String),
}

/// kubectl's deployment status viewer, plus the rule that every replica beyond the desired
/// count is gone (status.replicas == spec.replicas) before the rollout counts as finished.
fn deployment_progress(d: &Deployment) -> Result<Progress> {
    let name = &d.metadata.name;
    if d.metadata.generation > d.status.observed_generation {
        return Ok(Progress::Waiting(
            "Waiting for deployment spec update to be observed...".into(),
        ));
    }
    if let Some(c) = find_condition(&d.status.conditions, "Progressing") {
        if c.reason == "ProgressDeadlineExceeded" {
            bail!(
                "deployment {name:?} exceeded its progress deadline{}: see `shoal describe deploy {name}` and its pods; `shoal rollout undo deploy/{name}` goes back to the previous revision",
                if c.message.is_empty() { String::new() } else { format!(" ({})", c.message) }
            );
        }
    }
    let s = &d.status;
    let want = d.replicas();
    let line = |what: String| {
        Progress::Waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {what}..."
        ))
    };
    Ok(if s.updated_replicas < want {
        line(format!(
            "{} out of {want} new replicas have been updated",
            s.updated_replicas
        ))
    } else if s.replicas > s.updated_replicas {
        line(format!(
            "{} old replicas are pending termination",
            s.replicas - s.updated_replicas
        ))
    } else if s.available_replicas < s.updated_replicas {
        line(format!(
            "{} of {} updated replicas are available",
            s.available_replicas, s.updated_replicas
        ))
    } else if s.replicas != want || s.available_replicas != want {
        line(format!(
            "{} of {want} updated replicas are available",
            s.available_replicas.min(want)
        ))
    } else {
        Progress::Done(format!("deployment {name:?} successfully rolled out"))
    })
}

fn daemonset_progress(ds: &DaemonSet) -> Result<Progress> {
    let name = &ds.metadata.name;
    let strategy = ds.spec.update_strategy.type_.as_str();
    if !strategy.is_empty() && strategy != "RollingUpdate" {
        bail!("rollout status is only available for the RollingUpdate strategy; daemon set {name:?} uses {strategy}");
    }
    if ds.metadata.generation > ds.status.observed_generation {
        return Ok(Progress::Waiting(
            "Waiting for daemon set spec update to be observed...".into(),
        ));
    }
    let s = &ds.status;
    let line = |what: String| {
        Progress::Waiting(format!(
            "Waiting for daemon set {name:?} rollout to finish: {what}..."
        ))
    };
    Ok(if s.updated_number_scheduled < s.desired_number_scheduled {
        line(format!(
            "{} out of {} new pods have been updated",
            s.updated_number_scheduled, s.desired_number_scheduled
        ))
    } else if s.number_available < s.desired_number_scheduled {
        line(format!(
            "{} of {} updated pods are available",
            s.number_available, s.desired_number_scheduled
        ))
    } else {
        Progress::Done(format!("daemon set {name:?} successfully rolled out"))
    })
}

async fn status(session: &Session, args: RolloutStatusArgs) -> Result<i32> {
    let kinds = ["Deployment", "DaemonSet", "StatefulSet"];
    let (info, ns, name) = resolve(&args.target, "status", &kinds)?;
    let timeout = parse_timeout(&args.timeout).context("--timeout")?;
    let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
    let mut last = String::new();
    loop {
        let progress = if info.kind == "StatefulSet" {
            crate::rollout_sts::progress(&session.api.get(&ns, &name).await?)?
        } else if info.kind == "Deployment" {
            let d: Deployment = session.api.get(&ns, &name).await?;
            let progress = deployment_progress(&d)?;
            // A paused Deployment never progresses: say so instead of waiting forever.
            if d.spec.paused && matches!(progress, Progress::Waiting(_)) {
                bail!("deployment {name:?} is paused, so its rollout will not progress: resume it with `shoal rollout resume deploy/{name}`");
            }
            progress
        } else {
            daemonset_progress(&session.api.get::<DaemonSet>(&ns, &name).await?)?
        };
        match progress {
            Progress::Done(line) => {
                println!("{line}");
                return Ok(0);
            }
            Progress::Waiting(line) => {
                // Print each distinct state once, as a watch would.
                if line != last {
                    println!("{line}");
                    last = line;
                }
                if !args.watch {
                    return Ok(0);
                }
            }
        }
        if let (Some(deadline), Some(timeout)) = (deadline, timeout) {
            if tokio::time::Instant::now() + POLL > deadline {
                bail!(
                    "timed out after {timeout:?} waiting for the rollout of {} to finish: check its pods (`shoal get pods`, `shoal describe {} {name}`), or wait longer with --timeout",
                    display(info, &name),
                    info.singular()
                );
            }
        }
        tokio::time::sleep(POLL).await;
    }
}

// ---------------------------------------------------------------------------------------
// history and undo

/// The ReplicaSets `d` controls that carry a revision, newest revision first.
async fn revisions(session: &Session, d: &Deployment) -> Result<Vec<ReplicaSet>> {
    let options = ListOptions {
        namespace: d.metadata.namespace.clone(),
        ..Default::default()
    };
    let list = session.api.list::<ReplicaSet>(&options).await?;
    let mut rss: Vec<ReplicaSet> = list
        .items
        .into_iter()
        .filter(|rs| {
            rs.metadata
                .controller_ref()
                .is_some_and(|r| r.uid == d.metadata.uid)
        })
        .filter(|rs| !rs.metadata.is_deleting() && revision_of(rs) > 0)
        .collect();
    rss.sort_by_key(|rs| std::cmp::Reverse(revision_of(rs)));
    Ok(rss)
}

fn available_revisions(rss: &[ReplicaSet]) -> String {
    let mut revs: Vec<String> = rss.iter().map(|rs| revision_of(rs).to_string()).collect();
    revs.reverse();
    if revs.is_empty() {
        "none".into()
    } else {
        revs.join(", ")
    }
}

/// The change cause of one revision. The controller does not copy the Deployment's
/// annotations onto its ReplicaSets, so for the revision the Deployment runs now its own
/// annotation is the best record (it is what Kubernetes would have copied).
fn change_cause(d: &Deployment, rs: &ReplicaSet) -> String {
    let current = strip_hash(&rs.spec.template) == d.spec.template;
    rs.metadata
        .annotations
        .get(CHANGE_CAUSE_ANNOTATION)
        .or_else(|| {
            current
                .then(|| d.metadata.annotations.get(CHANGE_CAUSE_ANNOTATION))
                .flatten()
        })
        .cloned()
        .unwrap_or_else(|| "<none>".into())
}

async fn history(session: &Session, args: RolloutHistoryArgs) -> Result<i32> {
    let (info, ns, name) = resolve(&args.target, "history", &["Deployment", "StatefulSet"])?;
    if info.kind == "StatefulSet" {
        return crate::rollout_sts::history(session, info, &ns, &name, args.revision).await;
    }
    let d: Deployment = session.api.get(&ns, &name).await?;
    let rss = revisions(session, &d).await?;
    if let Some(revision) = args.revision {
        let Some(rs) = rss.iter().find(|rs| revision_of(rs) == revision) else {
            bail!(
                "unable to find revision {revision} of {}: available revisions are {}",
                display(info, &name),
                available_revisions(&rss)
            );
        };
        println!("{} with revision #{revision}", display(info, &name));
        print!("{}", serde_norway::to_string(&rs.spec.template)?);
        return Ok(0);
    }
    println!("{}", display(info, &name));
    if rss.is_empty() {
        println!("No rollout history found.");
        return Ok(0);
    }
    println!("{:<10}CHANGE-CAUSE", "REVISION");
    for rs in rss.iter().rev() {
        println!("{:<10}{}", revision_of(rs), change_cause(&d, rs));
    }
    Ok(0)
}

/// The revision undo goes to: `to`, or the one before the newest.
fn undo_target<'a>(rss: &'a [ReplicaSet], to: Option<i64>, what: &str) -> Result<&'a ReplicaSet> {
    match to.filter(|r| *r != 0) {
        Some(revision) => rss.iter().find(|rs| revision_of(rs) == revision).ok_or_else(|| {
            anyhow!(
                "unable to find revision {revision} of {what}: available revisions are {} (see `shoal rollout history`)",
                available_revisions(rss)
            )
        }),
        None => rss
            .get(1)
            .ok_or_else(|| anyhow!("no earlier revision of {what} to roll back to: it has only {}", available_revisions(rss))),
    }
}

async fn undo(session: &Session, args: RolloutUndoArgs) -> Result<i32> {
    let (info, ns, name) = resolve(&args.target, "undo", &["Deployment", "StatefulSet"])?;
    if info.kind == "StatefulSet" {
        return crate::rollout_sts::undo(session, info, &ns, &name, args.to_revision).await;
    }
    let what = display(info, &name);
    for _ in 0..CONFLICT_RETRIES {
        let mut d: Deployment = session.api.get(&ns, &name).await?;
        if d.spec.paused {
            bail!("{what} is paused, and a paused deployment cannot be rolled back: resume it first with `shoal rollout resume deploy/{name}`, then try again");
        }
        let rss = revisions(session, &d).await?;
        let rs = undo_target(&rss, args.to_revision, &what)?;
        let revision = revision_of(rs);
        let template = strip_hash(&rs.spec.template);
        if template == d.spec.template {
            println!(
                "{what} skipped rollback (current template already matches revision {revision})"
            );
            return Ok(0);
        }
        d.spec.template = template;
        // As kubectl does, the Deployment takes the change cause of the revision it returns to.
        match rs.metadata.annotations.get(CHANGE_CAUSE_ANNOTATION) {
            Some(cause) => d
                .metadata
                .annotations
                .insert(CHANGE_CAUSE_ANNOTATION.into(), cause.clone()),
            None => d.metadata.annotations.remove(CHANGE_CAUSE_ANNOTATION),
        };
        // An update carries the resourceVersion we read: if anyone changed the Deployment
        // meanwhile it fails with Conflict, and we decide again from a fresh read.
        match session.api.update(&d).await {
            Ok(_) => {
                println!("{what} rolled back");
                return Ok(0);
            }
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!("{what} kept changing while rolling back ({CONFLICT_RETRIES} conflicting writes): try again")
}

// ---------------------------------------------------------------------------------------
// pause, resume, restart

async fn patch<K: Resource>(
    session: &Session,
    ns: &str,
    name: &str,
    patch: serde_json::Value,
) -> Result<K> {
    let request = PatchRequest {
        namespace: ns.into(),
        name: name.into(),
        patch: patch.to_string(),
        status: false,
    };
    Ok(session.api.patch::<K>(&request).await?)
}

async fn set_paused(session: &Session, t: RolloutTarget, paused: bool) -> Result<i32> {
    let verb = if paused { "pause" } else { "resume" };
    let (info, ns, name) = resolve(&t, verb, &["Deployment"])?;
    let what = display(info, &name);
    let d: Deployment = session.api.get(&ns, &name).await?;
    let done = if paused { "paused" } else { "resumed" };
    if d.spec.paused == paused {
        println!("{what} already {done}");
        return Ok(0);
    }
    patch::<Deployment>(
        session,
        &ns,
        &name,
        serde_json::json!({"spec": {"paused": paused}}),
    )
    .await?;
    println!("{what} {done}");
    Ok(0)
}

async fn restart(session: &Session, t: RolloutTarget) -> Result<i32> {
    let (info, ns, name) = resolve(&t, "restart", &["Deployment", "DaemonSet"])?;
    let what = display(info, &name);
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let body = serde_json::json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now}}}}});
    if info.kind == "Deployment" {
        let d: Deployment = session.api.get(&ns, &name).await?;
        if d.spec.paused {
            bail!("{what} is paused, so a restart would not roll out: resume it first with `shoal rollout resume deploy/{name}`");
        }
        patch::<Deployment>(session, &ns, &name, body).await?;
    } else {
        patch::<DaemonSet>(session, &ns, &name, body).await?;
    }
    println!("{what} restarted");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_like_kubectl() {
        assert_eq!(parse_timeout("0s").unwrap(), None);
        assert_eq!(parse_timeout("0").unwrap(), None);
        assert_eq!(parse_timeout("90").unwrap(), Some(Duration::from_secs(90)));
        assert_eq!(parse_timeout("5m").unwrap(), Some(Duration::from_secs(300)));
        assert_eq!(
            parse_timeout("1h30m").unwrap(),
            Some(Duration::from_secs(5400))
        );
        assert_eq!(
            parse_timeout("1.5s").unwrap(),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_timeout("250ms").unwrap(),
            Some(Duration::from_millis(250))
        );
        for bad in ["", "5x", "m", "-1s", "1d"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn targets_take_both_forms() {
        let (info, name) = target("deploy/web", None, "").unwrap();
        assert_eq!((info.kind, name.as_str()), ("Deployment", "web"));
        let (info, name) = target("rs", Some("x"), "").unwrap();
        assert_eq!((info.kind, name.as_str()), ("ReplicaSet", "x"));
        assert!(target("deploy/web", Some("web"), "").is_err());
        assert!(target("deploy", None, "").is_err());
        assert!(target("deploy/", None, "").is_err());
        assert!(target("nosuchkind/x", None, "").is_err());
        assert_eq!(display(info, "x"), "replicaset.apps/x");
        assert_eq!(display(kinds::resolve("node").unwrap(), "n1"), "node/n1");
    }

    fn deployment(generation: i64, observed: i64, replicas: i32, s: (i32, i32, i32)) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.name = "web".into();
        d.metadata.generation = generation;
        d.status.observed_generation = observed;
        d.spec.replicas = Some(replicas);
        (
            d.status.replicas,
            d.status.updated_replicas,
            d.status.available_replicas,
        ) = s;
        d
    }

    #[test]
    fn deployment_progress_follows_kubectl() {
        let waiting = |d: &Deployment| match deployment_progress(d).unwrap() {
            Progress::Waiting(l) => l,
            Progress::Done(l) => panic!("done: {l}"),
        };
        assert!(waiting(&deployment(2, 1, 3, (3, 3, 3))).contains("spec update to be observed"));
        assert!(waiting(&deployment(2, 2, 3, (3, 1, 2)))
            .ends_with("1 out of 3 new replicas have been updated..."));
        assert!(waiting(&deployment(2, 2, 3, (4, 3, 3)))
            .contains("1 old replicas are pending termination"));
        assert_eq!(
            waiting(&deployment(2, 2, 3, (3, 3, 1))),
            "Waiting for deployment \"web\" rollout to finish: 1 of 3 updated replicas are available..."
        );
        assert_eq!(
            deployment_progress(&deployment(2, 2, 3, (3, 3, 3))).unwrap(),
            Progress::Done("deployment \"web\" successfully rolled out".into())
        );
        let mut failed = deployment(2, 2, 3, (3, 3, 1));
        failed.status.conditions.push(bus_schemas::meta::Condition {
            type_: "Progressing".into(),
            status: "False".into(),
            reason: "ProgressDeadlineExceeded".into(),
            ..Default::default()
        });
        let err = deployment_progress(&failed).unwrap_err().to_string();
        assert!(err.contains("exceeded its progress deadline"), "{err}");
    }

    #[test]
    fn undo_defaults_to_the_previous_revision() {
        let rs = |revision: i64| {
            let mut rs = ReplicaSet::default();
            rs.metadata.annotations.insert(
                shoal_controllers::deployment::REVISION_ANNOTATION.into(),
                revision.to_string(),
            );
            rs
        };
        let rss = vec![rs(5), rs(3), rs(1)];
        assert_eq!(revision_of(undo_target(&rss, None, "d").unwrap()), 3);
        assert_eq!(revision_of(undo_target(&rss, Some(0), "d").unwrap()), 3);
        assert_eq!(revision_of(undo_target(&rss, Some(1), "d").unwrap()), 1);
        let err = undo_target(&rss, Some(2), "d").unwrap_err().to_string();
        assert!(err.contains("available revisions are 1, 3, 5"), "{err}");
        assert!(undo_target(&rss[..1], None, "d").is_err());
    }
}
