//! `shoal`: run a one-machine cluster, and talk to any cluster over NATS.
//!
//! # Layout
//! - `cli`: the command line (clap).
//! - `up`: `shoal up`, the one-machine cluster (nats-server child + every actor).
//! - `apply`, `get`, `describe`, `delete`, `label`: kubectl-like object commands.
//! - `table`: kubectl's table columns, one typed row function per kind (`table::Row`: headers
//!   with `-o wide` ones marked, and cells), written to be reused by other printers (the
//!   gateway's Kubernetes Tables, new kinds' rows); `output`: yaml/json/name printers.
//! - `kinds`: resolving kind names people type (`po`, `deploy,svc`).
//! - `remote`: untyped requests to the API (objects as JSON values).
//! - `rollout`, `scale`, `nodes`: workload commands (rollout, scale, cordon/uncordon/drain).

mod apply;
mod cli;
mod delete;
mod describe;
mod exec;
mod get;
mod image;
mod kinds;
mod label;
mod logs;
mod node;
mod nodes;
mod output;
mod remote;
mod rollout;
mod scale;
mod table;
mod top;
mod up;

use clap::{CommandFactory, FromArgMatches};

// The control plane and the hollow fleet churn through many small, short-lived objects;
// mimalloc keeps their memory compact where glibc's per-thread arenas fragment.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    restore_default_sigpipe();
    let matches = cli::Cli::command().get_matches();
    let mut cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // `shoal up --nats URL` joins that NATS instead of starting one. Only an explicit flag
    // counts: SHOAL_NATS in the environment names where clients connect, not a cluster to join.
    let nats_from_flag =
        matches.value_source("nats") == Some(clap::parser::ValueSource::CommandLine);
    if let cli::Command::Up(args) = &mut cli.command {
        if nats_from_flag && args.join.is_none() {
            args.join = Some(cli.nats.clone());
        }
    }
    init_tracing(cli.verbose);
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    std::process::exit(code);
}

/// Rust ignores SIGPIPE, so `shoal get … | head` would panic on the closed pipe; a command
/// line tool should end quietly instead, as every Unix tool does.
#[allow(unsafe_code)]
fn restore_default_sigpipe() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: signal(2) with SIG_DFL installs no Rust handler; done before any thread starts.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
}

fn init_tracing(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SHOAL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn run(cli: cli::Cli) -> anyhow::Result<i32> {
    use cli::Command;
    let nats_url = cli.nats.clone();
    match cli.command {
        Command::Up(args) => {
            let system = actix::System::new();
            system.block_on(up::run(args))?;
            Ok(0)
        }
        Command::Node(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            runtime.block_on(node::run(&nats_url, args))?;
            Ok(0)
        }
        command => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async move {
                let session = remote::Session::connect(&nats_url).await?;
                match command {
                    Command::Apply(a) => apply::run(&session, a).await,
                    Command::Get(a) => get::run(&session, a).await,
                    Command::Describe(a) => describe::run(&session, a).await,
                    Command::Delete(a) => delete::run(&session, a).await,
                    Command::Label(a) => label::run(&session, a, label::Target::Labels).await,
                    Command::Annotate(a) => {
                        label::run(&session, a, label::Target::Annotations).await
                    }
                    Command::Version => remote::version(&session).await,
                    Command::Image { command } => image::run(&session, command).await,
                    Command::Rollout { command } => rollout::run(&session, command).await,
                    Command::Scale(a) => scale::run(&session, a).await,
                    Command::Cordon(a) => nodes::cordon(&session, &a.node, true).await,
                    Command::Uncordon(a) => nodes::cordon(&session, &a.node, false).await,
                    Command::Drain(a) => nodes::drain(&session, a).await,
                    Command::Logs(a) => logs::run(&session, a).await,
                    Command::Exec(a) => exec::run(&session, a).await,
                    Command::Top(a) => top::run(&session, a).await,
                    Command::Up(_) | Command::Node(_) => unreachable!("handled above"),
                }
            })
        }
    }
}
