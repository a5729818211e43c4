//! The runtime seam: the real Linux runtime, or the hollow one for scale tests. Everything
//! above this module is the same code for both.

use std::sync::Arc;

use shoal_node::image::ImageInfo;
use shoal_node::logs::LogReader;
use shoal_node::{HollowRuntime, LinuxRuntime, Runtime, SandboxInfo};

use crate::registry::{Registry, RegistryError};

#[derive(Clone)]
pub enum Backend {
    Linux(Arc<LinuxRuntime>),
    /// Simulated containers: no kernel work. For scale tests only.
    Hollow(Arc<HollowRuntime>),
}

impl Backend {
    pub fn runtime(&self) -> Arc<dyn Runtime> {
        match self {
            Backend::Linux(rt) => rt.clone(),
            Backend::Hollow(rt) => rt.clone(),
        }
    }

    /// The real runtime, for what only it can do (interactive exec sessions).
    pub fn linux(&self) -> Option<&Arc<LinuxRuntime>> {
        match self {
            Backend::Linux(rt) => Some(rt),
            Backend::Hollow(_) => None,
        }
    }

    pub fn is_hollow(&self) -> bool {
        matches!(self, Backend::Hollow(_))
    }

    /// The image when nothing needs pulling: already on this machine and the container does
    /// not ask to pull always. A hollow node has every image (and no details of any).
    pub fn present_image(&self, reference: &str, always_pull: bool) -> Option<Option<ImageInfo>> {
        match self {
            Backend::Hollow(_) => Some(None),
            Backend::Linux(_) if always_pull => None,
            Backend::Linux(rt) => rt
                .images()
                .resolve(&crate::registry::normalise(reference))
                .ok()
                .map(Some),
        }
    }

    /// Pulls the image's missing blobs from the cluster registry and unpacks them.
    pub async fn pull_image(
        &self,
        registry: &Registry,
        reference: &str,
    ) -> Result<Option<ImageInfo>, RegistryError> {
        match self {
            Backend::Hollow(_) => Ok(None),
            Backend::Linux(rt) => {
                let reference = crate::registry::normalise(reference);
                match registry.pull(rt.images(), &reference).await {
                    Ok(info) => Ok(Some(info)),
                    // Offline from the registry but present locally: use what we have.
                    Err(e @ RegistryError::Store(_)) => {
                        rt.images().resolve(&reference).map(Some).map_err(|_| e)
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Where the runtime keeps its state (the disk that DiskPressure watches).
    pub fn state_dir(&self) -> Option<std::path::PathBuf> {
        match self {
            Backend::Linux(rt) => Some(rt.config().state_dir.clone()),
            Backend::Hollow(_) => None,
        }
    }

    /// Where pod volume `name` of `sandbox` lives on this machine; None for hollow nodes.
    pub fn volume_dir(&self, sandbox: &str, name: &str) -> Option<std::path::PathBuf> {
        match self {
            Backend::Linux(rt) => Some(rt.volume_dir(sandbox, name)),
            Backend::Hollow(_) => None,
        }
    }

    pub fn logs(&self, sandbox: &SandboxInfo, container: &str) -> Option<LogReader> {
        match self {
            Backend::Linux(rt) => Some(rt.logs_by_name(sandbox, container)),
            Backend::Hollow(_) => None,
        }
    }
}
