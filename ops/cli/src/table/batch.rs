//! The CronJob row (kubectl's columns: when it runs, in which zone, whether it is
//! suspended, how many Jobs run, when it last started one).

use bus_schemas::kinds::CronJob;
use bus_schemas::Time;

use super::cells::{age, selector_text};
use super::{Column, Row};

impl Row for CronJob {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("SCHEDULE"),
        Column::normal("TIMEZONE"),
        Column::normal("SUSPEND"),
        Column::normal("ACTIVE"),
        Column::normal("LAST SCHEDULE"),
        Column::normal("AGE"),
        Column::wide("CONTAINERS"),
        Column::wide("IMAGES"),
        Column::wide("SELECTOR"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        let spec = &self.spec;
        let containers = &spec.job_template.spec.template.spec.containers;
        let names: Vec<&str> = containers.iter().map(|c| c.name.as_str()).collect();
        let images: Vec<&str> = containers.iter().map(|c| c.image.as_str()).collect();
        let last = match self.status.last_schedule_time {
            Some(t) => age(Some(t), now),
            None => "<none>".into(),
        };
        vec![
            self.metadata.name.clone(),
            spec.schedule.clone(),
            spec.time_zone.clone().unwrap_or_else(|| "<none>".into()),
            spec.suspend.unwrap_or(false).to_string(),
            self.status.active.len().to_string(),
            last,
            age(self.metadata.creation_timestamp, now),
            names.join(","),
            images.join(","),
            selector_text(spec.job_template.spec.selector.as_ref()),
        ]
    }
}
