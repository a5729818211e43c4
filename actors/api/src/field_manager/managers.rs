//! Ownership in `metadata.managedFields`: what an apply may change, what it removes, and how
//! ordinary writes move ownership.
//!
//! An apply by manager M of manifest A against the live object L:
//! 1. [`merge_applied`]: A's fields are merged into L; fields M owned by its last apply, no
//!    longer in A and owned by nobody else are removed.
//! 2. The caller decodes, defaults and validates the result (server-set fields such as a
//!    pod's `spec.nodeName` survive step 1 untouched, so they never fail an apply).
//! 3. [`settle_apply`]: fields that the result changes, that A names and that another
//!    manager owns are conflicts; with `force` M takes them over. M's Apply entry becomes
//!    exactly A's fields; other managers keep theirs (shared when the values agree).
//!
//! An update or patch by manager U ([`record_update`]) takes the fields it changed: U gains
//! them, every other manager loses them, and fields that are gone leave every set.

use bus_schemas::meta::FieldsV1;
use bus_schemas::{ManagedFieldsEntry, Time};
use serde_json::{Map, Value};

use super::fieldset::{self, FieldSet};
use super::tree;

/// The metadata fields managers own; the rest of metadata is the server's.
const MANAGED_METADATA: &[&str] = &["labels", "annotations", "ownerReferences", "finalizers"];

/// The part of an object (JSON, camelCase) that managers own: no type, no status, and of
/// metadata only labels, annotations, owner references and finalizers.
pub fn managed_view(object: &Value) -> Value {
    let Value::Object(map) = object else {
        return Value::Object(Map::new());
    };
    let mut view = Map::new();
    for (name, value) in map {
        match name.as_str() {
            "apiVersion" | "kind" | "status" => {}
            "metadata" => {
                let kept: Map<String, Value> = value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(k, _)| MANAGED_METADATA.contains(&k.as_str()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if !kept.is_empty() {
                    view.insert(name.clone(), Value::Object(kept));
                }
            }
            _ => {
                view.insert(name.clone(), value.clone());
            }
        }
    }
    Value::Object(view)
}

/// Fields owned by another manager that an apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    pub manager: String,
    /// Paths as people read them: `.spec.replicas`, `.metadata.labels.team`.
    pub fields: Vec<String>,
}

/// The merge of step 1, and the fields the manifest names.
pub struct Merged {
    pub merged: Value,
    pub applied_fields: FieldSet,
}

fn is_apply_by(entry: &ManagedFieldsEntry, manager: &str) -> bool {
    entry.manager == manager && entry.operation == ManagedFieldsEntry::APPLY
}

fn fields(entry: &ManagedFieldsEntry) -> FieldSet {
    FieldSet::from_fields_v1(&entry.fields_v1.to_value())
}

/// Step 1: `applied` (the manifest as an object) merged into `live` (the whole stored
/// object), minus what `manager` stopped naming.
pub fn merge_applied(
    live: &Value,
    applied: &Value,
    manager: &str,
    entries: &[ManagedFieldsEntry],
) -> Merged {
    let applied_view = managed_view(applied);
    let applied_fields = tree::fields_of(&applied_view, &Vec::new());
    let mut merged = tree::merge(live, &applied_view, &Vec::new());
    let mut owned_elsewhere = FieldSet::new();
    let mut previously = FieldSet::new();
    for entry in entries {
        if is_apply_by(entry, manager) {
            previously = fields(entry);
        } else {
            owned_elsewhere.union_with(&fields(entry));
        }
    }
    // A field goes only when nobody owns anything beneath it: dropping the last label M
    // named must not take the `labels` map, and another writer's labels, with it; and an
    // object M named empty last time (`resources: {}`) and now fills stays.
    for path in previously.difference(&applied_fields).iter() {
        if !owned_elsewhere.has_within(path) && !applied_fields.has_within(path) {
            tree::remove(&mut merged, path);
        }
    }
    Merged {
        merged,
        applied_fields,
    }
}

