//! What a container runs, resolved from its spec and its image's config the way
//! Docker and the CRI do: command/args against entrypoint/cmd, environment
//! (image first, spec overrides, `HOSTNAME` and a default `PATH`), working
//! directory, user and capabilities. Pure: no file system, no privileges, so it
//! is tested without root.

use crate::container::ContainerSpec;
use crate::error::{Error, Result};
use crate::image::ImageConfig;
use crate::shim;

const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Process {
    pub argv: Vec<String>,
    pub env: Vec<String>,
    pub cwd: String,
    pub user: Option<String>,
    pub caps: Vec<String>,
}

/// Resolve the process of `spec` run from an image configured as `image`, in a
/// pod whose hostname is `hostname`. `withhold_mknod` drops CAP_MKNOD where the
/// node cannot restrict device access (cgroup v2 without a device program).
pub(super) fn resolve(
    spec: &ContainerSpec,
    image: &ImageConfig,
    hostname: &str,
    withhold_mknod: bool,
) -> Result<Process> {
    let argv = argv(spec, image)?;
    let env = env(spec, image, hostname)?;
    let cwd = spec
        .working_dir
        .clone()
        .or_else(|| image.working_dir.clone())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "/".into());
    if !cwd.starts_with('/') {
        return Err(Error::InvalidSpec(format!(
            "working dir {cwd:?} must be absolute"
        )));
    }
    let user = spec
        .user
        .clone()
        .or_else(|| image.user.clone())
        .filter(|u| !u.is_empty());
    if spec.run_as_non_root {
        check_non_root(spec.user.is_some(), user.as_deref())?;
    }
    let mut caps =
        shim::effective_caps(&spec.cap_add, &spec.cap_drop).map_err(Error::InvalidSpec)?;
    if withhold_mknod {
        caps.retain(|c| c != "CAP_MKNOD");
    }
    Ok(Process {
        argv,
        env,
        cwd,
        user,
        caps,
    })
}

/// Kubernetes' `runAsNonRoot` check, on the user the container would run as (`user`,
/// from the spec when `from_spec`, else from the image), with kubelet's messages.
fn check_non_root(from_spec: bool, user: Option<&str>) -> Result<()> {
    let uid = user.unwrap_or("").split(':').next().unwrap_or("");
    let message = match uid.parse::<u32>() {
        Ok(0) if from_spec => "container's runAsUser breaks non-root policy".to_string(),
        _ if uid.is_empty() => "container has runAsNonRoot and image will run as root".into(),
        Ok(0) => "container has runAsNonRoot and image will run as root".into(),
        Ok(_) => return Ok(()),
        Err(_) => format!(
            "container has runAsNonRoot and image has non-numeric user ({uid}), cannot verify user is non-root"
        ),
    };
    Err(Error::InvalidSpec(message))
}

/// A spec's command replaces the image's entrypoint and cmd; its args alone replace
/// only the cmd.
fn argv(spec: &ContainerSpec, image: &ImageConfig) -> Result<Vec<String>> {
    let argv: Vec<String> = match (&spec.command, &spec.args) {
        (Some(cmd), args) => cmd.iter().chain(args.iter().flatten()).cloned().collect(),
        (None, args) => image
            .entrypoint
            .iter()
            .flatten()
            .chain(args.as_ref().or(image.cmd.as_ref()).into_iter().flatten())
            .cloned()
            .collect(),
    };
    if argv.is_empty() {
        return Err(Error::InvalidSpec(
            "no command: neither the spec nor the image sets one".into(),
        ));
    }
    Ok(argv)
}

