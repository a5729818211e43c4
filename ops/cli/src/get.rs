//! `shoal get`: tables, yaml/json/name output, and `-w` (list, then watch from that revision).

use anyhow::Result;
use bus_schemas::api::ListOptions;
use bus_schemas::selector::{FieldSelector, Selector};
use bus_schemas::{subjects, KindInfo};
use serde_json::Value;
use shoal_bus::watch::RawWatch;
use shoal_bus::Store;

use crate::cli::GetArgs;
use crate::kinds;
use crate::output;
use crate::remote::Session;
use crate::table;

pub async fn run(session: &Session, args: GetArgs) -> Result<i32> {
    let (infos, name) = match args.kinds.split_once('/') {
        Some(_) => {
            let (info, name) = kinds::split_slash(&args.kinds)?;
            (vec![info], name)
        }
        None => (kinds::resolve_list(&args.kinds)?, args.name.clone()),
    };
    if let Some(sel) = &args.selector {
        Selector::parse(sel)?;
    }
    let format = args.output.clone().unwrap_or_default();
    let wide = format == "wide";
    let multiple_kinds = infos.len() > 1;
    let mut found_any = false;
    for (i, info) in infos.iter().enumerate() {
        let namespace = if args.all_namespaces {
            None
        } else {
            Some(kinds::namespace_for(info, &args.namespace))
        };
        let (objects, revision) = match &name {
            Some(name) => {
                match session
                    .get(info, namespace.as_deref().unwrap_or(""), name)
                    .await
                {
                    Ok(obj) => (vec![obj], String::new()),
                    Err(e) if e.is_not_found() && args.ignore_not_found => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            None => {
                let options = ListOptions {
                    namespace: namespace.clone().unwrap_or_default(),
                    label_selector: args.selector.clone().unwrap_or_default(),
                    field_selector: args.field_selector.clone().unwrap_or_default(),
                    ..Default::default()
                };
                session.list(info, &options).await?
            }
        };
        let mut objects = objects;
        if !args.show_managed_fields {
            objects.iter_mut().for_each(hide_managed_fields);
        }
        found_any |= !objects.is_empty();
        if args.watch_only {
            // kubectl's --watch-only: the list only fixes the revision to watch from.
        } else if format.is_empty() || wide {
            if objects.is_empty() {
                // No node left is when the servers' health matters most.
                if info.kind == "Node" && !args.no_headers {
                    crate::cluster::print_footer(&session.nats).await;
                }
                continue;
            }
            if multiple_kinds && i > 0 {
                println!();
            }
            let namespaced_column = args.all_namespaces && info.namespaced;
            let mut t = table::build(
                info.kind,
                &objects,
                wide,
                namespaced_column,
                args.show_labels,
            );
            if multiple_kinds || args.show_kind {
                t.qualify_names(&info.singular(), namespaced_column);
            }
            t.print(!args.no_headers);
            if info.kind == "Node" && !args.no_headers {
                crate::cluster::print_footer(&session.nats).await;
            }
        } else {
            output::print_objects(&format, info, &objects, name.is_some())?;
        }
        if args.watch || args.watch_only {
            let from: u64 = revision.parse().unwrap_or(0);
            watch(session, info, namespace, &args, from, &format).await?;
        }
    }
    let quiet = args.watch || args.watch_only || args.ignore_not_found;
    if !found_any && !quiet && (format.is_empty() || wide) {
        match &args.namespace {
            Some(ns) if !args.all_namespaces => eprintln!("No resources found in {ns} namespace."),
            _ => eprintln!("No resources found"),
        }
    }
    Ok(0)
}

async fn watch(
    session: &Session,
    info: &KindInfo,
    namespace: Option<String>,
    args: &GetArgs,
    from: u64,
    format: &str,
) -> Result<()> {
    let store = Store::open(session.nats.clone()).await?;
    let filter = subjects::objects_of(
        &info.token(),
        namespace.as_deref().filter(|n| !n.is_empty()),
    );
    let labels = Selector::parse(args.selector.as_deref().unwrap_or(""))?;
    let fields = FieldSelector::parse(args.field_selector.as_deref().unwrap_or(""))?;
    let mut watch = RawWatch::start(store.clone(), filter.clone(), from + 1);
    while let Some(item) = watch.next().await {
        match item {
            Ok(event) => show(info, args, format, &labels, &fields, &event)?,
            Err(expired) => {
                // What happened in between is gone from the log: the objects as they are
                // now, then the changes after them (a Kubernetes client's relist on 410).
                eprintln!("watch expired ({expired}); relisting");
                let (items, revision) = store.list_raw(&filter).await?;
                for event in &items {
                    show(info, args, format, &labels, &fields, event)?;
                }
                watch = RawWatch::start(store.clone(), filter.clone(), revision + 1);
            }
        }
    }
    Ok(())
}

/// Prints one watched version, if it passes the name and selectors.
fn show(
    info: &KindInfo,
    args: &GetArgs,
    format: &str,
    labels: &Selector,
    fields: &FieldSelector,
    event: &shoal_bus::RawEvent,
) -> Result<()> {
    let Ok(obj) = rmp_serde::from_slice::<Value>(&event.payload) else {
        return Ok(());
    };
    if let Some(name) = &args.name {
        if output::name_of(&obj) != name {
            return Ok(());
        }
    }
    let obj_labels = obj
        .pointer("/metadata/labels")
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    if !labels.matches(&obj_labels) {
        return Ok(());
    }
    if !fields.is_everything() {
        let lookup = |f: &str| {
            let pointer = format!("/{}", f.replace('.', "/"));
            obj.pointer(&pointer).map(|v| {
                v.as_str()
                    .map(String::from)
                    .unwrap_or_else(|| v.to_string())
            })
        };
        if !fields.matches(&lookup) {
            return Ok(());
        }
    }
    let mut obj = obj;
    if !args.show_managed_fields {
        hide_managed_fields(&mut obj);
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.insert(
            "resourceVersion".into(),
            Value::String(event.revision.to_string()),
        );
    }
    match format {
        "" | "wide" => {
            let t = table::build(
                info.kind,
                std::slice::from_ref(&obj),
                format == "wide",
                args.all_namespaces && info.namespaced,
                args.show_labels,
            );
            if event.is_tombstone() {
                println!("{} (deleted)", t.rows[0].join("   "));
            } else {
                t.print(false);
            }
        }
        other => output::print_objects(other, info, &[obj], true)?,
    }
    Ok(())
}

/// kubectl leaves `metadata.managedFields` out of `-o yaml|json` unless asked: it is the
/// server's bookkeeping, long, and rarely what a person is looking for.
fn hide_managed_fields(obj: &mut Value) {
    if let Some(meta) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
}
