//! `shoal scale deploy/NAME --replicas N` (also ReplicaSets, and the `KIND NAME` form).
//!
//! Without a precondition the new count goes out as a merge patch, so a concurrent change to
//! any other field is never lost. With `--current-replicas` the check and the write must be
//! one step: the object is updated with the resourceVersion that was checked (CAS), and on
//! Conflict re-read and checked again.

use anyhow::{bail, Result};
use bus_schemas::api::PatchRequest;
use bus_schemas::kinds::{Deployment, ReplicaSet};
use bus_schemas::Resource;

use crate::cli::ScaleArgs;
use crate::kinds;
use crate::remote::Session;
use crate::rollout::{display, target};

const CONFLICT_RETRIES: usize = 10;

/// The kinds with a `spec.replicas`, and how to read and write it.
trait Scalable: Resource {
    fn replicas(&self) -> i32;
    fn set_replicas(&mut self, n: i32);
}

impl Scalable for Deployment {
    fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }
    fn set_replicas(&mut self, n: i32) {
        self.spec.replicas = Some(n);
    }
}

impl Scalable for ReplicaSet {
    fn replicas(&self) -> i32 {
        self.spec.replicas.unwrap_or(1)
    }
    fn set_replicas(&mut self, n: i32) {
        self.spec.replicas = Some(n);
    }
}

pub async fn run(session: &Session, args: ScaleArgs) -> Result<i32> {
    let (info, name) = target(
        &args.kind,
        args.name.as_deref(),
        "shoal scale deploy/NAME --replicas N",
    )?;
    if args.replicas < 0 {
        bail!("--replicas must be 0 or more, not {}", args.replicas);
    }
    let namespace = kinds::namespace_for(info, &args.namespace);
    match info.kind {
        "Deployment" => scale::<Deployment>(session, &namespace, &name, &args).await?,
        "ReplicaSet" => scale::<ReplicaSet>(session, &namespace, &name, &args).await?,
        other => {
            bail!("cannot scale a {other}: only deployments and replicasets have a replica count")
        }
    }
    println!("{} scaled", display(info, &name));
    Ok(0)
}

async fn scale<K: Scalable>(
    session: &Session,
    ns: &str,
    name: &str,
    args: &ScaleArgs,
) -> Result<()> {
    let Some(expected) = args.current_replicas else {
        let patch = serde_json::json!({"spec": {"replicas": args.replicas}});
        let request = PatchRequest {
            namespace: ns.into(),
            name: name.into(),
            patch: patch.to_string(),
            status: false,
        };
        session.api.patch::<K>(&request).await?;
        return Ok(());
    };
    for _ in 0..CONFLICT_RETRIES {
        let mut obj: K = session.api.get(ns, name).await?;
        let current = obj.replicas();
        if current != expected {
            bail!(
                "{} has {current} replicas, not the {expected} --current-replicas expects: nothing changed",
                display(&K::INFO, name)
            );
        }
        obj.set_replicas(args.replicas);
        match session.api.update(&obj).await {
            Ok(_) => return Ok(()),
            Err(e) if e.is_conflict() => continue,
            Err(e) => return Err(e.into()),
        }
    }
    bail!(
        "{} kept changing while scaling ({CONFLICT_RETRIES} conflicting writes): try again",
        display(&K::INFO, name)
    )
}
