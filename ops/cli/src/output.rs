//! yaml, json and name output.

use anyhow::Result;
use bus_schemas::KindInfo;
use serde_json::Value;

pub fn name_of(obj: &Value) -> &str {
    obj.pointer("/metadata/name")
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

pub fn namespace_of(obj: &Value) -> &str {
    obj.pointer("/metadata/namespace")
        .and_then(|v| v.as_str())
        .unwrap_or("")
}

pub fn print_objects(format: &str, info: &KindInfo, objects: &[Value], single: bool) -> Result<()> {
    match format {
        "yaml" => {
            if single && objects.len() == 1 {
                print!("{}", serde_norway::to_string(&objects[0])?);
            } else {
                print!("{}", serde_norway::to_string(&as_list(objects))?);
            }
        }
        "json" => {
            if single && objects.len() == 1 {
                println!("{}", serde_json::to_string_pretty(&objects[0])?);
            } else {
                println!("{}", serde_json::to_string_pretty(&as_list(objects))?);
            }
        }
        "name" => {
            for obj in objects {
                println!("{}/{}", info.singular(), name_of(obj));
            }
        }
        other => anyhow::bail!("unknown output format {other:?}: use wide, yaml, json or name"),
    }
    Ok(())
}

fn as_list(objects: &[Value]) -> Value {
    serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects})
}
