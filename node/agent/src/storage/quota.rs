//! A volume directory's size limit: a quota of the filesystem the node's state dir lies on,
//! where it has one, and a plain directory (with the reason said) where it has not.
//!
//! - ext4 mounted with `prjquota`, or XFS with `pquota`: the directory gets a project id of
//!   its own (inherited by everything made inside it) and that project a block hard limit,
//!   set with `quotactl_fd` on the directory.
//! - btrfs with quotas enabled (`btrfs quota enable`): the directory is a subvolume, and its
//!   qgroup gets the limit.
//!
//! A write past the limit fails in the container with `EDQUOT` ("Disk quota exceeded"),
//! as on any node of a cluster whose volumes have sizes.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use nix::errno::Errno;

/// The project id a volume's directory carries, recorded on its PersistentVolume so that
/// reclaim (after a restart too) clears that project's limit.
pub const PROJECT_ID_ANNOTATION: &str = "shoal.io/project-id";
/// Whether the volume's size is enforced, and if not, why: said on the PersistentVolume.
pub const QUOTA_ANNOTATION: &str = "shoal.io/quota";

/// How a volume's size is held, once its directory is made.
#[derive(Debug, Clone, PartialEq)]
pub enum Limit {
    /// A project quota of this id.
    Project(u32),
    /// The subvolume's btrfs qgroup.
    Qgroup,
    /// The directory has no limit, for this reason.
    NotEnforced(String),
}

impl Limit {
    /// The text of [`QUOTA_ANNOTATION`].
    pub fn annotation(&self, bytes: Option<u64>) -> String {
        let size = bytes.map(|b| format!(" at {b} bytes")).unwrap_or_default();
        match self {
            Limit::Project(id) => format!("enforced{size} by project quota {id}"),
            Limit::Qgroup => format!("enforced{size} by the subvolume's btrfs qgroup"),
            Limit::NotEnforced(reason) => format!("not enforced: {reason}"),
        }
    }

    pub fn is_enforced(&self) -> bool {
        !matches!(self, Limit::NotEnforced(_))
    }
}

/// A stable project id for a claim uid: FNV-1a, kept within 1..2^31 since 0 is "no project"
/// and quota tools print ids as signed numbers.
pub fn project_id(claim_uid: &str) -> u32 {
    let hash = claim_uid.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    hash % (i32::MAX as u32 - 1) + 1
}

/// Whether an error of a quota call means "this filesystem (as mounted) has no such
/// quota", as opposed to a failure worth retrying.
pub fn means_unsupported(errno: Errno) -> bool {
    matches!(
        errno,
        Errno::ENOTTY
            | Errno::EOPNOTSUPP
            | Errno::ESRCH
            | Errno::ENOENT
            | Errno::ENOSYS
            | Errno::EINVAL
            | Errno::ENOTCONN
    )
}

/// The name of a filesystem by its `statfs` magic, for messages.
pub fn fs_name(magic: i64) -> String {
    match magic {
        0xef53 => "ext4".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683e => "btrfs".into(),
        0x0102_1994 => "tmpfs".into(),
        0x794c_7630 => "overlayfs".into(),
        other => format!("filesystem {other:#x}"),
    }
}

const BTRFS_MAGIC: i64 = 0x9123_683e;

