//! `shoal delete KIND NAME…`, `-f FILE`, `-l SELECTOR`, with `--cascade`.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bus_schemas::api::{DeleteOptions, ListOptions};
use bus_schemas::subjects::Verb;
use bus_schemas::KindInfo;

use crate::apply;
use crate::cli::DeleteArgs;
use crate::kinds;
use crate::output;
use crate::remote::Session;
use crate::rollout::{parse_timeout, POLL};
use serde_json::Value;

fn propagation(cascade: &str) -> Result<&'static str> {
    Ok(match cascade {
        "background" | "true" => "Background",
        "foreground" => "Foreground",
        "orphan" | "false" => "Orphan",
        other => bail!("--cascade must be background, foreground or orphan, not {other:?}"),
    })
}

/// A deleted object still to be waited for: it is gone when its name is free or holds
/// another object (a new one, with another uid).
struct Deleted {
    info: &'static KindInfo,
    namespace: String,
    name: String,
    uid: String,
}

impl Deleted {
    fn label(&self) -> String {
        format!("{}/{}", self.info.singular(), self.name)
    }
}

enum Outcome {
    Deleted(Deleted),
    /// Not there, and `--ignore-not-found` said that is fine.
    Absent,
    /// Refused, and said why.
    Refused,
}

async fn delete_one(
    session: &Session,
    info: &'static KindInfo,
    namespace: &str,
    name: &str,
    args: &DeleteArgs,
) -> Result<Outcome> {
    let options = DeleteOptions {
        namespace: namespace.to_string(),
        name: name.to_string(),
        propagation_policy: Some(propagation(&args.cascade)?.to_string()),
        grace_period_seconds: args.grace_period.or(args.force.then_some(0)),
        preconditions: None,
    };
    let span = tracing::info_span!("cli.delete", kind = info.kind, namespace, name);
    match tracing::Instrument::instrument(session.call(info, Verb::Delete, &options), span).await {
        Ok(object) => {
            println!("{} {:?} deleted", info.singular(), name);
            let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
            Ok(Outcome::Deleted(Deleted {
                info,
                namespace: namespace.to_string(),
                name: name.to_string(),
                uid: uid.to_string(),
            }))
        }
        Err(e) if e.is_not_found() && args.ignore_not_found => Ok(Outcome::Absent),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(Outcome::Refused)
        }
    }
}

/// Each pending object as it still is (the same uid under its name), or None once gone.
/// Objects of one kind and namespace are read with one list, so waiting for a selector's
/// hundreds of pods costs one request a poll, not one per pod; an object alone is read
/// with a get, which costs less than listing its namespace.
async fn still_there(session: &Session, pending: &[Deleted]) -> Result<Vec<Option<Value>>> {
    let mut groups: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (i, deleted) in pending.iter().enumerate() {
        groups
            .entry((deleted.info.kind, deleted.namespace.as_str()))
            .or_default()
            .push(i);
    }
    let mut found = vec![None; pending.len()];
    for indices in groups.into_values() {
        let objects = if let [only] = indices[..] {
            let deleted = &pending[only];
            match session
                .get(deleted.info, &deleted.namespace, &deleted.name)
                .await
            {
                Ok(object) => vec![object],
                Err(e) if e.is_not_found() => Vec::new(),
                Err(e) => return Err(e.into()),
            }
        } else {
            let first = &pending[indices[0]];
            let options = ListOptions {
                namespace: first.namespace.clone(),
                ..Default::default()
            };
            session.list(first.info, &options).await?.0
        };
        let mut by_uid: HashMap<String, Value> = objects
            .into_iter()
            .filter_map(|object| Some((object["metadata"]["uid"].as_str()?.to_string(), object)))
            .collect();
        for i in indices {
            found[i] = by_uid.remove(&pending[i].uid);
        }
    }
    Ok(found)
}

