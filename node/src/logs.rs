//! Container logs in the CRI format, one file set per container name:
//!
//! ```text
//! 2024-01-01T00:00:00.000000000Z stdout F a complete line
//! 2024-01-01T00:00:00.000000000Z stderr P a partial line (no newline yet)
//! ```
//!
//! The monitor owns a [`LogWriter`]; files are `current.log` plus rotated
//! `current.log.1 .. .N-1` (newest first). When a container with the same name
//! restarts in a pod, [`rotate_to_previous`] renames the old set to
//! `previous.log*` (what `kubectl logs --previous` shows).

use crate::error::{Error, IoCtx, Result};
use std::fs;
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const CURRENT: &str = "current.log";
pub const PREVIOUS: &str = "previous.log";
/// Lines longer than this are split into partial (`P`) records, like CRI.
const MAX_LINE: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogConfig {
    /// Rotate when the current file would exceed this many bytes.
    pub max_size: u64,
    /// Files kept including the current one (>= 1).
    pub max_files: u32,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            max_size: 10 * 1024 * 1024,
            max_files: 2,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    pub fn as_str(&self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// RFC 3339 with nanoseconds, UTC.
    pub time: String,
    pub stream: Stream,
    pub partial: bool,
    pub content: String,
}

impl LogLine {
    pub fn parse(line: &str) -> Option<LogLine> {
        let mut it = line.splitn(4, ' ');
        let time = it.next()?.to_string();
        let stream = match it.next()? {
            "stdout" => Stream::Stdout,
            "stderr" => Stream::Stderr,
            _ => return None,
        };
        let partial = it.next()? == "P";
        let content = it.next().unwrap_or("").to_string();
        Some(LogLine {
            time,
            stream,
            partial,
            content,
        })
    }
}

fn timestamp() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.9fZ")
        .to_string()
}

fn rotated(dir: &Path, base: &str, n: u32) -> PathBuf {
    if n == 0 {
        dir.join(base)
    } else {
        dir.join(format!("{base}.{n}"))
    }
}

/// Writes CRI-format records with size-based rotation.
pub struct LogWriter {
    dir: PathBuf,
    cfg: LogConfig,
    file: fs::File,
    size: u64,
    pending: [Vec<u8>; 2],
}

impl LogWriter {
    pub fn open(dir: &Path, cfg: LogConfig) -> Result<LogWriter> {
        fs::create_dir_all(dir).ctx(dir, "mkdir")?;
        let path = dir.join(CURRENT);
        let file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .ctx(&path, "open log")?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(LogWriter {
            dir: dir.to_path_buf(),
            cfg: LogConfig {
                max_files: cfg.max_files.max(1),
                ..cfg
            },
            file,
            size,
            pending: [Vec::new(), Vec::new()],
        })
    }

    fn rotate(&mut self) -> Result<()> {
        let n = self.cfg.max_files;
        if n <= 1 {
            self.file
                .set_len(0)
                .ctx(self.dir.join(CURRENT), "truncate")?;
            self.size = 0;
            return Ok(());
        }
        for i in (0..n - 1).rev() {
            let from = rotated(&self.dir, CURRENT, i);
            if from.exists() {
                let to = rotated(&self.dir, CURRENT, i + 1);
                fs::rename(&from, &to).ctx(&from, "rotate log")?;
            }
        }
        let path = self.dir.join(CURRENT);
        self.file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .ctx(&path, "open log")?;
        self.size = 0;
        Ok(())
    }

    fn record(&mut self, stream: Stream, partial: bool, content: &[u8]) -> Result<()> {
        let mut rec = Vec::with_capacity(content.len() + 48);
        rec.extend_from_slice(timestamp().as_bytes());
        rec.push(b' ');
        rec.extend_from_slice(stream.as_str().as_bytes());
        rec.extend_from_slice(if partial { b" P " } else { b" F " });
        rec.extend_from_slice(content);
        rec.push(b'\n');
        if self.size > 0 && self.size + rec.len() as u64 > self.cfg.max_size {
            self.rotate()?;
        }
        self.file
            .write_all(&rec)
            .ctx(self.dir.join(CURRENT), "write log")?;
        self.size += rec.len() as u64;
        Ok(())
    }

    /// Feed raw bytes read from the container's stream.
    pub fn write(&mut self, stream: Stream, data: &[u8]) -> Result<()> {
        let idx = stream as usize;
        let mut buf = std::mem::take(&mut self.pending[idx]);
        buf.extend_from_slice(data);
        let mut start = 0;
        while let Some(pos) = buf[start..].iter().position(|&b| b == b'\n') {
            let line = buf[start..start + pos].to_vec();
            self.record(stream, false, &line)?;
            start += pos + 1;
        }
        let mut rest = buf.split_off(start);
        while rest.len() >= MAX_LINE {
            let tail = rest.split_off(MAX_LINE);
            self.record(stream, true, &rest)?;
            rest = tail;
        }
        self.pending[idx] = rest;
        Ok(())
    }

    /// Write out unterminated lines (at stream EOF).
    pub fn flush_partial(&mut self) -> Result<()> {
        for stream in [Stream::Stdout, Stream::Stderr] {
            let rest = std::mem::take(&mut self.pending[stream as usize]);
            if !rest.is_empty() {
                self.record(stream, false, &rest)?;
            }
        }
        Ok(())
    }
}

