//! Container lifecycle: the [`Runtime`] operations (sandbox calls delegate to
//! [`super::sandboxes`], the orphan sweep to [`super::orphans`]), the run spec a
//! start hands the shim, supervision through the monitor's pidfd, and the
//! deferred deletion of container directories.

use super::*;

/// Deferred deletion of container directories (upper/work dirs can hold many
/// files). `remove_container` renames the directory into `<state>/trash` (one
/// syscall, so the container is gone from every listing at once) and a single
/// background thread deletes it; the trash is also emptied at startup.
/// NOTE: this takes the rm -rf (1-15 ms on ext4 per container here) off the
/// container stop/restart path.
pub(super) struct Trash {
    dir: PathBuf,
    tx: Mutex<Option<std::sync::mpsc::Sender<PathBuf>>>,
}

impl Trash {
    pub(super) fn new(dir: PathBuf) -> Result<Trash> {
        ensure_dir(&dir)?;
        let (tx, rx) = std::sync::mpsc::channel::<PathBuf>();
        let leftovers: Vec<PathBuf> = fs::read_dir(&dir)
            .ctx(&dir, "readdir")?
            .flatten()
            .map(|e| e.path())
            .collect();
        std::thread::Builder::new()
            .name("shoal-trash".into())
            .spawn(move || {
                for p in leftovers.into_iter().chain(rx) {
                    if let Err(e) = util::remove_dir_all_idem(&p) {
                        tracing::warn!(error = %e, "emptying trash");
                    }
                }
            })
            .ctx(&dir, "spawn trash thread")?;
        Ok(Trash {
            dir,
            tx: Mutex::new(Some(tx)),
        })
    }

    /// Move `path` out of the way and schedule its deletion (idempotent).
    fn discard(&self, path: &Path) -> Result<()> {
        if !path.exists() {
            return Ok(());
        }
        let dest = self.dir.join(format!(
            "{}-{}",
            util::random_hex(4),
            path.file_name().unwrap_or_default().to_string_lossy()
        ));
        match fs::rename(path, &dest) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            // Different filesystem or similar: delete inline.
            Err(_) => return util::remove_dir_all_idem(path),
        }
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        match tx.as_ref().map(|t| t.send(dest.clone())) {
            Some(Ok(())) => Ok(()),
            _ => util::remove_dir_all_idem(&dest),
        }
    }
}

