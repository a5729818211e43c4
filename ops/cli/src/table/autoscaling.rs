//! The HorizontalPodAutoscaler row.

use bus_schemas::kinds::HorizontalPodAutoscaler;
use bus_schemas::Time;

use super::cells::age;
use super::{Column, Row};

impl Row for HorizontalPodAutoscaler {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("REFERENCE"),
        Column::normal("MINPODS"),
        Column::normal("MAXPODS"),
        Column::normal("REPLICAS"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        let target = &self.spec.scale_target_ref;
        vec![
            self.metadata.name.clone(),
            format!("{}/{}", target.kind, target.name),
            self.spec.min_replicas.unwrap_or(0).to_string(),
            self.spec.max_replicas.to_string(),
            self.status.current_replicas.to_string(),
            age(self.metadata.creation_timestamp, now),
        ]
    }
}
