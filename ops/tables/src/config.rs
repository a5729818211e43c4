//! Rows of the configuration kinds: ConfigMaps and Secrets (sizes of values never show).

use bus_schemas::kinds::{ConfigMap, Secret};
use bus_schemas::Time;

use super::cells::age;
use super::{Cell, Column, Row};

impl Row for ConfigMap {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Data").integer(),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        vec![
            self.metadata.name.as_str().into(),
            (self.data.len() + self.binary_data.len()).into(),
            age(self.metadata.creation_timestamp, now).into(),
        ]
    }
}

impl Row for Secret {
    const COLUMNS: &'static [Column] = &[
        Column::normal("Name"),
        Column::normal("Type"),
        Column::normal("Data").integer(),
        Column::normal("Age"),
    ];

    fn cells(&self, now: Time) -> Vec<Cell> {
        vec![
            self.metadata.name.as_str().into(),
            self.type_.as_str().into(),
            self.data.len().into(),
            age(self.metadata.creation_timestamp, now).into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bus_schemas::kinds::byte_string::ByteString;

    #[test]
    fn rows_count_keys_and_show_no_values() {
        let now = chrono::Utc::now();
        let mut cm = ConfigMap::default();
        cm.metadata.name = "app-config".into();
        cm.metadata.creation_timestamp = Some(now - chrono::Duration::seconds(90));
        cm.data.insert("a".into(), "1".into());
        cm.binary_data.insert("b".into(), ByteString::from("2"));
        assert_eq!(
            cm.cells(now),
            [Cell::from("app-config"), Cell::from(2), Cell::from("90s")]
        );
        let mut secret = Secret::default();
        secret.metadata.name = "db".into();
        secret.type_ = "Opaque".into();
        secret
            .data
            .insert("password".into(), ByteString::from("hunter2"));
        let cells = secret.cells(now);
        assert_eq!(cells[..3], [Cell::from("db"), "Opaque".into(), 1.into()]);
        assert!(!cells.iter().any(|c| c.to_string().contains("hunter2")));
    }
}
