//! Pod sandbox plumbing: the namespaces (through the shim), the pod's veth and
//! IP, the pause process of a shared pid namespace, and their removal.

use super::lifecycle::reap_if_zombie_child;
use super::*;

impl LinuxRuntime {
    pub(super) fn sandbox_create(&self, spec: &SandboxSpec) -> Result<SandboxInfo> {
        validate_id("sandbox", &spec.id)?;
        if spec.name.is_empty() || spec.name.len() > 63 {
            return Err(Error::InvalidSpec(format!(
                "pod name {:?} must be 1-63 chars (it is the hostname)",
                spec.name
            )));
        }
        let dir = self.sandbox_dir(&spec.id);
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(Error::AlreadyExists {
                    kind: "sandbox",
                    id: spec.id.clone(),
                })
            }
            Err(e) => return Err(Error::io(&dir, "mkdir", e)),
        }
        match self.do_create_sandbox(spec) {
            Ok(info) => Ok(info),
            Err(e) => {
                if let Err(ce) = self.remove_sandbox(&spec.id) {
                    tracing::warn!(sandbox = %spec.id, error = %ce, "cleanup after failed sandbox creation");
                }
                Err(e)
            }
        }
    }

    pub(super) fn sandbox_remove(&self, id: &str) -> Result<()> {
        validate_id("sandbox", id)?;
        for cid in self.container_ids()? {
            if let Ok(rec) = self.record(&cid) {
                if rec.sandbox_id == id {
                    self.remove_container(&cid)?;
                }
            }
        }
        if self.ns_dir(id).exists() {
            self.delete_veth(&net::host_veth_name(id));
        }
        self.kill_pause(id)?;
        self.release_namespaces(id)?;
        self.cgroups
            .delete(&self.pod_cgroup(id), CGROUP_DELETE_TIMEOUT)?;
        self.ipam.release_owner(id)?;
        util::remove_dir_all_idem(&self.sandbox_dir(id))
    }

    fn do_create_sandbox(&self, spec: &SandboxSpec) -> Result<SandboxInfo> {
        let dir = self.sandbox_dir(&spec.id);
        let ip = self.ipam.allocate(&spec.id)?;
        let cidr = self.cfg.network.pod_cidr;
        fs::write(dir.join("hosts"), sandbox::render_hosts(spec, ip))
            .ctx(dir.join("hosts"), "write")?;
        fs::write(dir.join("resolv.conf"), spec.dns.render())
            .ctx(dir.join("resolv.conf"), "write")?;
        fs::write(dir.join("hostname"), format!("{}\n", spec.name))
            .ctx(dir.join("hostname"), "write")?;
        ensure_dir(&dir.join("volumes"))?;
        ensure_dir(&dir.join("logs"))?;
        let cgroup = self.pod_cgroup(&spec.id);
        let mut res = spec.resources.cgroup(None);
        res.restrict_devices = false;
        self.cgroups.create(&cgroup, &res)?;
        let ns_dir = self.ns_dir(&spec.id);
        let info = SandboxInfo {
            id: spec.id.clone(),
            name: spec.name.clone(),
            namespace: spec.namespace.clone(),
            ip,
            gateway: cidr.gateway(),
            prefix: cidr.prefix,
            host_veth: net::host_veth_name(&spec.id),
            netns_path: ns_dir.join("net"),
            ipc_ns_path: ns_dir.join("ipc"),
            uts_ns_path: ns_dir.join("uts"),
            pid_ns_path: spec.share_process_namespace.then(|| ns_dir.join("pid")),
            pause: None,
            cgroup,
            dir: dir.clone(),
            created_at: SystemTime::now(),
        };
        util::write_json_atomic(&dir.join("sandbox.json"), &info)?;
        let pause_file = spec.share_process_namespace.then(|| dir.join(PAUSE_FILE));
        let mut req = SandboxNsSpec {
            ns_dir,
            hostname: spec.name.clone(),
            node_netns: self.cfg.network.host_netns.clone(),
            bridge: self.cfg.network.bridge.clone(),
            gateway: cidr.gateway(),
            prefix: cidr.prefix,
            ensure_bridge: false,
            host_veth: info.host_veth.clone(),
            ip,
            mtu: self.cfg.network.mtu,
            pause_file,
        };
        // The first sandbox of this runtime makes sure the bridge exists and has
        // the gateway address; holding the lock keeps concurrent first creations
        // from racing each other.
        let mut ready = self.bridge_ready.lock().unwrap_or_else(|e| e.into_inner());
        let pause = if !*ready {
            req.ensure_bridge = true;
            let pause = self.sandbox_shim(&spec.id, &req)?;
            *ready = true;
            pause
        } else {
            drop(ready);
            self.sandbox_shim(&spec.id, &req)?
        };
        if pause.is_some() {
            let info = SandboxInfo { pause, ..info };
            util::write_json_atomic(&dir.join("sandbox.json"), &info)?;
            return Ok(info);
        }
        Ok(info)
    }

    fn sandbox_shim(&self, id: &str, req: &SandboxNsSpec) -> Result<Option<PauseProcess>> {
        match shimcall::call(&self.shim, "sandbox", req)? {
            Reply::Done => Ok(None),
            Reply::Pause(p) => Ok(Some(p)),
            Reply::Failed(e) => Err(Error::Container {
                id: id.to_string(),
                error: e,
            }),
            other => Err(Error::Shim {
                mode: "sandbox",
                message: format!("unexpected reply {other:?}"),
            }),
        }
    }

    fn delete_veth(&self, name: &str) {
        let mut cmd = match &self.cfg.network.host_netns {
            Some(ns) => {
                let mut c = std::process::Command::new(&self.shim);
                c.arg("netns-exec").arg(ns).arg("ip");
                c
            }
            None => std::process::Command::new("ip"),
        };
        // "Cannot find device" (already gone, e.g. half-created sandbox) is fine.
        let _ = cmd
            .args(["link", "del", name])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }

    /// Kill the pause process of a shared pid namespace (and with it anything
    /// left in the namespace), wait for it and reap it. Idempotent.
    fn kill_pause(&self, id: &str) -> Result<()> {
        let file = self.sandbox_dir(id).join(PAUSE_FILE);
        let Some(p) = read_json_opt::<PauseProcess>(&file)? else {
            return Ok(());
        };
        if process_alive(p.pid, p.start_time) {
            let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
            let pf = PidFile {
                pid: p.pid,
                start_time: p.start_time,
                monitor_pid: p.pid,
                monitor_start_time: p.start_time,
                started_at_ns: 0,
            };
            if !self.wait_monitor(&pf, Duration::from_secs(10)) {
                return Err(Error::Timeout(format!(
                    "pause process {} of sandbox {id} did not exit after SIGKILL",
                    p.pid
                )));
            }
        }
        reap_if_zombie_child(p.pid, p.start_time);
        match fs::remove_file(&file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&file, "rm", e)),
            _ => Ok(()),
        }
    }

    pub(super) fn release_namespaces(&self, id: &str) -> Result<()> {
        let ns_dir = self.ns_dir(id);
        if !ns_dir.exists() {
            return Ok(());
        }
        for n in NS_NAMES {
            let p = ns_dir.join(n);
            match umount2(&p, MntFlags::MNT_DETACH) {
                Ok(()) | Err(nix::errno::Errno::EINVAL) | Err(nix::errno::Errno::ENOENT) => {}
                Err(e) => return Err(Error::sys(&p, "umount namespace", e)),
            }
        }
        util::remove_dir_all_idem(&ns_dir)
    }

    pub(super) fn sandbox_ids(&self) -> Result<Vec<String>> {
        let dir = self.cfg.state_dir.join("sandboxes");
        let mut v: Vec<String> = fs::read_dir(&dir)
            .ctx(&dir, "readdir")?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| validate_id("sandbox", n).is_ok())
            .collect();
        v.sort();
        Ok(v)
    }
}
