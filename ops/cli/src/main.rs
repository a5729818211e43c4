//! `shoal`: run a one-machine cluster, and talk to any cluster over NATS.
//!
//! # Layout
//! - `cli`: the command line (clap).
//! - `up`: `shoal up`, the one-machine cluster (nats-server child + every actor).
//! - `apply`, `get`, `describe`, `delete`, `label`: kubectl-like object commands.
//! - `describe_pod`: `describe pod`'s container sections (state, last state, termination
//!   message), as kubectl lays them out.
//! - `create`: objects from the command line (`configmap`, `secret`, `job --from=cronjob/`).
//! - `table`: kubectl's table layout (`-o wide`, `-A`, `--show-labels`) of the rows the
//!   `shoal-tables` crate computes per kind (the gateway's Tables use the same rows);
//!   `output`: yaml/json/name printers.
//! - `kinds`: resolving kind names people type (`po`, `deploy,svc`).
//! - `remote`: untyped requests to the API (objects as JSON values).
//! - `rollout`, `scale`, `nodes`: workload commands (rollout, scale, cordon/uncordon/drain).
//! - here: dispatch, and each command's field manager (`shoal`, `shoal-label`, …) for
//!   `metadata.managedFields`.
//! - `creds`: the CLI's credential (`--creds`, `--ca`) and `shoal creds`.
//! - `trace`: `shoal trace`, a trace from SHOAL_TRACES as a waterfall or OTLP JSON.

mod actor_creds;
mod apply;
mod cli;
mod cluster;
mod create;
mod creds;
mod delete;
mod describe;
mod describe_pod;
mod exec;
mod get;
mod hpa;
mod image;
mod kinds;
mod label;
mod logs;
mod node;
mod nodes;
mod observe;
mod output;
mod remote;
mod rollout;
mod rollout_sts;
mod scale;
mod server_watch;
mod table;
mod top;
mod trace;
mod up;

use clap::{CommandFactory, FromArgMatches};

// The control plane and the hollow fleet churn through many small, short-lived objects;
// mimalloc keeps their memory compact where glibc's per-thread arenas fragment.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let matches = cli::Cli::command().get_matches();
    let mut cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // Not for the long-running actors: a node agent writes an exec session's stdin into a
    // pipe the command may have closed, and must get EPIPE there, not die of SIGPIPE.
    if !matches!(cli.command, cli::Command::Up(_) | cli::Command::Node(_)) {
        restore_default_sigpipe();
    }
    // `shoal up --nats URL` joins that NATS instead of starting one. Only an explicit flag
    // counts: SHOAL_NATS in the environment names where clients connect, not a cluster to join.
    let nats_from_flag =
        matches.value_source("nats") == Some(clap::parser::ValueSource::CommandLine);
    if let cli::Command::Up(args) = &mut cli.command {
        if nats_from_flag && args.join.is_none() {
            args.join = Some(cli.nats.clone());
        }
    }
    let telemetry = match init_telemetry(&cli) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    // After `shoal up` stopped its own nats-server nothing acknowledges its last spans, and
    // Ctrl-C must return promptly: those get half a second. Other commands wait for theirs.
    let flush_limit = match &cli.command {
        cli::Command::Up(args) if args.join.is_none() => std::time::Duration::from_millis(500),
        _ => std::time::Duration::MAX,
    };
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            1
        }
    };
    // Spans go out from threads of their own: send what the command recorded before exiting.
    let (flushed_tx, flushed_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        telemetry.shutdown();
        let _ = flushed_tx.send(());
    });
    let _ = flushed_rx.recv_timeout(flush_limit);
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

fn init_telemetry(
    cli: &cli::Cli,
) -> Result<shoal_telemetry::Telemetry, shoal_telemetry::TelemetryError> {
    let default = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let (service, actor) = match &cli.command {
        cli::Command::Up(_) => ("shoal-up", "up"),
        cli::Command::Node(_) => ("shoal-node", "node"),
        _ => ("shoal-cli", "cli"),
    };
    let telemetry = shoal_telemetry::init(shoal_telemetry::TelemetryConfig {
        service: service.into(),
        default_actor: actor.into(),
        log_filter: std::env::var("SHOAL_LOG").unwrap_or_else(|_| default.into()),
        log_format: match cli.log_format {
            cli::LogFormatArg::Text => shoal_telemetry::LogFormat::Text,
            cli::LogFormatArg::Json => shoal_telemetry::LogFormat::Json,
        },
        otlp_endpoint: cli.otlp_endpoint.clone(),
    })?;
    // `shoal up` names its NATS once it has started or joined it; `shoal node` once it
    // knows its node's name (its spans go to that node's subject).
    if !matches!(
        &cli.command,
        cli::Command::Up(_) | cli::Command::Node(_) | cli::Command::Creds { .. }
    ) {
        // Spans go out as the command's own identity; without a usable one, nowhere.
        if let Ok(auth) = creds::resolve(cli.creds.as_deref(), cli.ca.as_deref()) {
            shoal_telemetry::jetstream::export_as(&cli.nats, move |options| auth.apply(options));
        }
    }
    Ok(telemetry)
}

