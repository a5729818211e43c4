//! `Localhost` profiles: a file in Docker's (and the OCI runtime spec's) seccomp JSON under
//! the node's profile root. The subset read: `defaultAction`, `defaultErrnoRet`, and per
//! entry of `syscalls` its `names` (or `name`), `action`, `errnoRet`, `args`, and the
//! `includes`/`excludes` on capabilities and architectures. Other fields are ignored.

use super::{Action, ArgCheck, ArgOp, Profile, Rule};
use serde::Deserialize;
use std::path::{Component, Path, PathBuf};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct File {
    default_action: String,
    default_errno_ret: Option<u32>,
    #[serde(default)]
    syscalls: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    #[serde(default)]
    names: Vec<String>,
    name: Option<String>,
    action: String,
    errno_ret: Option<u32>,
    #[serde(default)]
    args: Vec<Arg>,
    #[serde(default)]
    includes: Filter,
    #[serde(default)]
    excludes: Filter,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Arg {
    index: u8,
    value: u64,
    #[serde(default)]
    value_two: u64,
    op: String,
}

#[derive(Deserialize, Default)]
struct Filter {
    #[serde(default)]
    caps: Vec<String>,
    #[serde(default)]
    arches: Vec<String>,
}

/// `localhost_profile` under `root`, refused when it is absolute or climbs out of it.
pub fn path(root: &Path, localhost_profile: &str) -> Result<PathBuf, String> {
    let rel = Path::new(localhost_profile);
    let escapes = rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if localhost_profile.is_empty() || escapes {
        return Err(format!(
            "seccomp profile {localhost_profile:?} must be a relative path inside {}",
            root.display()
        ));
    }
    Ok(root.join(rel))
}

/// Reads and converts the profile at `path` for a container with capabilities `caps`.
/// Errors name the file and, for bad content, the field.
pub fn load(path: &Path, caps: &[String]) -> Result<Profile, String> {
    let text =
        std::fs::read(path).map_err(|e| format!("seccomp profile {}: {e}", path.display()))?;
    parse(&text, caps).map_err(|e| format!("seccomp profile {}: {e}", path.display()))
}

fn parse(text: &[u8], caps: &[String]) -> Result<Profile, String> {
    let file: File = serde_json::from_slice(text).map_err(|e| e.to_string())?;
    let default_action = action(&file.default_action, file.default_errno_ret)
        .map_err(|e| format!("defaultAction: {e}"))?;
    let mut rules = Vec::new();
    for (i, entry) in file.syscalls.iter().enumerate() {
        if !applies(entry, caps) {
            continue;
        }
        let field = |f: &str| format!("syscalls[{i}].{f}");
        let action = action(&entry.action, entry.errno_ret)
            .map_err(|e| format!("{}: {e}", field("action")))?;
        let args = entry
            .args
            .iter()
            .enumerate()
            .map(|(j, a)| arg(a).map_err(|e| format!("{}: {e}", field(&format!("args[{j}].op")))))
            .collect::<Result<Vec<_>, _>>()?;
        let names: Vec<String> = entry.names.iter().chain(&entry.name).cloned().collect();
        if names.is_empty() {
            return Err(format!("{}: no syscall named", field("names")));
        }
        rules.push(Rule {
            names,
            action,
            args,
        });
    }
    Ok(Profile {
        default_action,
        rules,
    })
}

fn applies(entry: &Entry, caps: &[String]) -> bool {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        a => a,
    };
    let has = |c: &String| caps.contains(c);
    let on_arch = |arches: &[String]| arches.iter().any(|a| a == arch);
    entry.includes.caps.iter().all(has)
        && (entry.includes.arches.is_empty() || on_arch(&entry.includes.arches))
        && !entry.excludes.caps.iter().any(has)
        && !on_arch(&entry.excludes.arches)
}

fn action(name: &str, errno: Option<u32>) -> Result<Action, String> {
    Ok(match name {
        "SCMP_ACT_ALLOW" => Action::Allow,
        "SCMP_ACT_ERRNO" => Action::Errno(errno.unwrap_or(libc::EPERM as u32)),
        "SCMP_ACT_KILL" | "SCMP_ACT_KILL_THREAD" => Action::KillThread,
        "SCMP_ACT_KILL_PROCESS" => Action::KillProcess,
        "SCMP_ACT_TRAP" => Action::Trap,
        "SCMP_ACT_LOG" => Action::Log,
        other => return Err(format!("unsupported action {other:?}")),
    })
}

fn arg(a: &Arg) -> Result<ArgCheck, String> {
    let op = match a.op.as_str() {
        "SCMP_CMP_EQ" => ArgOp::Eq,
        "SCMP_CMP_NE" => ArgOp::Ne,
        "SCMP_CMP_LT" => ArgOp::Lt,
        "SCMP_CMP_LE" => ArgOp::Le,
        "SCMP_CMP_GT" => ArgOp::Gt,
        "SCMP_CMP_GE" => ArgOp::Ge,
        // Docker's format puts the mask in `value` and the expected bits in `valueTwo`.
        "SCMP_CMP_MASKED_EQ" => {
            return Ok(ArgCheck {
                index: a.index,
                op: ArgOp::MaskedEq(a.value),
                value: a.value_two,
            })
        }
        other => return Err(format!("unsupported comparison {other:?}")),
    };
    Ok(ArgCheck {
        index: a.index,
        op,
        value: a.value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_dockers_format() {
        let json = br#"{
            "defaultAction": "SCMP_ACT_ALLOW",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [
                {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13},
                {"name": "mount", "action": "SCMP_ACT_ERRNO",
                 "includes": {"caps": ["CAP_SYS_ADMIN"]}},
                {"names": ["clone"], "action": "SCMP_ACT_ERRNO",
                 "args": [{"index": 0, "value": 2114060288, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]}
            ]
        }"#;
        let p = parse(json, &[]).unwrap();
        assert_eq!(p.default_action, Action::Allow);
        assert_eq!(p.rules.len(), 2, "the CAP_SYS_ADMIN entry does not apply");
        assert_eq!(p.rules[0].action, Action::Errno(13));
        assert_eq!(p.rules[1].args[0].op, ArgOp::MaskedEq(2114060288));
        assert_eq!(
            parse(json, &["CAP_SYS_ADMIN".into()]).unwrap().rules.len(),
            3
        );
    }

    #[test]
    fn bad_profiles_name_the_field() {
        let e = parse(br#"{"defaultAction": "SCMP_ACT_NOTIFY"}"#, &[]).unwrap_err();
        assert!(e.starts_with("defaultAction: "), "{e}");
        let e = parse(
            br#"{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": [{"names": ["a"], "action": "SCMP_ACT_ERRNO", "args": [{"index": 0, "value": 1, "op": "SCMP_CMP_BOGUS"}]}]}"#,
            &[],
        )
        .unwrap_err();
        assert!(e.starts_with("syscalls[0].args[0].op: "), "{e}");
        assert!(parse(b"{", &[]).is_err());
    }

    #[test]
    fn profile_paths_stay_under_the_root() {
        let root = Path::new("/var/lib/shoal/seccomp");
        assert_eq!(
            path(root, "team/deny.json").unwrap(),
            root.join("team/deny.json")
        );
        for bad in ["", "/etc/x.json", "../x.json", "a/../../x.json"] {
            assert!(path(root, bad).is_err(), "{bad}");
        }
    }
}
