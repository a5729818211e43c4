//! `shoal describe`: the object's identity, spec and status, and the events about it.

use anyhow::Result;
use bus_schemas::api::ListOptions;
use bus_schemas::kinds::Pod;
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
    let yaml = serde_norway::to_string(value).unwrap_or_default();
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
    let pod = (info.kind == "Pod")
        .then(|| serde_json::from_value::<Pod>(obj.clone()).ok())
        .flatten();
    if info.kind == "Pod" {
        let status = pod
            .as_ref()
            .map_or_else(|| "<invalid>".to_string(), table::pod_status);
        field("Status", status);
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
        if let Some(pod) = &pod {
            print!("{}", crate::describe_pod::containers(pod));
        }
    }
    if info.kind == "Service" {
        describe_service(session, &obj, &namespace, &name).await;
    }
    if info.kind == "HorizontalPodAutoscaler" {
        crate::hpa::describe(&obj);
    }
    match (obj.get("spec"), obj.get("status")) {
        _ if config_data(info.kind, &obj) => {}
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

/// What people look for first in a Service: how it is reached and who answers behind it.
async fn describe_service(session: &Session, svc: &Value, namespace: &str, name: &str) {
    let str_at = |p: &str| svc.pointer(p).and_then(|v| v.as_str()).unwrap_or("");
    field("Type", or_none(str_at("/spec/type")));
    map_lines("Selector", svc.pointer("/spec/selector"));
    field("IP", or_none(str_at("/spec/clusterIP")));
    field("Session Affinity", or_none(str_at("/spec/sessionAffinity")));
    let ports = svc
        .pointer("/spec/ports")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    for port in &ports {
        let label = port["name"]
            .as_str()
            .filter(|n| !n.is_empty())
            .unwrap_or("<unset>");
        let protocol = port["protocol"].as_str().unwrap_or("TCP");
        field("Port", format!("{label}  {}/{protocol}", port["port"]));
        let target = match &port["targetPort"] {
            Value::String(s) => s.clone(),
            Value::Null => port["port"].to_string(),
            other => other.to_string(),
        };
        field("TargetPort", format!("{target}/{protocol}"));
    }
    let endpoints = match kinds::resolve("endpoints") {
        Ok(kind) => session.get(kind, namespace, name).await.ok(),
        Err(_) => None,
    };
    let (ready, not_ready) = endpoint_addresses(endpoints.as_ref());
    field("Endpoints", list_or_none(&ready));
    if !not_ready.is_empty() {
        field("Not Ready", list_or_none(&not_ready));
    }
}

/// `ip:port` for every address and port of every subset: ready ones, then not-ready ones.
fn endpoint_addresses(endpoints: Option<&Value>) -> (Vec<String>, Vec<String>) {
    let (mut ready, mut not_ready) = (Vec::new(), Vec::new());
    let subsets = endpoints
        .and_then(|e| e.pointer("/subsets"))
        .and_then(|s| s.as_array())
        .cloned()
        .unwrap_or_default();
    for subset in &subsets {
        let ports: Vec<String> = subset["ports"]
            .as_array()
            .map(|ps| ps.iter().map(|p| p["port"].to_string()).collect())
            .unwrap_or_default();
        for (key, out) in [
            ("addresses", &mut ready),
            ("notReadyAddresses", &mut not_ready),
        ] {
            for address in subset[key].as_array().into_iter().flatten() {
                let ip = address["ip"].as_str().unwrap_or("?");
                if ports.is_empty() {
                    out.push(ip.to_string());
                }
                for port in &ports {
                    out.push(format!("{ip}:{port}"));
                }
            }
        }
    }
    (ready, not_ready)
}

fn or_none(s: &str) -> String {
    if s.is_empty() {
        "<none>".into()
    } else {
        s.to_string()
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() {
        "<none>".into()
    } else {
        items.join(",")
    }
}

/// `describe`'s Data section for ConfigMaps (values, as kubectl shows them) and Secrets
/// (sizes only). Returns false for other kinds.
fn config_data(kind: &str, obj: &Value) -> bool {
    match kind {
        "ConfigMap" => {
            println!("\nData\n====");
            for (key, value) in obj
                .get("data")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                println!("{key}:\n----\n{}\n", value.as_str().unwrap_or(""));
            }
            println!("\nBinaryData\n====");
            for (key, value) in obj
                .get("binaryData")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                println!("{key}: {} bytes", decoded_len(value));
            }
            true
        }
        "Secret" => {
            println!(
                "\nType:  {}",
                obj.get("type").and_then(Value::as_str).unwrap_or("")
            );
            println!("\nData\n====");
            for (key, value) in obj
                .get("data")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                println!("{key}:  {} bytes", decoded_len(value));
            }
            true
        }
        _ => false,
    }
}

fn decoded_len(value: &Value) -> usize {
    use base64::Engine;
    let text = value.as_str().unwrap_or("");
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_or(0, |bytes| bytes.len())
}