/// The span of a command that changes the cluster: the root of the trace it starts.
fn command_span(command: &cli::Command) -> tracing::Span {
    let name = match command {
        cli::Command::Apply(_) => "apply",
        cli::Command::Create(_) => "create",
        cli::Command::Delete(_) => "delete",
        cli::Command::Scale(_) => "scale",
        cli::Command::Rollout { .. } => "rollout",
        cli::Command::Label(_) => "label",
        cli::Command::Annotate(_) => "annotate",
        cli::Command::Cordon(_) | cli::Command::Uncordon(_) | cli::Command::Drain(_) => "nodes",
        _ => return tracing::Span::none(),
    };
    tracing::info_span!(
        "shoal",
        shoal.actor = "cli",
        otel.name = format!("shoal {name}"),
        command = name
    )
}

fn run(cli: cli::Cli) -> anyhow::Result<i32> {
    use cli::Command;
    let nats_url = cli.nats.clone();
    let (creds, ca) = (cli.creds.clone(), cli.ca.clone());
    match cli.command {
        Command::Creds { command } => creds::run(command),
        Command::Up(mut args) => {
            args.creds = creds;
            args.ca = ca;
            let system = actix::System::new();
            let stopped = system.block_on(up::run(*args));
            // NOTE: why the runtime is never dropped. Dropping it waits for every blocking
            // task still running, and a container's graceful stop is one: it waits out the
            // pod's grace period (30 s by default, as long as a pod asks). Ctrl-C of a node
            // stopping a pod hung that long after "stopped". `up::run` has given the actors
            // their budget; what still runs is abandoned, as it says (the next start finds
            // the container), and the process exits.
            std::mem::forget(system);
            stopped?;
            Ok(0)
        }
        Command::Node(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let auth = up::joined_creds(creds.as_deref(), ca.as_deref())?;
            let stopped = runtime.block_on(node::run(&nats_url, &auth, args));
            // As `up` above: a container's graceful stop still running is abandoned.
            runtime.shutdown_background();
            stopped?;
            Ok(0)
        }
        command => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let span = command_span(&command);
            runtime.block_on(tracing::Instrument::instrument(
                async move {
                    let auth = creds::resolve(creds.as_deref(), ca.as_deref())?;
                    let session = remote::Session::connect(&nats_url, &auth)
                        .await?
                        .with_field_manager(field_manager_of(&command));
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
                        Command::Autoscale(a) => hpa::autoscale(&session, a).await,
                        Command::Create(a) => create::run(&session, a).await,
                        Command::Cordon(a) => nodes::cordon(&session, &a.node, true).await,
                        Command::Uncordon(a) => nodes::cordon(&session, &a.node, false).await,
                        Command::Drain(a) => nodes::drain(&session, a).await,
                        Command::Logs(a) => logs::run(&session, a).await,
                        Command::Exec(a) => exec::run(&session, a).await,
                        Command::Top(a) => top::run(&session, a).await,
                        Command::Trace(a) => trace::run(&session, a).await,
                        Command::Up(_) | Command::Node(_) | Command::Creds { .. } => {
                            unreachable!("handled above")
                        }
                    }
                },
                span,
            ))
        }
    }
}

/// Each command writes under its own field manager, as kubectl's do, so that ownership
/// (and an apply's conflicts) says which command set a field.
fn field_manager_of(command: &cli::Command) -> &str {
    match command {
        cli::Command::Apply(a) => &a.field_manager,
        cli::Command::Label(_) => "shoal-label",
        cli::Command::Annotate(_) => "shoal-annotate",
        cli::Command::Scale(_) => "shoal-scale",
        cli::Command::Rollout { .. } => "shoal-rollout",
        cli::Command::Cordon(_) | cli::Command::Uncordon(_) => "shoal-cordon",
        cli::Command::Drain(_) => "shoal-drain",
        _ => shoal_bus::client::DEFAULT_APPLY_MANAGER,
    }
}
