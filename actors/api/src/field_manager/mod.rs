//! Server-side apply's bookkeeping, as pure functions over JSON: which manager owns which
//! fields, and how an applied manifest merges into the live object.
//!
//! # Layout
//! - [`fieldset`]: sets of field paths and their FieldsV1 encoding (`f:`, `k:`, `v:`, `.`).
//! - [`schema`]: how each list of the core kinds merges: keyed by merge key, a set, or atomic.
//! - [`tree`]: walking objects by path: the fields a value names, diffs, merge, removal.
//! - [`managers`]: apply and update against `metadata.managedFields`: conflicts, takeovers,
//!   removal of fields a manager stopped naming.
//!
//! Nothing here touches the bus: the API's apply verb ([`crate::apply`]) and update paths feed
//! it objects and write what it returns.

pub mod fieldset;
pub mod managers;
pub mod schema;
pub mod tree;

pub use fieldset::{FieldPath, FieldSet};
pub use managers::{
    managed_view, merge_applied, record_create, record_update, settle_apply, Applier, Conflict,
    Merged,
};
