//! Which PersistentVolume a claim may bind to, by Kubernetes' rules: shared by the binder
//! (which picks the smallest that fits) and the scheduler (which places a pod whose claim
//! waits for its first consumer only on a node where such a volume is).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;

use super::persistent_volume::PersistentVolume;
use super::persistent_volume_claim::PersistentVolumeClaim;

/// Why a volume does not fit a claim (the words of the claim's FailedBinding Event).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mismatch {
    /// Bound or reserved for another claim, released, failed, or being deleted.
    Taken,
    Class,
    AccessModes,
    TooSmall,
    Selector,
    /// The claim names another volume.
    NotNamed,
    /// Its node affinity leaves out the node chosen for the claim.
    OtherNode,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mismatch::Taken => "taken",
            Mismatch::Class => "wrong class",
            Mismatch::AccessModes => "missing access modes",
            Mismatch::TooSmall => "too small",
            Mismatch::Selector => "not matching the selector",
            Mismatch::NotNamed => "not the named volume",
            Mismatch::OtherNode => "on other nodes",
        })
    }
}

/// How many volumes missed a claim, for each reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Misses(pub BTreeMap<Mismatch, usize>);

impl fmt::Display for Misses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("no persistent volumes available for this claim");
        }
        f.write_str("no persistent volumes available for this claim: ")?;
        for (i, (why, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{n} {why}")?;
        }
        Ok(())
    }
}

/// Whether `volume` is one `claim` may bind to, ignoring nodes.
pub fn check(volume: &PersistentVolume, claim: &PersistentVolumeClaim) -> Result<(), Mismatch> {
    let meta = &claim.metadata;
    if !claim.spec.volume_name.is_empty() && claim.spec.volume_name != volume.metadata.name {
        return Err(Mismatch::NotNamed);
    }
    let free = match &volume.spec.claim_ref {
        Some(_) => volume.claimed_by(&meta.namespace, &meta.name, &meta.uid),
        // A new volume is Pending until the binder marks it Available.
        None => matches!(volume.status.phase.as_str(), "" | "Pending" | "Available"),
    };
    if !free || volume.metadata.is_deleting() {
        return Err(Mismatch::Taken);
    }
    if volume.spec.storage_class_name != claim.class() {
        return Err(Mismatch::Class);
    }
    let modes = &volume.spec.access_modes;
    if !claim.spec.access_modes.iter().all(|m| modes.contains(m)) {
        return Err(Mismatch::AccessModes);
    }
    if let Some(request) = claim.request() {
        if volume.capacity().is_none_or(|have| have < request) {
            return Err(Mismatch::TooSmall);
        }
    }
    if let Some(selector) = &claim.spec.selector {
        if !selector.matches(&volume.metadata.labels) {
            return Err(Mismatch::Selector);
        }
    }
    Ok(())
}

