//! Rows of the cluster's own kinds: Namespaces, Nodes, Leases, PriorityClasses and Events.

use bus_schemas::kinds::{Event, Lease, Namespace, Node, PriorityClass};
use bus_schemas::Time;

use super::cells::{age, or_none};
use super::{Column, Row};

impl Row for Namespace {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("STATUS"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            or_none(&self.status.phase),
            age(self.metadata.creation_timestamp, now),
        ]
    }
}

impl Row for Node {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("STATUS"),
        Column::normal("ROLES"),
        Column::normal("AGE"),
        Column::normal("VERSION"),
        Column::wide("INTERNAL-IP"),
        Column::wide("OS-IMAGE"),
        Column::wide("KERNEL-VERSION"),
        Column::wide("POD-CIDR"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        let info = &self.status.node_info;
        let internal_ip = self
            .status
            .addresses
            .iter()
            .find(|a| a.type_ == "InternalIP")
            .map_or("", |a| a.address.as_str());
        vec![
            self.metadata.name.clone(),
            node_status(self),
            // Shoal has no node roles.
            "<none>".into(),
            age(self.metadata.creation_timestamp, now),
            or_none(&info.kubelet_version),
            or_none(internal_ip),
            or_none(&info.os_image),
            or_none(&info.kernel_version),
            or_none(&self.spec.pod_cidr),
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
        Column::normal("NAME"),
        Column::normal("HOLDER"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            or_none(self.spec.holder_identity.as_deref().unwrap_or("")),
            age(self.metadata.creation_timestamp, now),
        ]
    }
}

impl Row for PriorityClass {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("VALUE"),
        Column::normal("GLOBAL-DEFAULT"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            self.value.to_string(),
            self.global_default.to_string(),
            age(self.metadata.creation_timestamp, now),
        ]
    }
}

impl Row for Event {
    const COLUMNS: &'static [Column] = &[
        Column::normal("LAST SEEN"),
        Column::normal("TYPE"),
        Column::normal("REASON"),
        Column::normal("OBJECT"),
        Column::normal("MESSAGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        // Events from older writers carry only eventTime, or only their creation.
        let last_seen = self
            .last_timestamp
            .or(self.event_time)
            .or(self.metadata.creation_timestamp);
        vec![
            age(last_seen, now),
            self.type_.clone(),
            self.reason.clone(),
            format!(
                "{}/{}",
                self.involved_object.kind.to_lowercase(),
                self.involved_object.name
            ),
            self.message.clone(),
        ]
    }
}
