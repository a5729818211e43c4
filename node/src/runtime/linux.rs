//! [`LinuxRuntime`]: real containers via `shoal-shim`, overlayfs, cgroups and
//! network namespaces. See the module docs of [`crate::runtime`].

use super::shimcall::{self, find_shim};
use super::{CleanupReport, ExecRequest, ExecResult, Runtime, Stats};
use crate::cgroups::{self, CgroupConfig, CgroupDriver};
use crate::container::{
    ContainerInfo, ContainerRecord, ContainerSpec, ContainerState, ExitFile, ExitReason,
    MountSource, PidFile,
};
use crate::error::{Error, IoCtx, Result};
use crate::image::ImageStore;
use crate::logs::{self, LogConfig, LogReader};
use crate::net::{self, Ipam, NetworkConfig};
use crate::rootfs::Rootfs;
use crate::sandbox::{self, PauseProcess, SandboxInfo, SandboxSpec};
use crate::shim::{self, BindMount, ExecSpec, Reply, RunSpec, SandboxNsSpec};
use crate::sys;
use crate::util::{self, process_alive, read_json_opt, validate_id};
use nix::mount::{umount2, MntFlags};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::fs;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

const NS_NAMES: [&str; 4] = ["net", "ipc", "uts", "pid"];
/// Pause process record of a shared pid namespace, in the sandbox dir.
const PAUSE_FILE: &str = "pause.json";
const CGROUP_DELETE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct RuntimeConfig {
    /// Persistent state: images, sandboxes, containers, IP allocations.
    pub state_dir: PathBuf,
    /// Namespace bind mounts; default `<state_dir>/run`.
    pub run_dir: Option<PathBuf>,
    /// Parent of all pod cgroups, e.g. `shoal` -> `shoal/<sandbox>/<container>`.
    pub cgroup_parent: String,
    /// None = detect v1/v2 from the host.
    pub cgroup: Option<CgroupConfig>,
    pub network: NetworkConfig,
    /// None = [`shimcall::find_shim`] (`$SHOAL_SHIM` or next to the executable).
    pub shim_path: Option<PathBuf>,
    /// pids.max for containers that set no limit (fork-bomb protection).
    pub default_pids_limit: Option<u64>,
    pub log: LogConfig,
    /// Allow `MountSource::HostPath` mounts.
    pub allow_host_path: bool,
    /// Become a child subreaper so monitors (orphaned by the shim's exit) are
    /// reparented to, and reaped by, this process while it runs. Without it
    /// they go to pid 1, which must reap them.
    pub reap_monitors: bool,
    /// Enforce the default device allow-list (v1 devices cgroup).
    pub restrict_devices: bool,
}

impl RuntimeConfig {
    pub fn new(state_dir: impl Into<PathBuf>, network: NetworkConfig) -> Self {
        RuntimeConfig {
            state_dir: state_dir.into(),
            run_dir: None,
            cgroup_parent: "shoal".into(),
            cgroup: None,
            network,
            shim_path: None,
            default_pids_limit: Some(1024),
            log: LogConfig::default(),
            allow_host_path: false,
            reap_monitors: true,
            restrict_devices: true,
        }
    }
}

pub struct LinuxRuntime {
    cfg: RuntimeConfig,
    shim: PathBuf,
    run_dir: PathBuf,
    images: ImageStore,
    cgroups: Box<dyn CgroupDriver>,
    ipam: Ipam,
    bridge_ready: Mutex<bool>,
    trash: Trash,
}

/// Deferred deletion of container directories (upper/work dirs can hold many
/// files). `remove_container` renames the directory into `<state>/trash` (one
/// syscall, so the container is gone from every listing at once) and a single
/// background thread deletes it; the trash is also emptied at startup.
/// NOTE: this takes the rm -rf (1-15 ms on ext4 per container here) off the
/// container stop/restart path.
struct Trash {
    dir: PathBuf,
    tx: Mutex<Option<std::sync::mpsc::Sender<PathBuf>>>,
}