impl LinuxRuntime {
    pub(super) fn container_ids(&self) -> Result<Vec<String>> {
        let dir = self.cfg.state_dir.join("containers");
        let mut v: Vec<String> = fs::read_dir(&dir)
            .ctx(&dir, "readdir")?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| validate_id("container", n).is_ok())
            .collect();
        v.sort();
        Ok(v)
    }

    fn build_run_spec(
        &self,
        sb: &SandboxInfo,
        spec: &ContainerSpec,
        id: &str,
        dir: &Path,
    ) -> Result<(RunSpec, ContainerRecord)> {
        let img = self.images.resolve(&spec.image)?;
        // NOTE: on cgroup v2 device access control needs an eBPF program, which
        // we do not attach yet; without it CAP_MKNOD would let a container create
        // and open host block devices, so it is withheld there.
        let withhold_mknod =
            self.cgroups.version() == cgroups::CgroupVersion::V2 && self.cfg.restrict_devices;
        let super::spec::Process {
            argv,
            env,
            cwd,
            user,
            caps,
        } = super::spec::resolve(spec, &img.config, &sb.name, withhold_mknod)?;
        let mut mounts = vec![
            BindMount {
                source: sb.hosts_path(),
                destination: "/etc/hosts".into(),
                read_only: false,
            },
            BindMount {
                source: sb.resolv_path(),
                destination: "/etc/resolv.conf".into(),
                read_only: false,
            },
            BindMount {
                source: sb.hostname_path(),
                destination: "/etc/hostname".into(),
                read_only: false,
            },
        ];
        for m in &spec.mounts {
            if !m.destination.starts_with('/') {
                return Err(Error::InvalidSpec(format!(
                    "mount destination {:?} must be absolute",
                    m.destination
                )));
            }
            let source = match &m.source {
                MountSource::EmptyDir(name) => {
                    validate_id("volume", name)?;
                    let d = sb.volume_dir(name);
                    if !d.exists() {
                        ensure_dir(&d)?;
                        // World-writable as in Kubernetes, so a container running as
                        // any user can write its own scratch space.
                        fs::set_permissions(
                            &d,
                            std::os::unix::fs::PermissionsExt::from_mode(0o777),
                        )
                        .ctx(&d, "chmod")?;
                    }
                    d
                }
                MountSource::VolumeSubPath { volume, path } => {
                    validate_id("volume", volume)?;
                    let d = sb.volume_dir(volume);
                    ensure_dir(&d)?;
                    sub_path_source(&d, path)?
                }
                MountSource::PersistentVolume { dir, sub_path } => {
                    let provisioned = dir.starts_with(self.cfg.state_dir.join("volumes"))
                        && !dir
                            .components()
                            .any(|c| c == std::path::Component::ParentDir);
                    if !provisioned && !self.cfg.host_path_allowed(dir) {
                        return Err(Error::InvalidSpec(format!(
                            "persistent volume {} is outside this node's volumes and not under a path the node allows (--allow-host-path)",
                            dir.display()
                        )));
                    }
                    if !dir.is_absolute() || !dir.is_dir() {
                        return Err(Error::InvalidSpec(format!(
                            "persistent volume {} must be an existing absolute directory",
                            dir.display()
                        )));
                    }
                    if sub_path.is_empty() {
                        dir.clone()
                    } else {
                        sub_path_source(dir, sub_path)?
                    }
                }
                MountSource::HostPath(p) => {
                    if !self.cfg.host_path_allowed(p) {
                        return Err(Error::InvalidSpec(format!(
                            "hostPath {} is not under a path this node allows (start the node with --allow-host-path)",
                            p.display()
                        )));
                    }
                    if !p.is_absolute() || !p.exists() {
                        return Err(Error::InvalidSpec(format!(
                            "hostPath {} must exist and be absolute",
                            p.display()
                        )));
                    }
                    p.clone()
                }
            };
            mounts.push(BindMount {
                source,
                destination: m.destination.clone(),
                read_only: m.read_only,
            });
        }
        if let Some(path) = &spec.termination_message_path {
            mounts.push(super::termination::prepare(dir, path)?);
        }
        let confinement = self.confinement(spec, &caps)?;
        let lowers = self.images.lower_dirs(&img)?;
        let rootfs = Rootfs::prepare(dir, lowers)?;
        let cgroup = format!("{}/{}", sb.cgroup, id);
        let log_dir = sb.log_dir(&spec.name);
        let record = ContainerRecord {
            id: id.to_string(),
            sandbox_id: sb.id.clone(),
            name: spec.name.clone(),
            image: img.reference.clone(),
            cgroup: cgroup.clone(),
            rootfs: rootfs.clone(),
            env: env.clone(),
            user: user.clone(),
            working_dir: cwd.clone(),
            caps: caps.clone(),
            confinement: confinement.clone(),
            log_dir: log_dir.clone(),
            created_at_ns: util::now_ns(),
        };
        let run = RunSpec {
            container_id: id.to_string(),
            container_dir: dir.to_path_buf(),
            rootfs,
            netns: sb.netns_path.clone(),
            ipcns: sb.ipc_ns_path.clone(),
            utsns: sb.uts_ns_path.clone(),
            pidns: sb.pid_ns_path.clone(),
            cgroup: self.cgroups.config(),
            cgroup_path: cgroup,
            mounts,
            argv,
            env,
            cwd,
            user,
            caps,
            log_dir,
            log: self.cfg.log,
            read_only_rootfs: spec.read_only_rootfs,
            confinement,
        };
        Ok((run, record))
    }

    /// The seccomp profile and no_new_privs of a container with capabilities `caps`. A
    /// `Localhost` profile is read and compiled here, so a missing or bad file fails the
    /// start with its path before any kernel work.
    fn confinement(&self, spec: &ContainerSpec, caps: &[String]) -> Result<Confinement> {
        let seccomp = match &spec.seccomp {
            SeccompProfile::Unconfined => None,
            SeccompProfile::RuntimeDefault => Some(seccomp::default::profile(caps)),
            SeccompProfile::Localhost(name) => {
                let root = &self.cfg.seccomp_profile_root;
                let path = seccomp::localhost::path(root, name).map_err(Error::InvalidSpec)?;
                Some(seccomp::localhost::load(&path, caps).map_err(Error::InvalidSpec)?)
            }
        };
        if let Some(p) = &seccomp {
            seccomp::filters(p).map_err(|e| Error::InvalidSpec(format!("seccomp profile: {e}")))?;
        }
        Ok(Confinement {
            no_new_privs: spec.no_new_privs,
            seccomp,
        })
    }

    fn do_start(&self, sb: &SandboxInfo, spec: &ContainerSpec, id: &str) -> Result<ContainerInfo> {
        let dir = self.container_dir(id);
        let (run, record) = self.build_run_spec(sb, spec, id, &dir)?;
        let r = &spec.resources;
        let mut res = cgroups::CgroupResources::from_k8s(
            r.cpu_request_milli,
            r.cpu_limit_milli,
            r.memory_limit_bytes,
            r.pids_limit.or(self.cfg.default_pids_limit),
        );
        res.restrict_devices = self.cfg.restrict_devices;
        self.cgroups.create(&record.cgroup, &res)?;
        logs::rotate_to_previous(&record.log_dir, self.cfg.log.max_files)?;
        util::write_json_atomic(&dir.join("container.json"), &record)?;
        match shimcall::call(&self.shim, "run", &run)? {
            Reply::Started(pf) => Ok(ContainerInfo {
                id: id.to_string(),
                sandbox_id: sb.id.clone(),
                name: spec.name.clone(),
                image: record.image,
                pid: pf.pid,
                monitor_pid: pf.monitor_pid,
                started_at: util::from_ns(pf.started_at_ns),
            }),
            Reply::Failed(e) => Err(Error::Container {
                id: id.to_string(),
                error: e,
            }),
            other => Err(Error::Shim {
                mode: "run",
                message: format!("unexpected reply {other:?}"),
            }),
        }
    }

    /// Wait (bounded) for a monitor to exit, then reap it if it is our child.
    pub(super) fn wait_monitor(&self, pf: &PidFile, timeout: Duration) -> bool {
        let gone = || !process_alive(pf.monitor_pid, pf.monitor_start_time);
        if !gone() {
            if let Ok(fd) = sys::pidfd_open(pf.monitor_pid) {
                // Re-check after opening: the pid may have been recycled.
                if !gone() {
                    let ms = timeout.as_millis().min(u16::MAX as u128 - 1) as u16;
                    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
                    let _ = poll(&mut fds, PollTimeout::from(ms));
                }
            }
        }
        reap_if_zombie_child(pf.monitor_pid, pf.monitor_start_time);
        gone()
    }

    fn state_of(&self, id: &str, rec: &ContainerRecord) -> Result<ContainerState> {
        let pf = self.pidfile(id)?;
        let started_at = util::from_ns(pf.map(|p| p.started_at_ns).unwrap_or(rec.created_at_ns));
        if let Some(e) = self.exitfile(id)? {
            if let Some(p) = &pf {
                reap_if_zombie_child(p.monitor_pid, p.monitor_start_time);
            }
            return Ok(e.state(started_at));
        }
        let Some(pf) = pf else {
            return Ok(ContainerState::Created);
        };
        if process_alive(pf.pid, pf.start_time) {
            return Ok(ContainerState::Running {
                pid: pf.pid,
                started_at,
            });
        }
        // Init is gone; the monitor is about to write exit.json (it writes it
        // right after reaping), unless it died too.
        self.wait_monitor(&pf, Duration::from_secs(2));
        if let Some(e) = self.exitfile(id)? {
            return Ok(e.state(started_at));
        }
        Ok(ContainerState::Exited {
            exit_code: 255,
            signal: None,
            reason: ExitReason::Unknown,
            started_at,
            finished_at: SystemTime::now(),
        })
    }

    fn kill_container(&self, rec: &ContainerRecord, pf: &PidFile, sig: Signal) {
        if process_alive(pf.pid, pf.start_time) {
            let _ = kill(Pid::from_raw(pf.pid), sig);
        }
        if sig == Signal::SIGKILL {
            if let Ok(pids) = self.cgroups.pids(&rec.cgroup) {
                cgroups::kill_all(&pids);
            }
        }
    }
}