/// Makes `dir` (writable by any user: the container may not run as root) with a limit of
/// `bytes` where the filesystem allows one. Making it again is harmless: a provisioner that
/// crashed before recording the volume redoes this step.
pub fn make_dir(dir: &Path, bytes: Option<u64>, project: u32) -> io::Result<Limit> {
    use std::os::unix::fs::PermissionsExt;
    let parent = dir
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no parent", dir.display())))?;
    std::fs::create_dir_all(parent)?;
    let magic: i64 = nix::sys::statfs::statfs(parent)?.filesystem_type().0;
    let fs = fs_name(magic);
    if magic == BTRFS_MAGIC {
        create_subvolume(parent, dir)?;
    } else {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
    let Some(bytes) = bytes else {
        return Ok(Limit::NotEnforced("the claim requests no size".into()));
    };
    let handle = File::open(dir)?;
    if magic == BTRFS_MAGIC {
        return match sys::qgroup_limit(&handle, bytes) {
            Ok(()) => Ok(Limit::Qgroup),
            Err(e) if means_unsupported(e) => Ok(Limit::NotEnforced(format!(
                "btrfs at {} has quotas off (btrfs quota enable): {e}",
                parent.display()
            ))),
            Err(e) => Err(e.into()),
        };
    }
    match sys::set_project(&handle, project)
        .and_then(|()| sys::set_block_limit(&handle, project, bytes))
    {
        Ok(()) => Ok(Limit::Project(project)),
        Err(e) if means_unsupported(e) => Ok(Limit::NotEnforced(format!(
            "{fs} at {} has no project quotas (mount with prjquota): {e}",
            parent.display()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// Lifts the limit of `project` on the filesystem holding `root`, once its volume is gone
/// (project ids outlive directories in the quota file). A filesystem without project quotas
/// has nothing to clear.
pub fn clear(root: &Path, project: u32) -> io::Result<()> {
    let handle = File::open(root)?;
    match sys::set_block_limit(&handle, project, 0) {
        Err(e) if !means_unsupported(e) => Err(e.into()),
        _ => Ok(()),
    }
}

/// A btrfs subvolume `dir` in `parent`; an existing directory of that name is kept (made by
/// an earlier pass, or before the state dir moved to btrfs).
fn create_subvolume(parent: &Path, dir: &Path) -> io::Result<()> {
    let name = dir
        .file_name()
        .ok_or_else(|| io::Error::other(format!("{} has no name", dir.display())))?;
    match sys::subvolume_create(&File::open(parent)?, name.as_encoded_bytes()) {
        Ok(()) => Ok(()),
        Err(Errno::EEXIST) if dir.is_dir() => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// The kernel calls, each on an open directory: the agent's only `unsafe` code (nix has no
/// safe wrappers for these ioctls, nor for quotactl_fd).
#[allow(unsafe_code)]
mod sys {
    use super::*;

    /// `struct fsxattr` of `<linux/fs.h>`.
    #[repr(C)]
    #[derive(Default)]
    pub struct FsXattr {
        xflags: u32,
        extsize: u32,
        nextents: u32,
        projid: u32,
        cowextsize: u32,
        pad: [u8; 8],
    }
    const FS_XFLAG_PROJINHERIT: u32 = 0x200;
    nix::ioctl_read!(fs_get_xattr, b'X', 31, FsXattr);
    nix::ioctl_write_ptr!(fs_set_xattr, b'X', 32, FsXattr);

    /// Gives the directory `project` and has what is made inside it inherit it.
    pub fn set_project(dir: &File, project: u32) -> Result<(), Errno> {
        let mut attr = FsXattr::default();
        // SAFETY: the fd is open for the call's length and `attr` is the struct the ioctl
        // fills, of the kernel's layout and size.
        unsafe { fs_get_xattr(dir.as_raw_fd(), &mut attr) }?;
        attr.projid = project;
        attr.xflags |= FS_XFLAG_PROJINHERIT;
        // SAFETY: as above; the kernel only reads `attr`.
        unsafe { fs_set_xattr(dir.as_raw_fd(), &attr) }?;
        Ok(())
    }

    const PRJQUOTA: i32 = 2;
    /// Quota limits count blocks of this size (`QIF_DQBLKSIZE`).
    const QUOTA_BLOCK: u64 = 1024;

    /// Sets the block hard limit of `project` (0: none) on the directory's filesystem.
    pub fn set_block_limit(dir: &File, project: u32, bytes: u64) -> Result<(), Errno> {
        let blocks = bytes.div_ceil(QUOTA_BLOCK);
        let mut quota = libc::dqblk {
            dqb_bhardlimit: blocks,
            dqb_bsoftlimit: blocks,
            dqb_curspace: 0,
            dqb_ihardlimit: 0,
            dqb_isoftlimit: 0,
            dqb_curinodes: 0,
            dqb_btime: 0,
            dqb_itime: 0,
            dqb_valid: libc::QIF_BLIMITS,
        };
        // QCMD(Q_SETQUOTA, PRJQUOTA) of <sys/quota.h>.
        let command = ((libc::Q_SETQUOTA as u32) << 8 | PRJQUOTA as u32) as libc::c_int;
        // SAFETY: quotactl_fd reads a `struct if_dqblk` (libc's dqblk) through the pointer,
        // which lives across the call; the fd is open.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_quotactl_fd,
                dir.as_raw_fd(),
                command,
                project as libc::c_int,
                &mut quota as *mut libc::dqblk,
            )
        };
        Errno::result(rc).map(drop)
    }

    /// `struct btrfs_ioctl_vol_args`.
    #[repr(C)]
    pub struct VolArgs {
        fd: i64,
        name: [u8; 4088],
    }
    /// `struct btrfs_ioctl_qgroup_limit_args` with its `struct btrfs_qgroup_limit`.
    #[repr(C)]
    #[derive(Default)]
    pub struct QgroupLimitArgs {
        qgroupid: u64,
        flags: u64,
        max_rfer: u64,
        max_excl: u64,
        rsv_rfer: u64,
        rsv_excl: u64,
    }
    const BTRFS_QGROUP_LIMIT_MAX_RFER: u64 = 1;
    nix::ioctl_write_ptr!(btrfs_subvol_create, 0x94, 14, VolArgs);
    nix::ioctl_read!(btrfs_qgroup_limit, 0x94, 43, QgroupLimitArgs);

    /// Makes the subvolume `name` in the directory `parent`.
    pub fn subvolume_create(parent: &File, name: &[u8]) -> Result<(), Errno> {
        let mut args = VolArgs {
            fd: 0,
            name: [0; 4088],
        };
        if name.is_empty() || name.len() >= args.name.len() || name.contains(&0) {
            return Err(Errno::EINVAL);
        }
        args.name[..name.len()].copy_from_slice(name);
        // SAFETY: the fd is open and `args` has the kernel's layout, its name NUL-ended.
        unsafe { btrfs_subvol_create(parent.as_raw_fd(), &args) }?;
        Ok(())
    }

    /// Limits the referenced bytes of the subvolume `dir` is the top of (qgroup id 0: the
    /// fd's own subvolume).
    pub fn qgroup_limit(dir: &File, bytes: u64) -> Result<(), Errno> {
        let mut args = QgroupLimitArgs {
            flags: BTRFS_QGROUP_LIMIT_MAX_RFER,
            max_rfer: bytes,
            ..Default::default()
        };
        // SAFETY: the fd is open and `args` has the kernel's layout and size.
        unsafe { btrfs_qgroup_limit(dir.as_raw_fd(), &mut args) }?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_ids_are_stable_nonzero_and_spread() {
        let a = project_id("0b6b1a34-6c6e-4c0e-9f57-3f1d2f3a9e10");
        assert_eq!(a, project_id("0b6b1a34-6c6e-4c0e-9f57-3f1d2f3a9e10"));
        assert_ne!(a, project_id("0b6b1a34-6c6e-4c0e-9f57-3f1d2f3a9e11"));
        for uid in ["", "x", "u1", "u2"] {
            let id = project_id(uid);
            assert!(id > 0 && id < i32::MAX as u32, "{uid}: {id}");
        }
    }

    #[test]
    fn the_annotation_says_whether_and_why() {
        assert_eq!(
            Limit::Project(7).annotation(Some(2 << 20)),
            "enforced at 2097152 bytes by project quota 7"
        );
        let plain = Limit::NotEnforced(
            "ext4 at /var/lib/shoal/volumes has no project quotas (mount with prjquota)".into(),
        );
        assert!(!plain.is_enforced());
        assert_eq!(
            plain.annotation(Some(1)),
            "not enforced: ext4 at /var/lib/shoal/volumes has no project quotas (mount with prjquota)"
        );
        assert!(means_unsupported(Errno::ESRCH) && means_unsupported(Errno::ENOTTY));
        assert!(!means_unsupported(Errno::EIO) && !means_unsupported(Errno::EDQUOT));
        assert_eq!(fs_name(0xef53), "ext4");
        assert_eq!(fs_name(0x1234), "filesystem 0x1234");
    }

    /// The state dir of the tests lies on this machine's own filesystem: whatever it is, a
    /// directory comes out, and a limit is either set or its absence explained.
    #[test]
    fn a_directory_is_made_whatever_the_filesystem() {
        let root = tempfile::tempdir().expect("tempdir");
        let dir = root.path().join("volumes/pvc-u1");
        let limit = make_dir(&dir, Some(1 << 20), project_id("u1")).expect("made");
        assert!(dir.is_dir());
        if let Limit::NotEnforced(reason) = &limit {
            assert!(reason.contains(&root.path().join("volumes").display().to_string()));
        }
        assert_eq!(
            make_dir(&dir, Some(1 << 20), project_id("u1")).expect("again"),
            limit
        );
        clear(root.path(), project_id("u1")).expect("cleared");
    }
}
