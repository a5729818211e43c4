//! Image store: imports, verification, unpacking with whiteouts, safety.

use shoal_node::error::Error;
use shoal_node::image::{Digest, ImageConfig, ImageStore};
use shoal_node::rootfs::Rootfs;
use shoal_node::testimage::{self, Layer, LayerBuilder};
use std::fs;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

fn store(tmp: &Path) -> ImageStore {
    ImageStore::open(tmp.join("store")).unwrap()
}

#[test]
fn busybox_oci_layout_imports_and_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let d1 = testimage::build_busybox_layout(&tmp.path().join("a"), "busybox", "1.0").unwrap();
    let d2 = testimage::build_busybox_layout(&tmp.path().join("b"), "busybox", "1.0").unwrap();
    assert_eq!(d1, d2, "image digest must be stable");
    let s = store(tmp.path());
    let imported = s.import(&tmp.path().join("a")).unwrap();
    assert_eq!(imported.len(), 1);
    let info = s.resolve("busybox:1.0").unwrap();
    assert_eq!(info.manifest_digest, d1);
    assert_eq!(info.config.cmd, Some(vec!["sh".to_string()]));
    assert_eq!(info.config.exposed_port_list(), vec!["80/tcp".to_string()]);
    assert_eq!(
        s.resolve(&format!("busybox@{d1}")).unwrap().layers,
        info.layers
    );
    assert!(
        matches!(s.resolve("busybox"), Err(Error::ImageNotFound(_))),
        "default tag is latest"
    );
    assert_eq!(s.list().unwrap().len(), 1);
    for b in s.image_blobs("busybox:1.0").unwrap() {
        assert!(s.blob_path(&b).is_file());
    }
    let layer = s.unpack(&info.layers[0]).unwrap();
    assert!(layer.join("bin/busybox").is_file());
    assert_eq!(
        fs::read_link(layer.join("bin/sh")).unwrap(),
        Path::new("busybox")
    );
    assert_eq!(
        fs::metadata(layer.join("tmp")).unwrap().mode() & 0o7777,
        0o1777
    );
    assert!(fs::read_to_string(layer.join("etc/passwd"))
        .unwrap()
        .contains("nobody:x:65534"));
    // Second unpack reuses the directory.
    fs::write(layer.join("marker"), "x").unwrap();
    assert!(s.unpack(&info.layers[0]).unwrap().join("marker").exists());
}

#[test]
fn docker_save_and_oci_tar_import() {
    let tmp = tempfile::tempdir().unwrap();
    let tar = tmp.path().join("busybox-docker.tar");
    testimage::build_busybox_docker_save(&tar, "busybox", "docker").unwrap();
    let s = store(tmp.path());
    let got = s.import(&tar).unwrap();
    assert_eq!(got[0].reference, "busybox:docker");
    let info = s.resolve("busybox:docker").unwrap();
    assert_eq!(info.config.cmd, Some(vec!["sh".to_string()]));
    assert!(s
        .unpack(&info.layers[0])
        .unwrap()
        .join("bin/busybox")
        .is_file());
    // OCI layout packed as a tar.
    let layout = tmp.path().join("layout");
    testimage::build_busybox_layout(&layout, "busybox", "ocitar").unwrap();
    let oci_tar = tmp.path().join("oci.tar");
    let mut b = tar::Builder::new(fs::File::create(&oci_tar).unwrap());
    b.append_dir_all(".", &layout).unwrap();
    b.into_inner().unwrap();
    s.import(&oci_tar).unwrap();
    assert_eq!(s.resolve("busybox:ocitar").unwrap().layers.len(), 1);
}

#[test]
fn corrupted_blob_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    let d = testimage::build_busybox_layout(&layout, "busybox", "bad").unwrap();
    let manifest: serde_json::Value =
        serde_json::from_slice(&fs::read(layout.join("blobs/sha256").join(d.hex())).unwrap())
            .unwrap();
    let layer_digest = manifest["layers"][0]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let p = layout.join("blobs/sha256").join(&layer_digest[7..]);
    let mut bytes = fs::read(&p).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    fs::write(&p, bytes).unwrap();
    let s = store(tmp.path());
    let err = s.import(&layout).unwrap_err();
    assert!(matches!(err, Error::DigestMismatch { .. }), "{err}");
    assert!(!s.has_blob(&Digest::parse(&layer_digest).unwrap()));
    assert!(s.resolve("busybox:bad").is_err());
    // import_blob verifies too.
    let wrong = Digest::of(b"something else");
    assert!(s.import_blob(&wrong, None, &b"payload"[..]).is_err());
    assert!(!s.has_blob(&wrong));
}

#[test]
fn blob_level_export_and_import() {
    let tmp = tempfile::tempdir().unwrap();
    let layout = tmp.path().join("layout");
    testimage::build_busybox_layout(&layout, "busybox", "x").unwrap();
    let a = ImageStore::open(tmp.path().join("a")).unwrap();
    a.import(&layout).unwrap();
    let exp = a.export("busybox:x").unwrap();
    let b = ImageStore::open(tmp.path().join("b")).unwrap();
    // Adding the manifest before its blobs fails...
    assert!(b.add_image("busybox:x", &exp.manifest).is_err());
    b.import_blob(&exp.config_digest, None, exp.config.as_slice())
        .unwrap();
    for l in &exp.layers {
        b.import_blob(l, None, fs::File::open(a.blob_path(l)).unwrap())
            .unwrap();
    }
    let info = b.add_image("busybox:x", &exp.manifest).unwrap();
    assert_eq!(info.manifest_digest, exp.manifest_digest);
    assert_eq!(
        b.resolve("busybox:x").unwrap(),
        a.resolve("busybox:x").unwrap()
    );
}

