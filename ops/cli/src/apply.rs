//! `shoal apply -f`: every document is checked first; if any is bad, nothing is applied and
//! each bad document is reported by index and field path. The API merges each document into
//! the live object under the command's field manager (server-side apply); `--prune -l`
//! then deletes what this manager applied before and the manifests no longer hold.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bus_schemas::api::{DeleteOptions, ListOptions};
use bus_schemas::manifest::{self, Document, DocumentError};
use bus_schemas::selector::Selector;
use bus_schemas::{with_kind, Resource};
use shoal_bus::ApiClient;

use crate::cli::ApplyArgs;
use crate::remote::Session;

/// A manifest source and the documents read from it.
pub struct Source {
    pub label: String,
    pub documents: Vec<Document>,
}

/// Reads `-f` arguments: files, directories (their .yaml/.yml/.json files, sorted) or `-`.
pub fn read_sources(args: &[String]) -> Result<Vec<Source>> {
    let mut paths: Vec<(String, Option<PathBuf>)> = Vec::new();
    for arg in args {
        if arg == "-" {
            paths.push(("<stdin>".into(), None));
            continue;
        }
        let path = Path::new(arg);
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("reading directory {arg}"))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    matches!(
                        p.extension().and_then(|e| e.to_str()),
                        Some("yaml" | "yml" | "json")
                    )
                })
                .collect();
            entries.sort();
            paths.extend(
                entries
                    .into_iter()
                    .map(|p| (p.display().to_string(), Some(p))),
            );
        } else {
            paths.push((arg.clone(), Some(path.to_path_buf())));
        }
    }
    let mut sources = Vec::new();
    for (label, path) in paths {
        let text = match &path {
            None => std::io::read_to_string(std::io::stdin()).context("reading stdin")?,
            Some(p) => std::fs::read_to_string(p)
                .with_context(|| format!("the path {:?} does not exist or cannot be read", p))?,
        };
        let documents = manifest::parse(&text).map_err(|e| anyhow::anyhow!("{label}: {e}"))?;
        sources.push(Source { label, documents });
    }
    Ok(sources)
}

/// Checks a document against its kind and the namespace flag; returns its kind name.
pub fn check(
    doc: &mut Document,
    namespace: &Option<String>,
) -> Result<&'static str, DocumentError> {
    let info = manifest::kind_of(doc)?;
    if let (Some(ns), true) = (namespace, info.namespaced) {
        let doc_name = doc.name().to_string();
        let meta = doc
            .value
            .get_mut("metadata")
            .and_then(|m| m.as_object_mut());
        if let Some(meta) = meta {
            match meta.get("namespace").and_then(|v| v.as_str()) {
                Some(existing) if existing != ns => {
                    return Err(DocumentError {
                        index: doc.index,
                        kind: info.kind.into(),
                        name: doc_name,
                        causes: vec![bus_schemas::Cause::invalid(
                            "metadata.namespace",
                            format!("the namespace from the provided object {existing:?} does not match the namespace {ns:?}: you must pass '--namespace={existing}' to perform this operation"),
                        )],
                    })
                }
                _ => {
                    meta.insert("namespace".into(), serde_json::Value::String(ns.clone()));
                }
            }
        }
    }
    with_kind!(info.kind, K => manifest::decode::<K>(doc).map(|_| ()), _ => Ok(()))?;
    Ok(info.kind)
}

async fn apply_one<K: Resource>(api: &ApiClient, doc: &Document, force: bool) -> Result<String> {
    let obj: K = manifest::decode(doc).map_err(|e| anyhow::anyhow!("{e}"))?;
    let span = tracing::info_span!(
        "cli.apply",
        kind = K::INFO.kind,
        namespace = %obj.meta().namespace,
        name = %obj.meta().name,
        outcome = tracing::field::Empty,
        resource_version = tracing::field::Empty,
    );
    let (applied, outcome) =
        tracing::Instrument::instrument(api.apply(&obj, force), span.clone()).await?;
    span.record("outcome", outcome.as_str());
    span.record("resource_version", applied.meta().resource_version.as_str());
    Ok(format!(
        "{}/{} {}",
        K::INFO.singular(),
        applied.meta().name,
        outcome.as_str()
    ))
}

