//! A StatefulSet's revisions as ControllerRevisions named `<set>-<template hash>`, numbered
//! in the order templates were first (or again) used; the newest N beyond the two in use
//! are kept (`revisionHistoryLimit`).

use std::sync::Arc;

use bus_schemas::kinds::{ControllerRevision, PodTemplateSpec, StatefulSet};

use crate::deployment::template_hash;
use crate::podutil;

/// The name of the revision holding `template`.
pub fn revision_name(set: &StatefulSet, template: &PodTemplateSpec) -> String {
    format!(
        "{}-{}",
        set.metadata.name,
        template_hash(template, set.status.collision_count)
    )
}

/// The template a revision holds, if its data has one.
pub fn template_of(revision: &ControllerRevision) -> Option<PodTemplateSpec> {
    let template = revision.data.pointer("/spec/template")?;
    serde_json::from_value(template.clone()).ok()
}

pub fn new_revision(set: &StatefulSet, name: &str, number: i64) -> ControllerRevision {
    let mut revision = ControllerRevision::default();
    revision.metadata.name = name.to_string();
    revision.metadata.namespace = set.metadata.namespace.clone();
    revision.metadata.labels = set.spec.template.metadata.labels.clone();
    revision.metadata.owner_references = vec![podutil::controller_ref(set)];
    revision.data = serde_json::json!({"spec": {"template": set.spec.template}});
    revision.revision = number;
    revision
}

/// What to do with the set's revisions: the revision number the update revision must have
/// (`None` when it already has the highest), and the old revisions to delete.
pub fn plan(
    set: &StatefulSet,
    revisions: &[Arc<ControllerRevision>],
    update: &str,
    current: &str,
) -> (Option<i64>, Vec<String>) {
    let highest = revisions.iter().map(|r| r.revision).max().unwrap_or(0);
    let renumber = match revisions.iter().find(|r| r.metadata.name == update) {
        Some(r) if r.revision == highest => None,
        _ => Some(highest + 1),
    };
    let keep = usize::try_from(set.spec.revision_history_limit.unwrap_or(10).max(0)).unwrap_or(0);
    let mut old: Vec<&Arc<ControllerRevision>> = revisions
        .iter()
        .filter(|r| r.metadata.name != update && r.metadata.name != current)
        .collect();
    old.sort_by_key(|r| std::cmp::Reverse(r.revision));
    let prune = old
        .into_iter()
        .skip(keep)
        .map(|r| r.metadata.name.clone())
        .collect();
    (renumber, prune)
}