/// Who applies, and how.
#[derive(Clone, Copy)]
pub struct Applier<'a> {
    pub manager: &'a str,
    /// Take over contested fields instead of failing.
    pub force: bool,
    /// The apiVersion recorded with the manager's entry.
    pub api_version: &'a str,
    pub now: Time,
}

/// Step 3: the managed fields after `manager` applied `applied_fields`, turning `live` into
/// `result` (both whole objects); or the conflicts, when not forced.
pub fn settle_apply(
    live: &Value,
    result: &Value,
    applied_fields: &FieldSet,
    entries: &[ManagedFieldsEntry],
    applier: &Applier<'_>,
) -> Result<Vec<ManagedFieldsEntry>, Vec<Conflict>> {
    let Applier {
        manager,
        force,
        api_version,
        now,
    } = *applier;
    let changes = tree::diff(&managed_view(live), &managed_view(result), &Vec::new());
    let contested = changes.changed.intersection(applied_fields);
    let mut conflicts = Vec::new();
    let mut next = Vec::with_capacity(entries.len() + 1);
    let mut own_entry = None;
    for entry in entries {
        if is_apply_by(entry, manager) {
            own_entry = Some((next.len(), entry));
            continue;
        }
        let owned = fields(entry);
        let taken = owned.intersection(&contested);
        if !taken.is_empty() && entry.manager != manager {
            conflicts.push(Conflict {
                manager: entry.manager.clone(),
                fields: taken.iter().map(fieldset::render).collect(),
            });
        }
        let kept = owned.difference(&changes.removed).difference(&taken);
        if kept.is_empty() {
            continue;
        }
        let mut entry = entry.clone();
        if kept != owned {
            entry.fields_v1 = FieldsV1::from_value(&kept.to_fields_v1());
        }
        next.push(entry);
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    if applied_fields.is_empty() {
        return Ok(next);
    }
    let unchanged_own = own_entry.filter(|(_, e)| &fields(e) == applied_fields);
    let (position, entry) = match (unchanged_own, own_entry) {
        (Some((at, e)), _) => (at, e.clone()),
        (None, previous) => (
            previous.map_or(next.len(), |(at, _)| at),
            entry_for(
                manager,
                ManagedFieldsEntry::APPLY,
                applied_fields,
                api_version,
                now,
            ),
        ),
    };
    next.insert(position.min(next.len()), entry);
    Ok(next)
}

fn entry_for(
    manager: &str,
    operation: &str,
    owned: &FieldSet,
    api_version: &str,
    now: Time,
) -> ManagedFieldsEntry {
    ManagedFieldsEntry {
        manager: manager.to_string(),
        operation: operation.to_string(),
        api_version: api_version.to_string(),
        time: Some(now),
        fields_type: "FieldsV1".into(),
        fields_v1: FieldsV1::from_value(&owned.to_fields_v1()),
    }
}

/// The managed fields after an update or patch by `manager` turned `live` into `next`
/// (whole objects). Unchanged when the write changed no managed field.
pub fn record_update(
    live: &Value,
    next: &Value,
    manager: &str,
    entries: &[ManagedFieldsEntry],
    api_version: &str,
    now: Time,
) -> Vec<ManagedFieldsEntry> {
    let changes = tree::diff(&managed_view(live), &managed_view(next), &Vec::new());
    if changes.is_empty() {
        return entries.to_vec();
    }
    let is_mine =
        |e: &ManagedFieldsEntry| e.manager == manager && e.operation == ManagedFieldsEntry::UPDATE;
    let mut out = Vec::with_capacity(entries.len() + 1);
    let mut mine = changes.changed.clone();
    let mut position = None;
    for entry in entries {
        let owned = fields(entry);
        if is_mine(entry) {
            mine.union_with(&owned.difference(&changes.removed));
            position = Some(out.len());
            continue;
        }
        let kept = owned
            .difference(&changes.removed)
            .difference(&changes.changed);
        if kept.is_empty() {
            continue;
        }
        let mut entry = entry.clone();
        if kept != owned {
            entry.fields_v1 = FieldsV1::from_value(&kept.to_fields_v1());
        }
        out.push(entry);
    }
    if !mine.is_empty() {
        let entry = entry_for(manager, ManagedFieldsEntry::UPDATE, &mine, api_version, now);
        out.insert(position.unwrap_or(out.len()), entry);
    }
    out
}

/// The managed fields of an object created by `manager` from `requested` (the object as the
/// client sent it, before defaults: the creator owns what it named).
pub fn record_create(
    requested: &Value,
    manager: &str,
    operation: &str,
    api_version: &str,
    now: Time,
) -> Vec<ManagedFieldsEntry> {
    let owned = tree::fields_of(&managed_view(requested), &Vec::new());
    if owned.is_empty() {
        return Vec::new();
    }
    vec![entry_for(manager, operation, &owned, api_version, now)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Time {
        chrono::DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z")
            .unwrap()
            .into()
    }

    fn later() -> Time {
        chrono::DateTime::parse_from_rfc3339("2026-12-01T12:05:00Z")
            .unwrap()
            .into()
    }

    /// What the API does around the pure steps, minus defaults and validation.
    fn apply_as(
        live: &Value,
        applied: &Value,
        manager: &str,
        force: bool,
    ) -> Result<Value, Vec<Conflict>> {
        let entries: Vec<ManagedFieldsEntry> =
            serde_json::from_value(live["metadata"]["managedFields"].clone()).unwrap_or_default();
        let outcome = merge_applied(live, applied, manager, &entries);
        let applier = Applier {
            manager,
            force,
            api_version: "apps/v1",
            now: later(),
        };
        let settled = settle_apply(
            live,
            &outcome.merged,
            &outcome.applied_fields,
            &entries,
            &applier,
        )?;
        let mut result = outcome.merged;
        result["metadata"]["managedFields"] = serde_json::to_value(settled).unwrap();
        Ok(result)
    }

    fn update_as(live: &Value, next: &Value, manager: &str) -> Value {
        let entries: Vec<ManagedFieldsEntry> =
            serde_json::from_value(live["metadata"]["managedFields"].clone()).unwrap_or_default();
        let mut next = next.clone();
        let recorded = record_update(live, &next, manager, &entries, "apps/v1", later());
        next["metadata"]["managedFields"] = serde_json::to_value(recorded).unwrap();
        next
    }

    fn deployment(replicas: i64, image: &str) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {
                "replicas": replicas,
                "template": {"spec": {"containers": [{"name": "web", "image": image}]}}
            }
        })
    }

    fn created_by_apply(manifest: &Value) -> Value {
        let mut live = manifest.clone();
        let entries = record_create(manifest, "shoal", "Apply", "apps/v1", now());
        live["metadata"]["managedFields"] = serde_json::to_value(entries).unwrap();
        live["metadata"]["uid"] = json!("u1");
        live["status"] = json!({"replicas": 3});
        live
    }

    fn managers_of(object: &Value) -> Vec<(String, String)> {
        object["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["manager"].as_str().unwrap().to_string(),
                    e["operation"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn the_view_holds_what_managers_own() {
        let view = managed_view(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "uid": "u", "resourceVersion": "3",
                         "labels": {"x": "y"}, "finalizers": ["f"]},
            "spec": {"nodeName": "n"}, "status": {"phase": "Running"}
        }));
        assert_eq!(
            view,
            json!({"metadata": {"labels": {"x": "y"}, "finalizers": ["f"]}, "spec": {"nodeName": "n"}})
        );
    }

    #[test]
    fn re_applying_an_unchanged_manifest_changes_nothing() {
        let manifest = deployment(3, "v1");
        let live = created_by_apply(&manifest);
        let result = apply_as(&live, &manifest, "shoal", false).unwrap();
        assert_eq!(result, live, "same object, same managed fields, same time");
    }

    #[test]
    fn labels_and_annotations_written_by_others_survive_an_apply() {
        let manifest = deployment(3, "v1");
        let live = created_by_apply(&manifest);
        let mut labelled = live.clone();
        labelled["metadata"]["labels"]["team"] = json!("blue");
        let labelled = update_as(&live, &labelled, "shoal-label");
        let mut annotated = labelled.clone();
        annotated["metadata"]["annotations"] = json!({"note": "keep"});
        let annotated = update_as(&labelled, &annotated, "shoal-annotate");
        assert_eq!(
            managers_of(&annotated),
            [
                ("shoal".into(), "Apply".into()),
                ("shoal-label".into(), "Update".into()),
                ("shoal-annotate".into(), "Update".into())
            ]
        );
        let result = apply_as(&annotated, &deployment(3, "v2"), "shoal", false).unwrap();
        assert_eq!(
            result["metadata"]["labels"],
            json!({"app": "web", "team": "blue"})
        );
        assert_eq!(result["metadata"]["annotations"], json!({"note": "keep"}));
        assert_eq!(
            result["spec"]["template"]["spec"]["containers"][0]["image"],
            json!("v2")
        );
    }

    #[test]
    fn fields_a_manager_stops_naming_are_removed_unless_someone_else_owns_them() {
        let mut manifest = deployment(3, "v1");
        manifest["metadata"]["labels"]["tier"] = json!("front");
        manifest["metadata"]["annotations"] = json!({"mine": "1", "shared": "s"});
        let live = created_by_apply(&manifest);
        // Another applier names the same annotation with the same value: shared ownership.
        let shared = apply_as(
            &live,
            &json!({"metadata": {"annotations": {"shared": "s"}}}),
            "other",
            false,
        )
        .unwrap();
        let result = apply_as(&shared, &deployment(3, "v1"), "shoal", false).unwrap();
        assert_eq!(result["metadata"]["labels"], json!({"app": "web"}));
        assert_eq!(result["metadata"]["annotations"], json!({"shared": "s"}));
    }

    #[test]
    fn fields_set_by_others_never_fail_an_unchanged_manifest() {
        let manifest = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}
        });
        let live = created_by_apply(&manifest);
        let mut bound = live.clone();
        bound["spec"]["nodeName"] = json!("node-1");
        bound["spec"]["restartPolicy"] = json!("Always");
        let bound = update_as(&live, &bound, "shoal-scheduler");
        let result = apply_as(&bound, &manifest, "shoal", false).unwrap();
        assert_eq!(result, bound);
    }

    #[test]
    fn changing_a_field_another_manager_owns_is_a_conflict_naming_field_and_owner() {
        let manifest = deployment(3, "v1");
        let live = created_by_apply(&manifest);
        let mut scaled = live.clone();
        scaled["spec"]["replicas"] = json!(5);
        let scaled = update_as(&live, &scaled, "shoal-scale");
        // The scale took the field from the applier.
        let shoal = &scaled["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"];
        assert!(shoal.get("f:replicas").is_none(), "{shoal}");

        let conflicts = apply_as(&scaled, &deployment(7, "v1"), "shoal", false).unwrap_err();
        assert_eq!(
            conflicts,
            [Conflict {
                manager: "shoal-scale".into(),
                fields: vec![".spec.replicas".into()]
            }]
        );
        // Naming the field with the value it already has is no conflict: ownership is shared.
        let agreed = apply_as(&scaled, &deployment(5, "v1"), "shoal", false).unwrap();
        assert_eq!(agreed["spec"]["replicas"], json!(5));
        assert_eq!(managers_of(&agreed).len(), 2);

        let forced = apply_as(&scaled, &deployment(7, "v1"), "shoal", true).unwrap();
        assert_eq!(forced["spec"]["replicas"], json!(7));
        assert_eq!(managers_of(&forced), [("shoal".into(), "Apply".into())]);
    }

    #[test]
    fn container_items_merge_by_name_and_conflicts_name_the_item() {
        let manifest = deployment(3, "v1");
        let live = created_by_apply(&manifest);
        let mut edited = live.clone();
        edited["spec"]["template"]["spec"]["containers"][0]["image"] = json!("hotfix");
        let edited = update_as(&live, &edited, "shoal-edit");
        let conflicts = apply_as(&edited, &deployment(3, "v2"), "shoal", false).unwrap_err();
        assert_eq!(
            conflicts[0].fields,
            [r#".spec.template.spec.containers[name="web"].image"#]
        );
        assert_eq!(conflicts[0].manager, "shoal-edit");
    }

    #[test]
    fn a_container_removed_from_the_manifest_is_removed() {
        let mut manifest = deployment(3, "v1");
        manifest["spec"]["template"]["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "sidecar", "image": "s"}));
        let live = created_by_apply(&manifest);
        let result = apply_as(&live, &deployment(3, "v1"), "shoal", false).unwrap();
        let containers = result["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap();
        assert_eq!(containers.len(), 1);
        assert_eq!(containers[0]["name"], json!("web"));
    }

    #[test]
    fn dropping_every_label_keeps_labels_another_writer_added() {
        let live = created_by_apply(&deployment(3, "v1"));
        let mut labelled = live.clone();
        labelled["metadata"]["labels"]["team"] = json!("blue");
        let labelled = update_as(&live, &labelled, "shoal-label");
        let mut bare = deployment(3, "v1");
        bare["metadata"].as_object_mut().unwrap().remove("labels");
        let result = apply_as(&labelled, &bare, "shoal", false).unwrap();
        assert_eq!(result["metadata"]["labels"], json!({"team": "blue"}));
    }

    #[test]
    fn an_object_named_empty_then_filled_keeps_what_fills_it() {
        let mut manifest = deployment(3, "v1");
        manifest["spec"]["template"]["spec"]["containers"][0]["resources"] = json!({});
        let live = created_by_apply(&manifest);
        let mut filled = deployment(3, "v1");
        filled["spec"]["template"]["spec"]["containers"][0]["resources"] =
            json!({"limits": {"memory": "64Mi"}});
        let result = apply_as(&live, &filled, "shoal", false).unwrap();
        assert_eq!(
            result["spec"]["template"]["spec"]["containers"][0]["resources"],
            json!({"limits": {"memory": "64Mi"}})
        );
        // And back: naming it empty again removes what this manager had put in it.
        let emptied = apply_as(&result, &manifest, "shoal", false).unwrap();
        assert_eq!(
            emptied["spec"]["template"]["spec"]["containers"][0]["resources"],
            json!({})
        );
    }

    #[test]
    fn an_object_without_managed_fields_keeps_everything_on_first_apply() {
        let mut live = deployment(3, "v1");
        live["metadata"]["labels"]["team"] = json!("blue");
        let result = apply_as(&live, &deployment(3, "v1"), "shoal", false).unwrap();
        assert_eq!(result["metadata"]["labels"]["team"], json!("blue"));
        assert_eq!(managers_of(&result), [("shoal".into(), "Apply".into())]);
    }

    #[test]
    fn updates_that_change_nothing_record_nothing() {
        let live = created_by_apply(&deployment(3, "v1"));
        let mut status_only = live.clone();
        status_only["status"] = json!({"replicas": 1});
        let after = update_as(&live, &status_only, "shoal-controllers");
        assert_eq!(
            after["metadata"]["managedFields"],
            live["metadata"]["managedFields"]
        );
    }

    #[test]
    fn removed_fields_leave_every_owner() {
        let live = created_by_apply(&deployment(3, "v1"));
        let mut unlabelled = live.clone();
        unlabelled["metadata"]["labels"] = json!({});
        let after = update_as(&live, &unlabelled, "shoal-label");
        let shoal = FieldSet::from_fields_v1(&after["metadata"]["managedFields"][0]["fieldsV1"]);
        assert!(
            !shoal.iter().any(|p| p.iter().any(|e| e == "f:app")),
            "{shoal:?}"
        );
    }
}