/// An object the manifests hold: kind, namespace (defaulted) and name.
type Key = (&'static str, String, String);

fn key_of(kind: &'static str, doc: &Document) -> Key {
    let namespaced = bus_schemas::kinds::lookup(kind).is_some_and(|k| k.namespaced);
    let namespace = doc
        .value
        .pointer("/metadata/namespace")
        .and_then(|v| v.as_str())
        .filter(|ns| !ns.is_empty())
        .unwrap_or(if namespaced { "default" } else { "" });
    (kind, namespace.to_string(), doc.name().to_string())
}

/// Whether `manager`'s last apply is recorded on the object.
pub fn applied_by(meta: &bus_schemas::ObjectMeta, manager: &str) -> bool {
    meta.managed_fields
        .iter()
        .any(|e| e.manager == manager && e.operation == bus_schemas::ManagedFieldsEntry::APPLY)
}

/// Deletes objects of `K` in `namespaces` that match `selector`, were applied by `manager`
/// and are not in `keep`; returns the lines to print.
async fn prune_kind<K: Resource>(
    api: &ApiClient,
    namespaces: &BTreeSet<String>,
    selector: &str,
    manager: &str,
    keep: &BTreeSet<Key>,
) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for namespace in namespaces {
        let options = ListOptions {
            namespace: namespace.clone(),
            label_selector: selector.to_string(),
            ..Default::default()
        };
        for obj in api.list::<K>(&options).await?.items {
            let meta = obj.meta();
            let key = (K::INFO.kind, meta.namespace.clone(), meta.name.clone());
            if keep.contains(&key) || meta.is_deleting() || !applied_by(meta, manager) {
                continue;
            }
            let options = DeleteOptions {
                namespace: meta.namespace.clone(),
                name: meta.name.clone(),
                ..Default::default()
            };
            match api.delete::<K>(&options).await {
                Ok(_) => lines.push(format!("{}/{} pruned", K::INFO.singular(), meta.name)),
                Err(e) if e.is_not_found() => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(lines)
}

pub async fn run(session: &Session, args: ApplyArgs) -> Result<i32> {
    let mut sources = read_sources(&args.files)?;
    let mut errors = Vec::new();
    let mut work = Vec::new();
    for source in &mut sources {
        for doc in &mut source.documents {
            match check(doc, &args.namespace) {
                Ok(kind) => work.push((source.label.clone(), kind, doc.clone())),
                Err(e) => errors.push(format!("error: {}: {e}", source.label)),
            }
        }
    }
    if !errors.is_empty() {
        for e in &errors {
            eprintln!("{e}");
        }
        bail!("{} document(s) invalid; nothing was applied", errors.len());
    }
    if work.is_empty() {
        bail!("no objects passed to apply");
    }
    let mut failed = 0;
    let keep: BTreeSet<Key> = work
        .iter()
        .map(|(_, kind, doc)| key_of(kind, doc))
        .collect();
    for (label, kind, doc) in &work {
        let result = with_kind!(*kind, K => apply_one::<K>(&session.api, doc, args.force_conflicts).await, _ => unreachable!());
        match result {
            Ok(line) => println!("{line}"),
            Err(e) => {
                failed += 1;
                eprintln!("error: {label}: document {}: {e}", doc.index);
            }
        }
    }
    if args.prune {
        if failed > 0 {
            eprintln!("error: not pruning: {failed} document(s) failed to apply");
            return Ok(1);
        }
        let selector = args.selector.as_deref().unwrap_or_default();
        Selector::parse(selector)?;
        let kinds: BTreeSet<&'static str> = keep.iter().map(|(kind, _, _)| *kind).collect();
        for kind in kinds {
            let namespaces: BTreeSet<String> = keep
                .iter()
                .filter(|(k, _, _)| *k == kind)
                .map(|(_, ns, _)| ns.clone())
                .collect();
            let lines = with_kind!(kind, K => prune_kind::<K>(&session.api, &namespaces, selector, &args.field_manager, &keep).await, _ => unreachable!())?;
            for line in lines {
                println!("{line}");
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
