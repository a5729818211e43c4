//! Rows of the stateful kinds: StatefulSets (READY as ready/desired) and the
//! ControllerRevisions that keep their templates.

use bus_schemas::kinds::{ControllerRevision, StatefulSet};
use bus_schemas::Time;

use super::cells::age;
use super::{Cell, Column, Row};

impl Row for StatefulSet {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Ready"),
        Column::normal("Age"),
        Column::wide("Containers"),
        Column::wide("Images"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let containers = &self.spec.template.spec.containers;
        let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
        let images: Vec<&str> = containers.iter().map(|c| c.image.as_str()).collect();
        vec![
            self.metadata.name.as_str().into(),
            format!("{}/{}", self.status.ready_replicas, self.replicas()).into(),
            age(self.metadata.creation_timestamp, now).into(),
            names.join(",").into(),
            images.join(",").into(),
        ]
    }
}

impl Row for ControllerRevision {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Controller"),
        Column::normal("Revision").integer(),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
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
            self.metadata.name.as_str().into(),
            controller.into(),
            self.revision.into(),
            age(self.metadata.creation_timestamp, now).into(),
        ]
    }
}