#[test]
fn whiteouts_opaque_dirs_links_and_overlay_view() {
    let tmp = tempfile::tempdir().unwrap();
    let mut l1 = LayerBuilder::new();
    l1.dir("a", 0o755).unwrap();
    l1.file("a/x", 0o644, b"x").unwrap();
    l1.file("a/y", 0o644, b"y").unwrap();
    l1.dir("b", 0o755).unwrap();
    l1.file("b/z", 0o644, b"z").unwrap();
    let mut l2 = LayerBuilder::new();
    l2.whiteout("a/x").unwrap();
    l2.dir("b", 0o755).unwrap();
    l2.opaque("b").unwrap();
    l2.file("b/new", 0o600, b"new").unwrap();
    l2.hardlink("b/new-link", "b/new").unwrap();
    l2.symlink("abs", "/etc/passwd").unwrap();
    l2.symlink("rel", "../../../../etc").unwrap();
    let layers = [
        Layer {
            tar: l1.finish().unwrap(),
            gzip: true,
        },
        Layer {
            tar: l2.finish().unwrap(),
            gzip: false,
        },
    ];
    let layout = tmp.path().join("layout");
    testimage::write_oci_layout(&layout, "two:layers", &ImageConfig::default(), &layers).unwrap();
    let s = store(tmp.path());
    s.import(&layout).unwrap();
    let info = s.resolve("two:layers").unwrap();
    let lowers = s.lower_dirs(&info).unwrap();
    let top = &lowers[0];
    let wh = fs::symlink_metadata(top.join("a/x")).unwrap();
    assert!(
        wh.file_type().is_char_device() && wh.rdev() == 0,
        "whiteout must be a 0:0 char device"
    );
    assert_eq!(
        xattr::get(top.join("b"), "trusted.overlay.opaque").unwrap(),
        Some(b"y".to_vec())
    );
    assert!(!top.join("b/.wh..wh..opq").exists());
    assert_eq!(
        fs::metadata(top.join("b/new")).unwrap().ino(),
        fs::metadata(top.join("b/new-link")).unwrap().ino()
    );
    assert_eq!(
        fs::read_link(top.join("abs")).unwrap(),
        Path::new("/etc/passwd")
    );

    // The merged overlay view applies them.
    struct Unmount(Rootfs);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = self.0.remove();
        }
    }
    let r = Unmount(Rootfs::prepare(&tmp.path().join("c1"), lowers.clone()).unwrap());
    r.0.mount().unwrap();
    let m = &r.0.merged;
    assert!(!m.join("a/x").exists());
    assert_eq!(fs::read_to_string(m.join("a/y")).unwrap(), "y");
    assert!(!m.join("b/z").exists(), "opaque dir hides lower content");
    assert_eq!(fs::read_to_string(m.join("b/new")).unwrap(), "new");
    fs::write(m.join("written"), "upper").unwrap();
    assert!(r.0.upper.join("written").exists());
    drop(r);
    assert!(!tmp.path().join("c1/rootfs").exists());
}

/// A raw tar entry, bypassing the tar crate's own path checks.
fn raw_entry(
    b: &mut tar::Builder<Vec<u8>>,
    name: &[u8],
    kind: tar::EntryType,
    link: &[u8],
    data: &[u8],
) {
    let mut h = tar::Header::new_old();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link);
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(data.len() as u64);
    h.set_cksum();
    b.append(&h, data).unwrap();
}

#[test]
fn path_traversal_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let outside = tmp.path().join("outside");
    fs::create_dir(&outside).unwrap();
    let cases: Vec<Vec<u8>> = vec![
        {
            let mut b = tar::Builder::new(Vec::new());
            raw_entry(&mut b, b"../escape", tar::EntryType::Regular, b"", b"x");
            b.into_inner().unwrap()
        },
        {
            let mut b = tar::Builder::new(Vec::new());
            raw_entry(
                &mut b,
                b"link",
                tar::EntryType::Symlink,
                outside.to_str().unwrap().as_bytes(),
                b"",
            );
            raw_entry(&mut b, b"link/pwned", tar::EntryType::Regular, b"", b"x");
            b.into_inner().unwrap()
        },
        {
            let mut b = tar::Builder::new(Vec::new());
            raw_entry(
                &mut b,
                b"hl",
                tar::EntryType::Link,
                b"../../etc/passwd",
                b"",
            );
            b.into_inner().unwrap()
        },
    ];
    for (i, tar) in cases.into_iter().enumerate() {
        let blob = tmp.path().join(format!("blob{i}"));
        fs::write(&blob, tar).unwrap();
        let dest = tmp.path().join(format!("dest{i}"));
        fs::create_dir(&dest).unwrap();
        let err = shoal_node::image::unpack_layer(&blob, &dest).unwrap_err();
        assert!(matches!(err, Error::UnsafePath { .. }), "case {i}: {err}");
    }
    assert!(!tmp.path().join("escape").exists());
    assert_eq!(
        fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing written through the symlink"
    );
}
