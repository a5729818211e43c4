//! `shoal delete KIND NAME…`, `-f FILE`, `-l SELECTOR`, with `--cascade`.

use anyhow::{bail, Result};
use bus_schemas::api::{DeleteOptions, ListOptions};
use bus_schemas::subjects::Verb;
use bus_schemas::KindInfo;

use crate::apply;
use crate::cli::DeleteArgs;
use crate::kinds;
use crate::output;
use crate::remote::Session;

fn propagation(cascade: &str) -> Result<&'static str> {
    Ok(match cascade {
        "background" | "true" => "Background",
        "foreground" => "Foreground",
        "orphan" | "false" => "Orphan",
        other => bail!("--cascade must be background, foreground or orphan, not {other:?}"),
    })
}

async fn delete_one(
    session: &Session,
    info: &KindInfo,
    namespace: &str,
    name: &str,
    args: &DeleteArgs,
) -> Result<bool> {
    let options = DeleteOptions {
        namespace: namespace.to_string(),
        name: name.to_string(),
        propagation_policy: Some(propagation(&args.cascade)?.to_string()),
        grace_period_seconds: args.grace_period.or(args.force.then_some(0)),
        preconditions: None,
    };
    let span = tracing::info_span!("cli.delete", kind = info.kind, namespace, name);
    match tracing::Instrument::instrument(session.call(info, Verb::Delete, &options), span).await {
        Ok(_) => {
            println!("{} {:?} deleted", info.singular(), name);
            Ok(true)
        }
        Err(e) if e.is_not_found() && args.ignore_not_found => Ok(true),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(false)
        }
    }
}

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
    let mut ok = true;
    for (info, ns, name) in targets {
        ok &= delete_one(session, info, &ns, &name, &args).await?;
    }
    Ok(if ok { 0 } else { 1 })
}
