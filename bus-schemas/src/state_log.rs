//! The state log's record of its own compaction (docs/architecture.md, "State log").
//!
//! Deleted objects' subjects are purged from the log once their tombstone is older than the
//! operator's retention. A watch that resumes from a revision at or below the highest purged
//! tombstone could have missed a deletion, so it is answered 410 Gone and its client relists.

use serde::{Deserialize, Serialize};

/// Stored at [`crate::subjects::COMPACTION_RECORD`], msgpack with named fields; every write is
/// a CAS on the previous one, so two compactors can never both advance it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionRecord {
    /// Every tombstone at or below this revision may be gone: a watch must start above it.
    /// Written before the purges it covers, so a reader never sees less than was purged.
    #[serde(default)]
    pub revision: u64,
    /// The API replica that compacts (the others stand by while its lease runs).
    #[serde(default)]
    pub holder: String,
    /// When the holder last renewed its lease, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub renewed_ms: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec;

    #[test]
    fn record_round_trips_with_named_fields() {
        let record = CompactionRecord {
            revision: 42,
            holder: "api-1".into(),
            renewed_ms: 7,
        };
        let bytes = codec::to_msgpack(&record).unwrap();
        // Named fields: readers of other languages find them by name.
        assert!(bytes.windows(8).any(|w| w == b"revision"));
        assert_eq!(
            codec::from_msgpack::<CompactionRecord>(&bytes).unwrap(),
            record
        );
        // An empty map (a future writer dropping every field) still decodes.
        assert_eq!(
            codec::from_msgpack::<CompactionRecord>(&[0x80]).unwrap(),
            CompactionRecord::default()
        );
    }
}