fn env(spec: &ContainerSpec, image: &ImageConfig, hostname: &str) -> Result<Vec<String>> {
    let mut env: Vec<String> = image.env.clone().unwrap_or_default();
    let mut set = |k: &str, v: &str| {
        env.retain(|e| e.split_once('=').map(|(ek, _)| ek) != Some(k));
        env.push(format!("{k}={v}"));
    };
    set("HOSTNAME", hostname);
    for (k, v) in &spec.env {
        if k.is_empty() || k.contains('=') {
            return Err(Error::InvalidSpec(format!("invalid env name {k:?}")));
        }
        set(k, v);
    }
    if !env.iter().any(|e| e.starts_with("PATH=")) {
        env.push(DEFAULT_PATH.into());
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn image() -> ImageConfig {
        ImageConfig {
            entrypoint: Some(strings(&["/entry"])),
            cmd: Some(strings(&["serve", "--port=80"])),
            env: Some(strings(&["PATH=/image/bin", "MODE=image"])),
            working_dir: Some("/srv".into()),
            user: Some("nobody".into()),
            ..Default::default()
        }
    }

    #[test]
    fn the_image_decides_what_the_spec_leaves_unset() {
        let p = resolve(&ContainerSpec::new("c", "img"), &image(), "pod-a", false).unwrap();
        assert_eq!(p.argv, strings(&["/entry", "serve", "--port=80"]));
        assert_eq!(
            p.env,
            strings(&["PATH=/image/bin", "MODE=image", "HOSTNAME=pod-a"])
        );
        assert_eq!(p.cwd, "/srv");
        assert_eq!(p.user.as_deref(), Some("nobody"));
    }

    #[test]
    fn args_replace_only_the_cmd_and_a_command_replaces_both() {
        let mut spec = ContainerSpec::new("c", "img");
        spec.args = Some(strings(&["once"]));
        let p = resolve(&spec, &image(), "h", false).unwrap();
        assert_eq!(p.argv, strings(&["/entry", "once"]));
        spec.command = Some(strings(&["/bin/sh", "-c"]));
        spec.args = Some(strings(&["echo hi"]));
        let p = resolve(&spec, &image(), "h", false).unwrap();
        assert_eq!(p.argv, strings(&["/bin/sh", "-c", "echo hi"]));
    }

    #[test]
    fn spec_env_overrides_the_image_and_path_defaults_when_nobody_sets_it() {
        let mut spec = ContainerSpec::new("c", "img");
        spec.env = vec![
            ("MODE".into(), "spec".into()),
            ("HOSTNAME".into(), "x".into()),
        ];
        let e = resolve(&spec, &ImageConfig::default(), "h", true).unwrap_err();
        assert!(e.to_string().contains("no command"), "{e}");
        spec.command = Some(strings(&["/bin/true"]));
        let p = resolve(&spec, &ImageConfig::default(), "h", false).unwrap();
        assert_eq!(p.env, strings(&["MODE=spec", "HOSTNAME=x", DEFAULT_PATH]));
        assert_eq!(p.cwd, "/");
        assert_eq!(p.user, None);
    }

    #[test]
    fn bad_specs_are_invalid_with_a_message_naming_the_value() {
        let mut spec = ContainerSpec::new("c", "img");
        spec.env = vec![("A=B".into(), "v".into())];
        let e = resolve(&spec, &image(), "h", false).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidSpec(m) if m.contains("\"A=B\"")),
            "{e}"
        );
        let mut spec = ContainerSpec::new("c", "img");
        spec.working_dir = Some("relative".into());
        let e = resolve(&spec, &image(), "h", false).unwrap_err();
        assert!(
            matches!(&e, Error::InvalidSpec(m) if m.contains("\"relative\"")),
            "{e}"
        );
    }

    #[test]
    fn run_as_non_root_refuses_root_and_users_it_cannot_verify() {
        let mut spec = ContainerSpec::new("c", "img");
        spec.run_as_non_root = true;
        let root_image = ImageConfig {
            cmd: Some(strings(&["sh"])),
            ..Default::default()
        };
        let refused =
            |spec: &ContainerSpec, image: &ImageConfig| match resolve(spec, image, "h", false) {
                Err(Error::InvalidSpec(m)) => m,
                other => panic!("expected a refusal, got {other:?}"),
            };
        assert_eq!(
            refused(&spec, &root_image),
            "container has runAsNonRoot and image will run as root"
        );
        assert!(refused(&spec, &image()).contains("non-numeric user (nobody)"));
        spec.user = Some("0:5".into());
        assert!(refused(&spec, &image()).contains("runAsUser breaks non-root policy"));
        spec.user = Some("1000".into());
        assert_eq!(
            resolve(&spec, &root_image, "h", false)
                .unwrap()
                .user
                .as_deref(),
            Some("1000")
        );
    }

    #[test]
    fn mknod_is_withheld_only_when_asked() {
        let spec = ContainerSpec::new("c", "img");
        let kept = resolve(&spec, &image(), "h", false).unwrap();
        let withheld = resolve(&spec, &image(), "h", true).unwrap();
        assert!(kept.caps.iter().any(|c| c == "CAP_MKNOD"));
        assert!(!withheld.caps.iter().any(|c| c == "CAP_MKNOD"));
        assert_eq!(kept.caps.len(), withheld.caps.len() + 1);
    }
}
