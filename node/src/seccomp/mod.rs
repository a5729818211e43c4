//! Seccomp: which syscalls a container may make.
//!
//! A [`Profile`] is plain data (a default action and rules naming syscalls), so it travels
//! to the shim inside the run request and shows up readable in a container's record. Where
//! it comes from is [`SeccompProfile`], Kubernetes' `seccompProfile`: [`default`] builds
//! `RuntimeDefault` (the policy of Docker's and containerd's default profile), [`localhost`]
//! reads a profile file in Docker's JSON format, and `Unconfined` has none.
//!
//! [`filters`] compiles a profile with `seccompiler` into the BPF programs the shim installs
//! (in `shim::confine`), last before execve.

pub mod default;
pub mod localhost;
mod syscalls;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use seccompiler::{sock_filter, BpfProgram};

/// Kubernetes' `seccompProfile` of a container, as the runtime takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SeccompProfile {
    /// The runtime's default filter: Shoal confines containers unless told otherwise, as
    /// a kubelet started with `--seccomp-default` does.
    #[default]
    RuntimeDefault,
    Unconfined,
    /// A profile file in Docker's seccomp format, relative to the node's profile root.
    Localhost(String),
}

/// What the kernel does with a syscall.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Action {
    Allow,
    Errno(u32),
    KillThread,
    KillProcess,
    Trap,
    Log,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ArgOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `arg & mask == value`.
    MaskedEq(u64),
}

/// A test of one syscall argument (the 64-bit value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgCheck {
    pub index: u8,
    pub op: ArgOp,
    pub value: u64,
}

/// `action` for the syscalls `names` when every check in `args` holds (no checks: always).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub names: Vec<String>,
    pub action: Action,
    #[serde(default)]
    pub args: Vec<ArgCheck>,
}

impl Rule {
    pub fn new(names: &[&str], action: Action) -> Rule {
        Rule {
            names: names.iter().map(|s| s.to_string()).collect(),
            action,
            args: vec![],
        }
    }
}

/// A seccomp policy: a syscall a rule selects gets that rule's action (the strictest one
/// when several select it), any other syscall `default_action`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profile {
    pub default_action: Action,
    pub rules: Vec<Rule>,
}

fn action(a: Action) -> seccompiler::SeccompAction {
    use seccompiler::SeccompAction as S;
    match a {
        Action::Allow => S::Allow,
        Action::Errno(e) => S::Errno(e),
        Action::KillThread => S::KillThread,
        Action::KillProcess => S::KillProcess,
        Action::Trap => S::Trap,
        Action::Log => S::Log,
    }
}

fn condition(c: &ArgCheck) -> Result<seccompiler::SeccompCondition, String> {
    use seccompiler::SeccompCmpOp as Op;
    let op = match c.op {
        ArgOp::Eq => Op::Eq,
        ArgOp::Ne => Op::Ne,
        ArgOp::Lt => Op::Lt,
        ArgOp::Le => Op::Le,
        ArgOp::Gt => Op::Gt,
        ArgOp::Ge => Op::Ge,
        ArgOp::MaskedEq(m) => Op::MaskedEq(m),
    };
    seccompiler::SeccompCondition::new(c.index, seccompiler::SeccompCmpArgLen::Qword, op, c.value)
        .map_err(|e| format!("argument {} check: {e}", c.index))
}

/// Syscall number -> the alternatives that select it; an empty list selects it always.
type Selection = BTreeMap<i64, Vec<seccompiler::SeccompRule>>;

fn select(into: &mut Selection, rule: &Rule) -> Result<(), String> {
    let alternative = if rule.args.is_empty() {
        None
    } else {
        let conditions = rule.args.iter().map(condition).collect::<Result<_, _>>()?;
        Some(seccompiler::SeccompRule::new(conditions).map_err(|e| e.to_string())?)
    };
    // A name this architecture does not have is skipped, as libseccomp does: profiles
    // list the syscalls of every architecture.
    for nr in rule.names.iter().filter_map(|n| syscalls::number(n)) {
        match (into.get_mut(&nr), &alternative) {
            (Some(alts), _) if alts.is_empty() => {}
            (Some(_), None) => {
                into.insert(nr, vec![]);
            }
            (Some(alts), Some(a)) => alts.push(a.clone()),
            (None, a) => {
                into.insert(nr, a.iter().cloned().collect());
            }
        }
    }
    Ok(())
}

fn compile(sel: Selection, mismatch: Action, on_match: Action) -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    let filter = seccompiler::SeccompFilter::new(sel, action(mismatch), action(on_match), arch)
        .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// The BPF programs enforcing `profile`, to install in this order.
///
/// One seccompiler filter has a single action for the syscalls it selects, so a profile
/// with several actions becomes several filters, which the kernel runs all of and whose
/// strictest verdict wins (on a tie between two ERRNOs, the later-installed filter's).
/// The first lets through every syscall some rule selects and gives the rest the default
/// action; each later one applies one action to its rules' syscalls and allows all else.
pub fn filters(profile: &Profile) -> Result<Vec<BpfProgram>, String> {
    if !syscalls::supported() {
        return Err(format!(
            "seccomp profiles are not supported on {}",
            std::env::consts::ARCH
        ));
    }
    let mut selected = Selection::new();
    let mut by_action: Vec<(Action, Selection)> = Vec::new();
    for rule in profile
        .rules
        .iter()
        .filter(|r| r.action != profile.default_action)
    {
        select(&mut selected, rule)?;
        if rule.action == Action::Allow {
            continue;
        }
        let at = match by_action.iter().position(|(a, _)| *a == rule.action) {
            Some(i) => i,
            None => {
                by_action.push((rule.action, Selection::new()));
                by_action.len() - 1
            }
        };
        select(&mut by_action[at].1, rule)?;
    }
    let mut programs = Vec::new();
    if profile.default_action != Action::Allow {
        programs.push(compile(selected, profile.default_action, Action::Allow)?);
    }
    for (a, sel) in by_action {
        programs.push(compile(sel, Action::Allow, a)?);
    }
    Ok(programs)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn one_filter_per_action_besides_the_default() {
        let p = Profile {
            default_action: Action::Errno(1),
            rules: vec![
                Rule::new(&["read", "write", "no_such_call"], Action::Allow),
                Rule::new(&["clone3"], Action::Errno(38)),
                Rule::new(&["mount"], Action::Errno(1)),
            ],
        };
        assert_eq!(filters(&p).unwrap().len(), 2);
        let allow_all_but = Profile {
            default_action: Action::Allow,
            rules: vec![Rule::new(&["mkdir"], Action::Errno(1))],
        };
        assert_eq!(filters(&allow_all_but).unwrap().len(), 1);
    }

    #[test]
    fn argument_checks_compile_and_bad_ones_name_the_argument() {
        let mut rule = Rule::new(&["personality"], Action::Allow);
        rule.args = vec![ArgCheck {
            index: 0,
            op: ArgOp::Eq,
            value: 8,
        }];
        let mut p = Profile {
            default_action: Action::Errno(1),
            rules: vec![rule],
        };
        assert_eq!(filters(&p).unwrap().len(), 1);
        p.rules[0].args[0].index = 9;
        let e = filters(&p).unwrap_err();
        assert!(e.contains("argument 9"), "{e}");
    }
}
