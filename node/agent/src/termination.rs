//! A container's termination message (Borg's lesson: a task reports its own status): what it
//! wrote to its `terminationMessagePath`, or with `FallbackToLogsOnError`, the end of its log
//! when it failed without writing one. Kubernetes' limits: 4096 bytes of the file, the last
//! 80 lines and at most 2048 bytes of the log.

use std::sync::Arc;

use bus_schemas::kinds::container::Container;
use shoal_node::logs::LogLine;
use shoal_node::SandboxInfo;

use crate::agent::AgentCtx;
use crate::backend::Backend;

const FALLBACK_POLICY: &str = "FallbackToLogsOnError";
const LOG_LINES: usize = 80;
const LOG_BYTES: usize = 2048;

/// Where the runtime should keep the container's message file (None: nowhere).
pub fn path(container: &Container) -> Option<String> {
    Some(container.termination_message_path.clone()).filter(|p| !p.is_empty())
}

/// The message of an exited container instance (empty when there is none).
pub async fn message(
    ctx: &Arc<AgentCtx>,
    sandbox: Option<&SandboxInfo>,
    container_id: &str,
    container: &Container,
    exit_code: i32,
) -> String {
    let Backend::Linux(rt) = &ctx.backend else {
        return String::new();
    };
    let (rt, id) = (rt.clone(), container_id.to_string());
    let from_file = tokio::task::spawn_blocking(move || rt.termination_message(&id))
        .await
        .ok()
        .and_then(|read| {
            read.unwrap_or_else(|e| {
                tracing::warn!(error = %e, "termination message unreadable");
                None
            })
        })
        .unwrap_or_default();
    let fall_back = container.termination_message_policy == FALLBACK_POLICY
        && exit_code != 0
        && from_file.is_empty();
    if !fall_back {
        return from_file;
    }
    let Some(reader) = sandbox.and_then(|sb| ctx.backend.logs(sb, &container.name)) else {
        return from_file;
    };
    tokio::task::spawn_blocking(move || reader.read_tail(LOG_LINES * 4))
        .await
        .ok()
        .and_then(Result::ok)
        .map(|records| log_tail(&records))
        .unwrap_or_default()
}

/// The last [`LOG_LINES`] lines of the records, cut to their last [`LOG_BYTES`] bytes (at a
/// character boundary). Partial records join the line they continue.
fn log_tail(records: &[LogLine]) -> String {
    let mut text = String::new();
    for record in records {
        text.push_str(&record.content);
        if !record.partial {
            text.push('\n');
        }
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let tail = lines[lines.len().saturating_sub(LOG_LINES)..].concat();
    let mut cut = tail.len().saturating_sub(LOG_BYTES);
    while !tail.is_char_boundary(cut) {
        cut += 1;
    }
    tail[cut..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_node::logs::Stream;

    fn record(content: &str, partial: bool) -> LogLine {
        LogLine {
            time: String::new(),
            stream: Stream::Stderr,
            partial,
            content: content.into(),
        }
    }

    #[test]
    fn the_log_tail_keeps_the_last_lines_and_bytes() {
        let records: Vec<LogLine> = (0..100)
            .map(|i| record(&format!("line {i}"), false))
            .collect();
        let tail = log_tail(&records);
        assert!(tail.starts_with("line 20\n"), "{tail}");
        assert!(tail.ends_with("line 99\n"));
        let long: Vec<LogLine> = (0..3).map(|_| record(&"é".repeat(800), false)).collect();
        let tail = log_tail(&long);
        assert!(tail.len() <= LOG_BYTES);
        assert!(tail.ends_with("é\n"));
        let joined = log_tail(&[record("par", true), record("tial", false)]);
        assert_eq!(joined, "partial\n");
    }
}
