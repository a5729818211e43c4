//! What a pod reads from outside its own container specs: ConfigMaps, Secrets and the
//! downward API, as environment variables and as volumes that follow their sources.
//!
//! - [`sources`]: ConfigMaps from the shared cache; Secrets fetched from the API (the state
//!   log holds them encrypted) and refetched when their revision changes.
//! - [`downward`]: the pod's own fields and its containers' resources, as text.
//! - [`env`]: `env[].valueFrom` and `envFrom` resolved for one container.
//! - [`payload`]: the files a configMap, secret, downwardAPI or projected volume holds now.
//! - [`atomic_writer`]: Kubernetes' `..data` symlink swap, so a reader sees the old files
//!   or the new ones, never a mix.
//! - [`volumes`]: writing a pod's configuration volumes, and the container preparation that
//!   brings env, mounts and the volume state together.

pub mod atomic_writer;
pub mod downward;
pub mod env;
pub mod payload;
pub mod sources;
pub mod volumes;

pub use sources::ConfigSources;