/// What holds an object back, for the progress line: its finalizers, or its grace period.
fn holding(object: &Value) -> String {
    let meta = &object["metadata"];
    let finalizers: Vec<&str> = meta["finalizers"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if finalizers == ["foregroundDeletion"] {
        return "dependents are deleted first (--cascade=foreground)".to_string();
    }
    if !finalizers.is_empty() {
        return format!("held by finalizers: {}", finalizers.join(", "));
    }
    match meta["deletionGracePeriodSeconds"].as_i64() {
        Some(grace) if grace > 0 => {
            format!("the node is still stopping the containers (grace period {grace} s; --force removes at once)")
        }
        _ => "being removed".to_string(),
    }
}

/// Waits until every deleted object is gone, saying every few seconds what it waits for.
async fn wait_gone(
    session: &Session,
    mut pending: Vec<Deleted>,
    timeout: Option<Duration>,
) -> Result<bool> {
    let start = tokio::time::Instant::now();
    let mut last_report = start;
    loop {
        let found = still_there(session, &pending).await?;
        let mut left = Vec::new();
        // Objects held back for the same reason share one line: a ReplicaSet's pods do.
        let mut holds: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (deleted, object) in pending.into_iter().zip(found) {
            if let Some(object) = object {
                holds
                    .entry(holding(&object))
                    .or_default()
                    .push(deleted.label());
                left.push(deleted);
            }
        }
        pending = left;
        if pending.is_empty() {
            return Ok(true);
        }
        let holds: Vec<String> = holds
            .into_iter()
            .map(|(reason, labels)| format!("{}: {reason}", labels.join(", ")))
            .collect();
        let waited = start.elapsed();
        if timeout.is_some_and(|limit| waited >= limit) {
            eprintln!(
                "error: timed out after {} s waiting for the deletion of {}",
                waited.as_secs(),
                holds.join("; ")
            );
            return Ok(false);
        }
        if last_report.elapsed() >= REPORT_EVERY {
            last_report = tokio::time::Instant::now();
            eprintln!("waiting ({} s): {}", waited.as_secs(), holds.join("; "));
        }
        tokio::time::sleep(POLL).await;
    }
}

const REPORT_EVERY: Duration = Duration::from_secs(5);

pub async fn run(session: &Session, args: DeleteArgs) -> Result<i32> {
    propagation(&args.cascade)?;
    let mut targets: Vec<(&'static KindInfo, String, String)> = Vec::new();
    if !args.files.is_empty() {
        for source in apply::read_sources(&args.files)? {
            for mut doc in source.documents {
                let kind = apply::check(&mut doc, &args.namespace)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", source.label))?;
                let info = kinds::resolve(kind)?;
                let ns = output::namespace_of(&doc.value).to_string();
                targets.push((
                    info,
                    kinds::namespace_for(info, &Some(ns).filter(|n| !n.is_empty())),
                    doc.name().to_string(),
                ));
            }
        }
    } else {
        let Some(kind_arg) = &args.kind else {
            bail!("you must specify the type of resource to delete, or -f FILE");
        };
        let (infos, mut names) = if kind_arg.contains('/') {
            let (info, name) = kinds::split_slash(kind_arg)?;
            (vec![info], name.into_iter().collect::<Vec<_>>())
        } else {
            (kinds::resolve_list(kind_arg)?, Vec::new())
        };
        names.extend(args.names.iter().cloned());
        for info in infos {
            if let Some(selector) = &args.selector {
                let options = ListOptions {
                    namespace: if args.all_namespaces {
                        String::new()
                    } else {
                        kinds::namespace_for(info, &args.namespace)
                    },
                    label_selector: selector.clone(),
                    ..Default::default()
                };
                let (objects, _) = session.list(info, &options).await?;
                for obj in objects {
                    targets.push((
                        info,
                        output::namespace_of(&obj).to_string(),
                        output::name_of(&obj).to_string(),
                    ));
                }
            } else if names.is_empty() {
                bail!("resource(s) were provided, but no name was specified (or use -l SELECTOR)");
            } else {
                for name in &names {
                    targets.push((
                        info,
                        kinds::namespace_for(info, &args.namespace),
                        name.clone(),
                    ));
                }
            }
        }
        if targets.is_empty() {
            eprintln!("No resources found");
            return Ok(0);
        }
    }
    if args.force {
        eprintln!("warning: --force removes the objects without waiting for their nodes to stop what they run: a pod's containers run on until its node sees the pod gone (at once if it is up, not while it is unreachable)");
    }
    let timeout = parse_timeout(&args.timeout).context("--timeout")?;
    let mut ok = true;
    let mut pending = Vec::new();
    for (info, ns, name) in targets {
        match delete_one(session, info, &ns, &name, &args).await? {
            Outcome::Deleted(deleted) => pending.push(deleted),
            Outcome::Absent => {}
            Outcome::Refused => ok = false,
        }
    }
    if args.wait && !pending.is_empty() {
        ok &= wait_gone(session, pending, timeout).await?;
    }
    Ok(if ok { 0 } else { 1 })
}