/// Reap `pid` if it is a zombie with the given start time (so it is the same
/// process, and only then — a recycled pid could be another thread's child).
pub(super) fn reap_if_zombie_child(pid: i32, start_time: u64) {
    if let Some((st, true)) = util::proc_start_time(pid) {
        if st == start_time {
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
    }
}

impl Runtime for LinuxRuntime {
    fn create_sandbox(&self, spec: &SandboxSpec) -> Result<SandboxInfo> {
        self.sandbox_create(spec)
    }

    fn remove_sandbox(&self, id: &str) -> Result<()> {
        self.sandbox_remove(id)
    }

    fn list_sandboxes(&self) -> Result<Vec<SandboxInfo>> {
        Ok(self
            .sandbox_ids()?
            .into_iter()
            .filter_map(|id| self.sandbox(&id).ok())
            .collect())
    }

    fn start_container(
        &self,
        sandbox: &SandboxInfo,
        spec: &ContainerSpec,
    ) -> Result<ContainerInfo> {
        validate_id("container name", &spec.name)?;
        if !sandbox.netns_path.exists() || sandbox.pid_ns_path.as_ref().is_some_and(|p| !p.exists())
        {
            return Err(Error::NotFound {
                kind: "sandbox",
                id: sandbox.id.clone(),
            });
        }
        let id = format!("{}-{}", spec.name, util::random_hex(6));
        let dir = self.container_dir(&id);
        fs::create_dir(&dir).ctx(&dir, "mkdir")?;
        match self.do_start(sandbox, spec, &id) {
            Ok(info) => Ok(info),
            Err(e) => {
                // Typed failure: leave nothing behind (cgroup, upper dir, state).
                if let Ok(Some(pf)) = self.pidfile(&id) {
                    self.wait_monitor(&pf, Duration::from_secs(5));
                }
                if let Err(ce) = self.remove_container(&id) {
                    tracing::warn!(container = %id, error = %ce, "cleanup after failed start");
                }
                util::remove_dir_all_idem(&dir)?;
                Err(e)
            }
        }
    }

    fn container_state(&self, id: &str) -> Result<ContainerState> {
        let rec = self.record(id)?;
        self.state_of(id, &rec)
    }

    fn wait_container(&self, id: &str, timeout: Duration) -> Result<ContainerState> {
        let rec = self.record(id)?;
        let deadline = Instant::now() + timeout;
        loop {
            let st = self.state_of(id, &rec)?;
            if st.is_exited() {
                return Ok(st);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(st);
            }
            match self.pidfile(id)? {
                Some(pf) => {
                    self.wait_monitor(&pf, left);
                }
                // Not started yet (start in flight): nothing to wait on.
                None => return Ok(st),
            }
        }
    }

    fn stop_container(&self, id: &str, grace: Duration) -> Result<ContainerState> {
        let rec = self.record(id)?;
        let st = self.state_of(id, &rec)?;
        let Some(pf) = self.pidfile(id)? else {
            return Ok(st);
        };
        if st.is_exited() {
            return Ok(st);
        }
        self.kill_container(&rec, &pf, Signal::SIGTERM);
        let st = self.wait_container(id, grace)?;
        if st.is_exited() {
            return Ok(st);
        }
        self.kill_container(&rec, &pf, Signal::SIGKILL);
        let st = self.wait_container(id, Duration::from_secs(10))?;
        if !st.is_exited() {
            return Err(Error::Timeout(format!(
                "container {id} did not exit after SIGKILL"
            )));
        }
        Ok(st)
    }

    fn remove_container(&self, id: &str) -> Result<()> {
        validate_id("container", id)?;
        let dir = self.container_dir(id);
        let rec = match self.record(id) {
            Ok(r) => r,
            Err(e) if e.is_not_found() => return util::remove_dir_all_idem(&dir),
            Err(e) => return Err(e),
        };
        if let Some(pf) = self.pidfile(id)? {
            if self.exitfile(id)?.is_none() {
                self.kill_container(&rec, &pf, Signal::SIGKILL);
            }
            self.wait_monitor(&pf, Duration::from_secs(10));
        }
        self.cgroups.delete(&rec.cgroup, CGROUP_DELETE_TIMEOUT)?;
        // The overlay lives in the container's own mount namespace (gone with
        // its processes); unmount anyway in case it was mounted on the host.
        rec.rootfs.unmount()?;
        self.trash.discard(&dir)
    }

    fn list_containers(&self) -> Result<Vec<ContainerInfo>> {
        let mut v = Vec::new();
        for id in self.container_ids()? {
            let (Ok(rec), Ok(Some(pf))) = (self.record(&id), self.pidfile(&id)) else {
                continue;
            };
            v.push(ContainerInfo {
                id: id.clone(),
                sandbox_id: rec.sandbox_id,
                name: rec.name,
                image: rec.image,
                pid: pf.pid,
                monitor_pid: pf.monitor_pid,
                started_at: util::from_ns(pf.started_at_ns),
            });
        }
        Ok(v)
    }

    fn exec(&self, id: &str, req: &ExecRequest) -> Result<ExecResult> {
        let spec = self.exec_spec(id, &req.argv, &req.env, req.timeout)?;
        match shimcall::call(&self.shim, "exec", &spec)? {
            Reply::Exec(r) => Ok(ExecResult {
                exit_code: r.exit_code,
                stdout: r.stdout,
                stderr: r.stderr,
                timed_out: r.timed_out,
            }),
            Reply::Failed(e) => Err(Error::Container {
                id: id.to_string(),
                error: e,
            }),
            other => Err(Error::Shim {
                mode: "exec",
                message: format!("unexpected reply {other:?}"),
            }),
        }
    }

    fn container_stats(&self, id: &str) -> Result<Stats> {
        let rec = self.record(id)?;
        self.cgroups.stats(&rec.cgroup)
    }

    fn sandbox_stats(&self, id: &str) -> Result<Stats> {
        validate_id("sandbox", id)?;
        self.cgroups.stats(&self.pod_cgroup(id))
    }

    fn cleanup_orphans(&self, keep: &HashSet<String>) -> Result<CleanupReport> {
        self.sweep_orphans(keep)
    }
}

/// The host path a `subPath` mount binds: `path` under `volume`, created as a directory when
/// absent (as Kubernetes does), and followed through symlinks only as far as they stay inside
/// the volume (a container could otherwise plant a link to the host's files).
fn sub_path_source(volume: &Path, path: &str) -> Result<PathBuf> {
    let invalid = |why: &str| Error::InvalidSpec(format!("subPath {path:?}: {why}"));
    if path.starts_with('/') || path.split('/').any(|part| part == "..") {
        return Err(invalid("must be a relative path without '..'"));
    }
    let joined = volume.join(path);
    if std::fs::symlink_metadata(&joined).is_err() {
        ensure_dir(&joined)?;
    }
    let root = volume
        .canonicalize()
        .map_err(|e| invalid(&format!("volume: {e}")))?;
    let resolved = joined.canonicalize().map_err(|e| invalid(&e.to_string()))?;
    if !resolved.starts_with(&root) {
        return Err(invalid("leads out of its volume"));
    }
    Ok(resolved)
}

impl LinuxRuntime {
    /// What the shim needs to run `argv` in running container `id`: its init's identity,
    /// cgroup, and the container's environment (with `env` over it), directory, user and
    /// capabilities.
    pub(super) fn exec_spec(
        &self,
        id: &str,
        argv: &[String],
        extra_env: &[(String, String)],
        timeout: Duration,
    ) -> Result<ExecSpec> {
        let rec = self.record(id)?;
        let pf = self
            .pidfile(id)?
            .filter(|p| process_alive(p.pid, p.start_time));
        let Some(pf) = pf else {
            return Err(Error::InvalidSpec(format!("container {id} is not running")));
        };
        let mut env = rec.env.clone();
        for (k, v) in extra_env {
            env.retain(|e| e.split_once('=').map(|(ek, _)| ek) != Some(k.as_str()));
            env.push(format!("{k}={v}"));
        }
        Ok(ExecSpec {
            pid: pf.pid,
            start_time: pf.start_time,
            cgroup_procs: self.cgroups.procs_files(&rec.cgroup),
            argv: argv.to_vec(),
            env,
            cwd: rec.working_dir.clone(),
            user: rec.user.clone(),
            caps: rec.caps.clone(),
            confinement: rec.confinement.clone(),
            timeout_ms: timeout.as_millis() as u64,
            max_output: 4 << 20,
        })
    }
}
