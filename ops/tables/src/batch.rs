//! The CronJob row (kubectl's columns: when it runs, in which zone, whether it is
//! suspended, how many Jobs run, when it last started one).

use bus_schemas::kinds::CronJob;
use bus_schemas::Time;

use super::cells::{age, or_none};
use super::workloads::{workload_wide_cells, WORKLOAD_WIDE};
use super::{Cell, Column, Row};

impl Row for CronJob {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Schedule"),
        Column::normal("Timezone"),
        Column::normal("Suspend").boolean(),
        Column::normal("Active").integer(),
        Column::normal("Last Schedule"),
        Column::normal("Age"),
        WORKLOAD_WIDE[0],
        WORKLOAD_WIDE[1],
        WORKLOAD_WIDE[2],
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let spec = &self.spec;
        let job = &spec.job_template.spec;
        let last = match self.status.last_schedule_time {
            Some(t) => age(Some(t), now),
            None => "<none>".into(),
        };
        let mut cells: Vec<Cell> = vec![
            self.metadata.name.as_str().into(),
            spec.schedule.as_str().into(),
            or_none(spec.time_zone.as_deref().unwrap_or("")).into(),
            spec.suspend.unwrap_or(false).into(),
            self.status.active.len().into(),
            last.into(),
            age(self.metadata.creation_timestamp, now).into(),
        ];
        cells.extend(workload_wide_cells(&job.template, job.selector.as_ref()));
        cells
    }
}
