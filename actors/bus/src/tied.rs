//! Child processes that die with their parent: `PR_SET_PDEATHSIG` set between fork and exec.
//!
//! The kernel sends the death signal when the *thread* that forked the child exits, not when
//! the process does. A server spawned from a tokio worker or a `spawn_blocking` thread would
//! be killed the moment that thread retires (blocking threads retire after 10 s idle), so
//! every tied child is forked by one dedicated thread that lives as long as the process.
//! A SIGKILLed `shoal up` (or a test killed by nextest's timeout) then takes its nats-server
//! with it instead of leaving it holding the port and the store.
#![allow(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use nix::sys::signal::Signal;

type SpawnRequest = (Command, Signal, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `command` so that the child receives `signal` when this process ends, however it
/// ends (even SIGKILL).
pub fn spawn(command: Command, signal: Signal) -> std::io::Result<Child> {
    let (reply_tx, reply_rx) = mpsc::channel();
    let gone = || std::io::Error::other("the process spawner thread is gone");
    spawner()
        .lock()
        .map_err(|_| gone())?
        .as_ref()
        .ok_or_else(gone)?
        .send((command, signal, reply_tx))
        .map_err(|_| gone())?;
    reply_rx.recv().map_err(|_| gone())?
}

/// Makes a command's child receive `signal` when the thread that spawns it exits. Only for
/// callers that spawn from a thread living as long as the child should (a test's own
/// thread); anything else goes through [`spawn`].
pub fn die_with_spawning_thread(command: &mut Command, signal: Signal) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and calls only prctl(2) and
    // getppid(2), both async-signal-safe; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(signal).map_err(std::io::Error::from)?;
            // The parent may have died between fork and prctl: then no signal will come.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other("parent exited before exec"));
            }
            Ok(())
        });
    }
}

/// The spawner thread's queue; `None` if the thread could not be started.
fn spawner() -> &'static Mutex<Option<mpsc::Sender<SpawnRequest>>> {
    static SPAWNER: OnceLock<Mutex<Option<mpsc::Sender<SpawnRequest>>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        let started = std::thread::Builder::new()
            .name("shoal-spawner".into())
            .spawn(move || {
                join_the_process_network_namespace();
                // Never returns while the process may still spawn: the Sender lives in a
                // static, so `recv` only fails at process exit.
                while let Ok((mut command, signal, reply)) = rx.recv() {
                    die_with_spawning_thread(&mut command, signal);
                    let _ = reply.send(command.spawn());
                }
            });
        Mutex::new(started.ok().map(|_| tx))
    })
}

/// A thread starts in the network namespace of the thread that created it, and the first
/// caller may be one working inside a test host's namespace: the spawner moves to the
/// process's own (its main thread's), so where a child runs never depends on who spawned
/// first. Children meant for another namespace say so (`ip netns exec`).
fn join_the_process_network_namespace() {
    if let Ok(own) = std::fs::File::open("/proc/self/ns/net") {
        let _ = nix::sched::setns(own, nix::sched::CloneFlags::CLONE_NEWNET);
    }
}

/// [`die_with_spawning_thread`] with SIGKILL, in a `Command` builder chain: what tests use
/// for the processes they start, so a test that panics or is killed at its timeout leaves
/// nothing running.
pub trait TiedToThisThread {
    fn tied_to_this_thread(&mut self) -> &mut Self;
}

impl TiedToThisThread for Command {
    fn tied_to_this_thread(&mut self) -> &mut Self {
        die_with_spawning_thread(self, Signal::SIGKILL);
        self
    }
}
