//! Pod network addressing: the node's pod CIDR and a file-backed IP allocator.
//!
//! Allocation is one file per address under `<state>/ipam/`, created with
//! O_CREAT|O_EXCL, so it is atomic across threads *and* processes and survives
//! agent restarts without a lock or a database. The file holds the owner's
//! sandbox id, which is what [`Ipam::release_owner`] and orphan cleanup use.

use crate::error::{Error, IoCtx, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Ipv4Cidr {
    pub network: Ipv4Addr,
    pub prefix: u8,
}

impl Ipv4Cidr {
    fn mask(&self) -> u32 {
        if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - self.prefix)
        }
    }

    /// The first usable address: the bridge / default gateway.
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    /// Addresses assignable to pods (gateway and broadcast excluded).
    pub fn pod_range(&self) -> std::ops::RangeInclusive<u32> {
        let net = u32::from(self.network);
        let bcast = net | !self.mask();
        (net + 2)..=(bcast.saturating_sub(1))
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.network)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::InvalidSpec(format!("invalid IPv4 CIDR {s:?}"));
        let (ip, prefix) = s.split_once('/').ok_or_else(bad)?;
        let ip: Ipv4Addr = ip.parse().map_err(|_| bad())?;
        let prefix: u8 = prefix.parse().map_err(|_| bad())?;
        if !(8..=30).contains(&prefix) {
            return Err(Error::InvalidSpec(format!("{s}: prefix must be /8../30")));
        }
        let c = Ipv4Cidr {
            network: ip,
            prefix,
        };
        if u32::from(ip) & !c.mask() != 0 {
            return Err(Error::InvalidSpec(format!("{s}: host bits set")));
        }
        Ok(c)
    }
}

impl TryFrom<String> for Ipv4Cidr {
    type Error = Error;
    fn try_from(s: String) -> Result<Self> {
        s.parse()
    }
}

impl From<Ipv4Cidr> for String {
    fn from(c: Ipv4Cidr) -> String {
        c.to_string()
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// Node-level network settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NetworkConfig {
    /// Linux bridge the pods' host-side veths attach to; created if missing.
    pub bridge: String,
    pub pod_cidr: Ipv4Cidr,
    /// Network namespace (a bind-mounted ns file, e.g. `/run/netns/x`) holding
    /// the bridge and host veth ends. None = the runtime's own namespace. Tests
    /// point this at a namespace they created so nothing touches the host's.
    pub host_netns: Option<PathBuf>,
    pub mtu: Option<u32>,
}

impl NetworkConfig {
    pub fn new(bridge: impl Into<String>, pod_cidr: Ipv4Cidr) -> Self {
        NetworkConfig {
            bridge: bridge.into(),
            pod_cidr,
            host_netns: None,
            mtu: None,
        }
    }
}

/// Host-side veth name for a sandbox: stable (so removal can find it without
/// state) and within IFNAMSIZ.
pub fn host_veth_name(sandbox_id: &str) -> String {
    use sha2::Digest;
    let h = sha2::Sha256::digest(sandbox_id.as_bytes());
    format!("sv{}", &hex::encode(h)[..11])
}

pub struct Ipam {
    dir: PathBuf,
    cidr: Ipv4Cidr,
}

impl Ipam {
    pub fn open(dir: impl Into<PathBuf>, cidr: Ipv4Cidr) -> Result<Ipam> {
        let dir = dir.into();
        fs::create_dir_all(&dir).ctx(&dir, "mkdir")?;
        Ok(Ipam { dir, cidr })
    }

    fn path(&self, ip: Ipv4Addr) -> PathBuf {
        self.dir.join(ip.to_string())
    }

    /// Allocate a free address for `owner`. Starts after the last allocation
    /// (kept in `last`) so a just-released address is not immediately reused.
    pub fn allocate(&self, owner: &str) -> Result<Ipv4Addr> {
        let range = self.cidr.pod_range();
        let (lo, hi) = (*range.start(), *range.end());
        let last_path = self.dir.join("last");
        let last = fs::read_to_string(&last_path)
            .ok()
            .and_then(|s| s.trim().parse::<Ipv4Addr>().ok())
            .map(u32::from)
            .filter(|v| (lo..=hi).contains(v))
            .unwrap_or(hi);
        let n = hi - lo + 1;
        for i in 1..=n {
            let cand = lo + (last - lo + i) % n;
            let ip = Ipv4Addr::from(cand);
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.path(ip))
            {
                Ok(mut f) => {
                    f.write_all(owner.as_bytes()).ctx(self.path(ip), "write")?;
                    let _ = fs::write(&last_path, ip.to_string());
                    return Ok(ip);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(self.path(ip), "create", e)),
            }
        }
        Err(Error::IpExhausted(self.cidr.to_string()))
    }

    /// Release `ip` if it is held by `owner` (idempotent).
    pub fn release(&self, ip: Ipv4Addr, owner: &str) -> Result<()> {
        let p = self.path(ip);
        match fs::read_to_string(&p) {
            Ok(o) if o == owner => crate::util::remove_file_idem(&p),
            _ => Ok(()),
        }
    }

    /// Release every address held by `owner`.
    pub fn release_owner(&self, owner: &str) -> Result<()> {
        for (ip, o) in self.allocations()? {
            if o == owner {
                crate::util::remove_file_idem(&self.path(ip))?;
            }
        }
        Ok(())
    }

    /// (address, owner) pairs.
    pub fn allocations(&self) -> Result<Vec<(Ipv4Addr, String)>> {
        let mut v = Vec::new();
        for e in fs::read_dir(&self.dir).ctx(&self.dir, "readdir")?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Ok(ip) = name.parse::<Ipv4Addr>() {
                if let Ok(owner) = fs::read_to_string(e.path()) {
                    v.push((ip, owner));
                }
            }
        }
        Ok(v)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_math() {
        let c: Ipv4Cidr = "10.1.2.0/24".parse().unwrap();
        assert_eq!(c.gateway(), Ipv4Addr::new(10, 1, 2, 1));
        assert_eq!(
            *c.pod_range().start(),
            u32::from(Ipv4Addr::new(10, 1, 2, 2))
        );
        assert_eq!(
            *c.pod_range().end(),
            u32::from(Ipv4Addr::new(10, 1, 2, 254))
        );
        assert!("10.1.2.1/24".parse::<Ipv4Cidr>().is_err());
        assert!(host_veth_name("some-long-sandbox-id-123456").len() <= 15);
    }

    #[test]
    fn ipam_allocates_uniquely_and_persists() {
        let tmp = tempfile::tempdir().unwrap();
        let cidr: Ipv4Cidr = "10.9.9.0/29".parse().unwrap(); // 5 pod addresses
        let ipam = Ipam::open(tmp.path(), cidr).unwrap();
        let mut got = Vec::new();
        for i in 0..5 {
            got.push(ipam.allocate(&format!("s{i}")).unwrap());
        }
        got.sort();
        got.dedup();
        assert_eq!(got.len(), 5);
        assert!(matches!(ipam.allocate("x"), Err(Error::IpExhausted(_))));
        // A second allocator on the same dir (agent restart) sees the same state.
        let again = Ipam::open(tmp.path(), cidr).unwrap();
        assert!(again.allocate("y").is_err());
        again.release_owner("s3").unwrap();
        let ip = again.allocate("y").unwrap();
        assert!(cidr.contains(ip));
        assert_eq!(again.allocations().unwrap().len(), 5);
    }
}