impl Trash {
    fn new(dir: PathBuf) -> Result<Trash> {
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

fn ensure_dir(p: &Path) -> Result<()> {
    fs::create_dir_all(p).ctx(p, "mkdir")
}

impl LinuxRuntime {
    pub fn new(cfg: RuntimeConfig) -> Result<LinuxRuntime> {
        cgroups::validate_path(&cfg.cgroup_parent)?;
        let run_dir = cfg
            .run_dir
            .clone()
            .unwrap_or_else(|| cfg.state_dir.join("run"));
        for d in ["sandboxes", "containers"] {
            ensure_dir(&cfg.state_dir.join(d))?;
        }
        ensure_dir(&run_dir)?;
        let shim = match &cfg.shim_path {
            Some(p) => p.clone(),
            None => find_shim().ok_or_else(|| {
                Error::Unsupported(
                    "shoal-shim binary not found (set SHOAL_SHIM or RuntimeConfig::shim_path)"
                        .into(),
                )
            })?,
        };
        let cg = match &cfg.cgroup {
            Some(c) => c.clone(),
            None => cgroups::detect()?,
        };
        if cfg.reap_monitors {
            nix::sys::prctl::set_child_subreaper(true).ctx("prctl", "PR_SET_CHILD_SUBREAPER")?;
        }
        Ok(LinuxRuntime {
            images: ImageStore::open(cfg.state_dir.join("images"))?,
            ipam: Ipam::open(cfg.state_dir.join("ipam"), cfg.network.pod_cidr)?,
            cgroups: cgroups::driver_from(&cg),
            shim,
            run_dir,
            trash: Trash::new(cfg.state_dir.join("trash"))?,
            cfg,
            bridge_ready: Mutex::new(false),
        })
    }

    pub fn images(&self) -> &ImageStore {
        &self.images
    }

    pub fn config(&self) -> &RuntimeConfig {
        &self.cfg
    }

    pub fn cgroup_driver(&self) -> &dyn CgroupDriver {
        self.cgroups.as_ref()
    }

    pub fn sandbox_dir(&self, id: &str) -> PathBuf {
        self.cfg.state_dir.join("sandboxes").join(id)
    }

    pub fn container_dir(&self, id: &str) -> PathBuf {
        self.cfg.state_dir.join("containers").join(id)
    }

    fn ns_dir(&self, sandbox_id: &str) -> PathBuf {
        self.run_dir.join(sandbox_id)
    }

    fn pod_cgroup(&self, sandbox_id: &str) -> String {
        format!("{}/{}", self.cfg.cgroup_parent, sandbox_id)
    }

    /// Logs of the current and previous instance of a container.
    pub fn logs(&self, container_id: &str) -> Result<LogReader> {
        Ok(LogReader::new(self.record(container_id)?.log_dir))
    }

    /// Logs by pod and container name (works after the container was removed).
    pub fn logs_by_name(&self, sandbox: &SandboxInfo, container_name: &str) -> LogReader {
        LogReader::new(sandbox.log_dir(container_name))
    }

    pub fn sandbox(&self, id: &str) -> Result<SandboxInfo> {
        validate_id("sandbox", id)?;
        read_json_opt(&self.sandbox_dir(id).join("sandbox.json"))?.ok_or_else(|| Error::NotFound {
            kind: "sandbox",
            id: id.into(),
        })
    }

    fn record(&self, id: &str) -> Result<ContainerRecord> {
        validate_id("container", id)?;
        read_json_opt(&self.container_dir(id).join("container.json"))?.ok_or_else(|| {
            Error::NotFound {
                kind: "container",
                id: id.into(),
            }
        })
    }

    fn pidfile(&self, id: &str) -> Result<Option<PidFile>> {
        read_json_opt(&self.container_dir(id).join("pid.json"))
    }

    fn exitfile(&self, id: &str) -> Result<Option<ExitFile>> {
        read_json_opt(&self.container_dir(id).join("exit.json"))
    }

    // ---- sandbox -------------------------------------------------------

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

    fn release_namespaces(&self, id: &str) -> Result<()> {
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

    // ---- containers ----------------------------------------------------

    fn container_ids(&self) -> Result<Vec<String>> {
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

    fn sandbox_ids(&self) -> Result<Vec<String>> {
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

    fn build_run_spec(
        &self,
        sb: &SandboxInfo,
        spec: &ContainerSpec,
        id: &str,
        dir: &Path,
    ) -> Result<(RunSpec, ContainerRecord)> {
        let img = self.images.resolve(&spec.image)?;
        let ic = &img.config;
        let argv: Vec<String> = match (&spec.command, &spec.args) {
            (Some(cmd), args) => cmd.iter().chain(args.iter().flatten()).cloned().collect(),
            (None, args) => ic
                .entrypoint
                .iter()
                .flatten()
                .chain(args.as_ref().or(ic.cmd.as_ref()).into_iter().flatten())
                .cloned()
                .collect(),
        };
        if argv.is_empty() {
            return Err(Error::InvalidSpec(
                "no command: neither the spec nor the image sets one".into(),
            ));
        }
        let mut env: Vec<String> = ic.env.clone().unwrap_or_default();
        let mut set = |k: &str, v: &str| {
            env.retain(|e| e.split_once('=').map(|(ek, _)| ek) != Some(k));
            env.push(format!("{k}={v}"));
        };
        set("HOSTNAME", &sb.name);
        for (k, v) in &spec.env {
            if k.is_empty() || k.contains('=') {
                return Err(Error::InvalidSpec(format!("invalid env name {k:?}")));
            }
            set(k, v);
        }
        if !env.iter().any(|e| e.starts_with("PATH=")) {
            env.push("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
        }
        let cwd = spec
            .working_dir
            .clone()
            .or_else(|| ic.working_dir.clone())
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
            .or_else(|| ic.user.clone())
            .filter(|u| !u.is_empty());
        let mut caps =
            shim::effective_caps(&spec.cap_add, &spec.cap_drop).map_err(Error::InvalidSpec)?;
        // NOTE: on cgroup v2 device access control needs an eBPF program, which
        // we do not attach yet; without it CAP_MKNOD would let a container create
        // and open host block devices, so it is withheld there.
        if self.cgroups.version() == cgroups::CgroupVersion::V2 && self.cfg.restrict_devices {
            caps.retain(|c| c != "CAP_MKNOD");
        }
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
                    ensure_dir(&d)?;
                    d
                }
                MountSource::HostPath(p) => {
                    if !self.cfg.allow_host_path {
                        return Err(Error::InvalidSpec(format!(
                            "hostPath {} not allowed on this node",
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
        };
        Ok((run, record))
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
    fn wait_monitor(&self, pf: &PidFile, timeout: Duration) -> bool {
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
fn reap_if_zombie_child(pid: i32, start_time: u64) {
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

    fn remove_sandbox(&self, id: &str) -> Result<()> {
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
        let rec = self.record(id)?;
        let pf = self
            .pidfile(id)?
            .filter(|p| process_alive(p.pid, p.start_time));
        let Some(pf) = pf else {
            return Err(Error::InvalidSpec(format!("container {id} is not running")));
        };
        let mut env = rec.env.clone();
        for (k, v) in &req.env {
            env.retain(|e| e.split_once('=').map(|(ek, _)| ek) != Some(k.as_str()));
            env.push(format!("{k}={v}"));
        }
        let spec = ExecSpec {
            pid: pf.pid,
            start_time: pf.start_time,
            cgroup_procs: self.cgroups.procs_files(&rec.cgroup),
            argv: req.argv.clone(),
            env,
            cwd: rec.working_dir.clone(),
            user: rec.user.clone(),
            caps: rec.caps.clone(),
            timeout_ms: req.timeout.as_millis() as u64,
            max_output: 4 << 20,
        };
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
        let mut report = CleanupReport::default();
        for sid in self.sandbox_ids()? {
            if !keep.contains(&sid) {
                self.remove_sandbox(&sid)?;
                report.sandboxes.push(sid);
            }
        }
        let live: HashSet<String> = self.sandbox_ids()?.into_iter().collect();
        for cid in self.container_ids()? {
            let orphan = match self.record(&cid) {
                Ok(rec) => !live.contains(&rec.sandbox_id),
                Err(_) => true,
            };
            if orphan {
                self.remove_container(&cid)?;
                report.containers.push(cid);
            }
        }
        for child in self.cgroups.children(&self.cfg.cgroup_parent)? {
            if !live.contains(&child) && validate_id("sandbox", &child).is_ok() {
                self.cgroups
                    .delete(&self.pod_cgroup(&child), CGROUP_DELETE_TIMEOUT)?;
                report.cgroups.push(child);
            }
        }
        for (ip, owner) in self.ipam.allocations()? {
            if !live.contains(&owner) {
                self.ipam.release(ip, &owner)?;
                report.ips.push(ip.to_string());
            }
        }
        if let Ok(rd) = fs::read_dir(&self.run_dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if !live.contains(&name) && validate_id("sandbox", &name).is_ok() {
                    self.release_namespaces(&name)?;
                }
            }
        }
        Ok(report)
    }
}
