//! Rows of the stateful kinds: StatefulSets (READY as ready/desired) and the
//! ControllerRevisions that keep their templates.

use bus_schemas::kinds::{ControllerRevision, StatefulSet};
use bus_schemas::Time;

use super::cells::age;
use super::{Column, Row};

impl Row for StatefulSet {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("READY"),
        Column::normal("AGE"),
        Column::wide("CONTAINERS"),
        Column::wide("IMAGES"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        let containers = &self.spec.template.spec.containers;
        let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
        let images: Vec<&str> = containers.iter().map(|c| c.image.as_str()).collect();
        vec![
            self.metadata.name.clone(),
            format!("{}/{}", self.status.ready_replicas, self.replicas()),
            age(self.metadata.creation_timestamp, now),
            names.join(","),
            images.join(","),
        ]
    }
}

impl Row for ControllerRevision {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("CONTROLLER"),
        Column::normal("REVISION"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        let controller = self.metadata.controller_ref().map_or_else(
            || "<none>".to_string(),
            |r| {
                let group = r.api_version.split_once('/').map_or("", |(g, _)| g);
                let kind = r.kind.to_lowercase();
                match group {
                    "" => format!("{kind}/{}", r.name),
                    g => format!("{kind}.{g}/{}", r.name),
                }
            },
        );
        vec![
            self.metadata.name.clone(),
            controller,
            self.revision.to_string(),
            age(self.metadata.creation_timestamp, now),
        ]
    }
}
