//! Loading a ruleset with `nft -f -` inside the node's network namespace. Blocking.

use crate::hostnet::HostNet;

#[derive(Debug, thiserror::Error)]
pub enum NftError {
    #[error("running nft (nftables) in the node network: {0}")]
    Run(String),
    #[error("nft rejected the Service ruleset: {0}")]
    Rejected(String),
}

/// Loads `script` atomically: nft applies a whole file as one transaction or nothing.
pub fn apply(net: &HostNet, script: &str) -> Result<(), NftError> {
    let out = net
        .command("nft", &["-f", "-"], Some(script.to_string()))
        .map_err(|e| NftError::Run(e.to_string()))?;
    if out.status.success() {
        return Ok(());
    }
    Err(NftError::Rejected(explain(
        &String::from_utf8_lossy(&out.stderr),
        script,
    )))
}

/// nft's first complaint, with the script line it points at (nft names it
/// `/dev/stdin:LINE:COLUMNS`).
fn explain(stderr: &str, script: &str) -> String {
    let first = stderr
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no error message")
        .trim();
    let line = first
        .strip_prefix("/dev/stdin:")
        .and_then(|rest| rest.split(':').next())
        .and_then(|n| n.parse::<usize>().ok());
    match line.and_then(|n| Some((n, script.lines().nth(n.checked_sub(1)?)?))) {
        Some((n, text)) => format!("{first} (ruleset line {n}: `{}`)", text.trim()),
        None => first.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_ruleset_line() {
        let script = "table ip shoal\nbogus line here\n";
        let stderr =
            "/dev/stdin:2:1-5: Error: syntax error, unexpected string\nbogus line here\n^^^^^\n";
        assert_eq!(
            explain(stderr, script),
            "/dev/stdin:2:1-5: Error: syntax error, unexpected string (ruleset line 2: `bogus line here`)"
        );
        assert_eq!(explain("", script), "no error message");
        assert_eq!(
            explain(
                "Error: Could not process rule: Operation not permitted\n",
                script
            ),
            "Error: Could not process rule: Operation not permitted"
        );
    }
}
