//! Rows of the cluster's own kinds: Namespaces, Nodes, Leases, PriorityClasses and Events.

use bus_schemas::kinds::{Event, Lease, Namespace, Node, PriorityClass};
use bus_schemas::Time;

use super::cells::{age, or_none};
use super::{Cell, Column, Row};

impl Row for Namespace {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Status"),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        vec![
            self.metadata.name.as_str().into(),
            or_none(&self.status.phase).into(),
            age(self.metadata.creation_timestamp, now).into(),
        ]
    }
}

impl Row for Node {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Status"),
        Column::normal("Roles"),
        Column::normal("Age"),
        Column::normal("Version"),
        Column::wide("Internal-IP"),
        Column::wide("External-IP"),
        Column::wide("OS-Image"),
        Column::wide("Kernel-Version"),
        Column::wide("Container-Runtime"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        let info = &self.status.node_info;
        let address = |type_: &str| {
            let found = self.status.addresses.iter().find(|a| a.type_ == type_);
            or_none(found.map_or("", |a| a.address.as_str())).into()
        };
        vec![
            self.metadata.name.as_str().into(),
            node_status(self).into(),
            // Shoal has no node roles.
            "<none>".into(),
            age(self.metadata.creation_timestamp, now).into(),
            or_none(&info.kubelet_version).into(),
            address("InternalIP"),
            address("ExternalIP"),
            or_none(&info.os_image).into(),
            or_none(&info.kernel_version).into(),
            or_none(&info.container_runtime_version).into(),
        ]
    }
}

/// `Ready`, `NotReady` or `Unknown` (never reported), with `,SchedulingDisabled` when cordoned.
fn node_status(node: &Node) -> String {
    let ready = node.status.conditions.iter().find(|c| c.type_ == "Ready");
    let ready = match ready.map(|c| c.status.as_str()) {
        Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    };
    if node.spec.unschedulable {
        format!("{ready},SchedulingDisabled")
    } else {
        ready.to_string()
    }
}

impl Row for Lease {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Holder"),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        vec![
            self.metadata.name.as_str().into(),
            or_none(self.spec.holder_identity.as_deref().unwrap_or("")).into(),
            age(self.metadata.creation_timestamp, now).into(),
        ]
    }
}

impl Row for PriorityClass {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Value").integer(),
        Column::normal("Global-Default").boolean(),
        Column::normal("Age"),
        Column::wide("Preemption-Policy"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        vec![
            self.metadata.name.as_str().into(),
            self.value.into(),
            self.global_default.into(),
            age(self.metadata.creation_timestamp, now).into(),
            or_none(&self.preemption_policy).into(),
        ]
    }
}

impl Row for Event {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Last Seen"),
        Column::normal("Type"),
        Column::normal("Reason"),
        Column::normal("Object"),
        Column::normal("Message"),
        Column::wide("Subobject"),
        Column::wide("Source"),
        Column::wide("First Seen"),
        Column::wide("Count"),
        Column::wide("Name"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        // Events from older writers carry only eventTime, or only when they were first seen or
        // created.
        let first_seen = self.first_timestamp.or(self.metadata.creation_timestamp);
        let last_seen = self.last_timestamp.or(self.event_time).or(first_seen);
        vec![
            age(last_seen, now).into(),
            self.type_.as_str().into(),
            self.reason.as_str().into(),
            format!(
                "{}/{}",
                self.involved_object.kind.to_lowercase(),
                self.involved_object.name
            )
            .into(),
            self.message.as_str().into(),
            self.involved_object.field_path.as_str().into(),
            self.source.component.as_str().into(),
            age(first_seen, now).into(),
            self.count.max(1).to_string().into(),
            self.metadata.name.as_str().into(),
        ]
    }
}