/// The volume `claim` binds to: one already reserved for it, else the smallest that fits
/// (ties by name, so every reader picks the same) among those `on_node` admits.
pub fn smallest_fit<'a, V: Borrow<PersistentVolume>>(
    volumes: &'a [V],
    claim: &PersistentVolumeClaim,
    on_node: impl Fn(&PersistentVolume) -> bool,
) -> Result<&'a PersistentVolume, Misses> {
    let mut misses = Misses::default();
    let mut best: Option<&PersistentVolume> = None;
    for volume in volumes.iter().map(Borrow::borrow) {
        let fits = check(volume, claim).and_then(|()| {
            if on_node(volume) {
                Ok(())
            } else {
                Err(Mismatch::OtherNode)
            }
        });
        if let Err(why) = fits {
            *misses.0.entry(why).or_default() += 1;
            continue;
        }
        if volume.spec.claim_ref.is_some() {
            return Ok(volume);
        }
        let smaller = best.is_none_or(|b| {
            (volume.capacity(), &volume.metadata.name) < (b.capacity(), &b.metadata.name)
        });
        if smaller {
            best = Some(volume);
        }
    }
    best.ok_or(misses)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn volume(name: &str, size: &str, class: &str) -> PersistentVolume {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"tier": if size == "10Gi" { "slow" } else { "fast" }}},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": class, "local": {"path": "/mnt/disk"}},
            "status": {"phase": "Available"}
        }))
        .expect("volume")
    }

    fn claim(size: &str, class: &str) -> PersistentVolumeClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "data", "namespace": "default", "uid": "c1"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": class,
                     "resources": {"requests": {"storage": size}}}
        }))
        .expect("claim")
    }

    fn pick<'a>(
        volumes: &'a [PersistentVolume],
        claim: &PersistentVolumeClaim,
    ) -> Result<&'a str, String> {
        smallest_fit(volumes, claim, |_| true)
            .map(|v| v.metadata.name.as_str())
            .map_err(|m| m.to_string())
    }

    #[test]
    fn the_smallest_volume_that_fits_is_chosen() {
        let volumes = [
            volume("big", "10Gi", "manual"),
            volume("small", "1Gi", "manual"),
            volume("mid", "5Gi", "manual"),
            volume("other", "4Gi", "fast"),
        ];
        assert_eq!(pick(&volumes, &claim("3Gi", "manual")), Ok("mid"));
        assert_eq!(
            pick(&volumes, &claim("20Gi", "manual")),
            Err(
                "no persistent volumes available for this claim: 1 wrong class, 3 too small".into()
            )
        );
        assert_eq!(
            pick(&[], &claim("1Gi", "manual")),
            Err("no persistent volumes available for this claim".into())
        );
    }

    #[test]
    fn modes_selector_name_and_reservations_narrow_the_choice() {
        let mut volumes = vec![
            volume("mid", "5Gi", "manual"),
            volume("big", "10Gi", "manual"),
        ];
        let mut wants_slow = claim("3Gi", "manual");
        wants_slow.spec.selector = serde_json::from_value(serde_json::json!(
            {"matchLabels": {"tier": "slow"}}))
        .expect("selector");
        assert_eq!(pick(&volumes, &wants_slow), Ok("big"));

        let mut shared = claim("3Gi", "manual");
        shared.spec.access_modes.push("ReadOnlyMany".into());
        assert_eq!(
            pick(&volumes, &shared),
            Err("no persistent volumes available for this claim: 2 missing access modes".into())
        );

        let mut named = claim("3Gi", "manual");
        named.spec.volume_name = "big".into();
        assert_eq!(pick(&volumes, &named), Ok("big"));

        // Bound to another claim: taken. Reserved for this one: preferred over smaller ones.
        let mut taken = volume("taken", "4Gi", "manual");
        taken.spec.claim_ref = Some(super::super::common::ObjectReference {
            namespace: "default".into(),
            name: "other".into(),
            ..Default::default()
        });
        volumes.push(taken.clone());
        assert_eq!(pick(&volumes, &claim("3Gi", "manual")), Ok("mid"));
        let mut reserved = taken;
        reserved.metadata.name = "reserved".into();
        reserved.spec.capacity = volume("x", "10Gi", "").spec.capacity;
        reserved.spec.claim_ref.as_mut().expect("ref").name = "data".into();
        volumes.push(reserved);
        assert_eq!(pick(&volumes, &claim("3Gi", "manual")), Ok("reserved"));
    }

    #[test]
    fn volumes_on_other_nodes_are_counted_apart() {
        let volumes = [volume("a", "5Gi", "local"), volume("b", "5Gi", "local")];
        let only_b = smallest_fit(&volumes, &claim("1Gi", "local"), |v| v.metadata.name == "b");
        assert_eq!(only_b.map(|v| v.metadata.name.as_str()), Ok("b"));
        let none = smallest_fit(&volumes, &claim("1Gi", "local"), |_| false);
        assert_eq!(
            none.map(|_| ()).map_err(|m| m.to_string()),
            Err("no persistent volumes available for this claim: 2 on other nodes".into())
        );
    }
}
