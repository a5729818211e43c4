//! `shoal describe`: the object's identity, spec and status, and the events about it.

use anyhow::Result;
use bus_schemas::api::ListOptions;
use serde_json::Value;

use crate::cli::DescribeArgs;
use crate::kinds;
use crate::remote::Session;
use crate::table;

fn field(label: &str, value: impl std::fmt::Display) {
    println!("{:<20}{}", format!("{label}:"), value);
}

fn map_lines(label: &str, map: Option<&Value>) {
    let entries: Vec<String> = map
        .and_then(|m| m.as_object())
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if entries.is_empty() {
        field(label, "<none>");
    } else {
        for (i, e) in entries.iter().enumerate() {
            if i == 0 {
                field(label, e);
            } else {
                println!("{:<20}{e}", "");
            }
        }
    }
}

fn section(title: &str, value: Option<&Value>) {
    let Some(value) = value else { return };
    if value.as_object().is_some_and(|o| o.is_empty()) {
        return;
    }
    println!("{title}:");
    let yaml = serde_yaml::to_string(value).unwrap_or_default();
    for line in yaml.lines() {
        println!("  {line}");
    }
}

pub async fn run(session: &Session, args: DescribeArgs) -> Result<i32> {
    let (info, name) = match args.kind.split_once('/') {
        Some(_) => {
            let (info, name) = kinds::split_slash(&args.kind)?;
            (info, name.unwrap_or_default())
        }
        None => (kinds::resolve(&args.kind)?, args.name.clone()),
    };
    let namespace = kinds::namespace_for(info, &args.namespace);
    let obj = session.get(info, &namespace, &name).await?;
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    field("Name", s("/metadata/name"));
    if info.namespaced {
        field("Namespace", s("/metadata/namespace"));
    }
    field("Kind", info.kind);
    map_lines("Labels", obj.pointer("/metadata/labels"));
    map_lines("Annotations", obj.pointer("/metadata/annotations"));
    field("UID", s("/metadata/uid"));
    field("Created", s("/metadata/creationTimestamp"));
    field("Resource Version", s("/metadata/resourceVersion"));
    if let Some(g) = obj.pointer("/metadata/generation") {
        field("Generation", g);
    }
    if let Some(d) = obj
        .pointer("/metadata/deletionTimestamp")
        .and_then(|v| v.as_str())
    {
        field("Deleting Since", d);
    }
    if let Some(owners) = obj
        .pointer("/metadata/ownerReferences")
        .and_then(|o| o.as_array())
    {
        for o in owners {
            field(
                "Controlled By",
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap_or(""),
                    o["name"].as_str().unwrap_or("")
                ),
            );
        }
    }
    if info.kind == "Pod" {
        field("Status", table::pod_status(&obj));
        field(
            "Node",
            if s("/spec/nodeName").is_empty() {
                "<none>".into()
            } else {
                s("/spec/nodeName")
            },
        );
        field(
            "IP",
            if s("/status/podIP").is_empty() {
                "<none>".into()
            } else {
                s("/status/podIP")
            },
        );
    }
    match (obj.get("spec"), obj.get("status")) {
        (None, None) => {
            let mut body = obj.clone();
            if let Some(m) = body.as_object_mut() {
                for k in ["apiVersion", "kind", "metadata"] {
                    m.remove(k);
                }
            }
            section("Data", Some(&body));
        }
        (spec, status) => {
            section("Spec", spec);
            section("Status", status);
        }
    }

    let events_kind = kinds::resolve("events")?;
    let options = ListOptions {
        namespace: if info.namespaced {
            namespace.clone()
        } else {
            String::new()
        },
        field_selector: format!(
            "involvedObject.kind={},involvedObject.name={}",
            info.kind, name
        ),
        ..Default::default()
    };
    match session.list(events_kind, &options).await {
        Ok((events, _)) if !events.is_empty() => {
            println!("Events:");
            let t = table::build("Event", &events, false, false, false);
            t.print(true);
        }
        Ok(_) => println!("Events:             <none>"),
        Err(e) => println!("Events:             (unavailable: {e})"),
    }
    Ok(0)
}
