//! `shoal apply -f`: every document is checked first; if any is bad, nothing is applied and
//! each bad document is reported by index and field path.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use bus_schemas::manifest::{self, Document, DocumentError};
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

async fn apply_one<K: Resource>(api: &ApiClient, doc: &Document) -> Result<String> {
    let obj: K = manifest::decode(doc).map_err(|e| anyhow::anyhow!("{e}"))?;
    let span = tracing::info_span!(
        "cli.apply",
        kind = K::INFO.kind,
        namespace = %obj.meta().namespace,
        name = %obj.meta().name,
        outcome = tracing::field::Empty,
        resource_version = tracing::field::Empty,
    );
    let (applied, outcome) = tracing::Instrument::instrument(api.apply(&obj), span.clone()).await?;
    span.record("outcome", outcome.as_str());
    span.record("resource_version", applied.meta().resource_version.as_str());
    Ok(format!(
        "{}/{} {}",
        K::INFO.singular(),
        applied.meta().name,
        outcome.as_str()
    ))
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
    for (label, kind, doc) in work {
        let result =
            with_kind!(kind, K => apply_one::<K>(&session.api, &doc).await, _ => unreachable!());
        match result {
            Ok(line) => println!("{line}"),
            Err(e) => {
                failed += 1;
                eprintln!("error: {label}: document {}: {e}", doc.index);
            }
        }
    }
    Ok(if failed > 0 { 1 } else { 0 })
}