/// Before a new instance of a container starts, keep the last instance's logs
/// as `previous.log*` (dropping older ones).
pub fn rotate_to_previous(dir: &Path, max_files: u32) -> Result<()> {
    if !dir.join(CURRENT).exists() {
        return Ok(());
    }
    for i in 0..max_files.max(1) + 1 {
        crate::util::remove_file_idem(&rotated(dir, PREVIOUS, i))?;
    }
    for i in 0..max_files.max(1) {
        let from = rotated(dir, CURRENT, i);
        if from.exists() {
            let to = rotated(dir, PREVIOUS, i);
            fs::rename(&from, &to).ctx(&from, "rename to previous")?;
        }
    }
    Ok(())
}

/// Reads a container's logs.
#[derive(Debug, Clone)]
pub struct LogReader {
    dir: PathBuf,
}

impl LogReader {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        LogReader { dir: dir.into() }
    }

    fn read_set(&self, base: &str) -> Result<Vec<LogLine>> {
        let mut files = Vec::new();
        let mut n = 0;
        while rotated(&self.dir, base, n).exists() {
            files.push(rotated(&self.dir, base, n));
            n += 1;
        }
        let mut out = Vec::new();
        for p in files.iter().rev() {
            let f = match fs::File::open(p) {
                Ok(f) => f,
                // Rotated away between listing and opening: its lines moved on.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(Error::io(p, "open log", e)),
            };
            for line in BufReader::new(f).lines() {
                let line = line.ctx(p, "read log")?;
                if let Some(l) = LogLine::parse(&line) {
                    out.push(l);
                }
            }
        }
        Ok(out)
    }

    /// The last `n` records of the current instance (oldest first).
    pub fn read_tail(&self, n: usize) -> Result<Vec<LogLine>> {
        let mut v = self.read_set(CURRENT)?;
        let skip = v.len().saturating_sub(n);
        Ok(v.split_off(skip))
    }

    /// The last `n` records of the previous instance.
    pub fn previous_tail(&self, n: usize) -> Result<Vec<LogLine>> {
        let mut v = self.read_set(PREVIOUS)?;
        let skip = v.len().saturating_sub(n);
        Ok(v.split_off(skip))
    }

    /// Follow `current.log` from its current end (or start), across rotations.
    pub fn follow(&self, from_start: bool) -> Result<LogFollower> {
        let path = self.dir.join(CURRENT);
        let mut f = LogFollower {
            path,
            reader: None,
            ino: 0,
            buf: String::new(),
        };
        f.reopen(!from_start);
        Ok(f)
    }
}

/// Iterator-like follower; [`LogFollower::next_line`] blocks up to a timeout.
pub struct LogFollower {
    path: PathBuf,
    reader: Option<BufReader<fs::File>>,
    ino: u64,
    buf: String,
}

impl LogFollower {
    fn reopen(&mut self, at_end: bool) {
        use std::os::unix::fs::MetadataExt;
        if let Ok(mut f) = fs::File::open(&self.path) {
            self.ino = f.metadata().map(|m| m.ino()).unwrap_or(0);
            if at_end {
                let _ = f.seek(SeekFrom::End(0));
            }
            self.reader = Some(BufReader::new(f));
        }
    }

    /// The next complete record, or None if none arrived within `timeout`.
    /// Polls the file every 10 ms (log files have no cheap change notification
    /// without inotify plumbing; 10 ms is far below human-visible latency).
    pub fn next_line(&mut self, timeout: Duration) -> Option<LogLine> {
        use std::os::unix::fs::MetadataExt;
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(r) = self.reader.as_mut() {
                match r.read_line(&mut self.buf) {
                    Ok(n) if n > 0 && self.buf.ends_with('\n') => {
                        let line = std::mem::take(&mut self.buf);
                        if let Some(l) = LogLine::parse(line.trim_end_matches('\n')) {
                            return Some(l);
                        }
                        continue;
                    }
                    _ => {}
                }
            }
            // EOF: if the file was rotated, finish nothing more from the old one
            // (already drained) and switch to the new current.log.
            let cur_ino = fs::metadata(&self.path).map(|m| m.ino()).unwrap_or(0);
            if self.reader.is_none() || (cur_ino != 0 && cur_ino != self.ino) {
                self.reopen(false);
                continue_if_new(&mut self.buf);
                if self.reader.is_some() && cur_ino != 0 {
                    continue;
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn continue_if_new(buf: &mut String) {
    // A partial record left from the rotated file cannot be completed.
    buf.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_partials_and_rotation() {
        let tmp = tempfile::tempdir().unwrap();
        let mut w = LogWriter::open(
            tmp.path(),
            LogConfig {
                max_size: 200,
                max_files: 2,
            },
        )
        .unwrap();
        w.write(Stream::Stdout, b"hello\nwor").unwrap();
        w.write(Stream::Stderr, b"err\n").unwrap();
        w.write(Stream::Stdout, b"ld\n").unwrap();
        let r = LogReader::new(tmp.path());
        let t = r.read_tail(10).unwrap();
        let got: Vec<_> = t.iter().map(|l| (l.stream, l.content.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (Stream::Stdout, "hello"),
                (Stream::Stderr, "err"),
                (Stream::Stdout, "world")
            ]
        );
        for i in 0..50 {
            w.write(Stream::Stdout, format!("line {i}\n").as_bytes())
                .unwrap();
        }
        let t = r.read_tail(1000).unwrap();
        assert_eq!(t.last().unwrap().content, "line 49");
        assert!(t.len() < 20, "old lines rotated away, kept {}", t.len());
        assert!(!tmp.path().join("current.log.2").exists());
        rotate_to_previous(tmp.path(), 2).unwrap();
        assert_eq!(r.previous_tail(1).unwrap()[0].content, "line 49");
        assert!(r.read_tail(10).unwrap().is_empty());
    }
}
