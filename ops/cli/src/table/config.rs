//! Rows of the configuration kinds: ConfigMaps and Secrets (sizes of values never show).

use bus_schemas::kinds::{ConfigMap, Secret};
use bus_schemas::Time;

use super::cells::age;
use super::{Column, Row};

impl Row for ConfigMap {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("DATA"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            (self.data.len() + self.binary_data.len()).to_string(),
            age(self.metadata.creation_timestamp, now),
        ]
    }
}

impl Row for Secret {
    const COLUMNS: &'static [Column] = &[
        Column::normal("NAME"),
        Column::normal("TYPE"),
        Column::normal("DATA"),
        Column::normal("AGE"),
    ];

    fn cells(&self, now: Time) -> Vec<String> {
        vec![
            self.metadata.name.clone(),
            self.type_.clone(),
            self.data.len().to_string(),
            age(self.metadata.creation_timestamp, now),
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
        assert_eq!(cm.cells(now), ["app-config", "2", "90s"]);
        let mut secret = Secret::default();
        secret.metadata.name = "db".into();
        secret.type_ = "Opaque".into();
        secret
            .data
            .insert("password".into(), ByteString::from("hunter2"));
        let cells = secret.cells(now);
        assert_eq!(cells[..3], ["db", "Opaque", "1"]);
        assert!(!cells.concat().contains("hunter2"));
    }
}
