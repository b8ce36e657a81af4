//! Node images: OCI images copied with skopeo (from an OCI layout, an `oci-archive` or
//! `docker-archive` tarball, or a registry, with the usual auth files) into one OCI
//! layout shared by every lab of the machine, each unpacked once with umoci into a root
//! filesystem named by its manifest's digest. A node of an image sees an overlay of that
//! root and a directory of its own (`mounts::enter_image_root`): a hundred nodes of one
//! image cost one copy on disk.
//!
//! The store (`/var/lib/vemu/images`, or [`IMAGES_DIR_ENV`]):
//! `layout/` (the OCI layout: blobs by digest, a tag per reference), `roots/HEX/`
//! (`rootfs/`, umoci's `config.json`, and `image.json`: the [`Image`]), `lock` (one
//! process changes the store at a time). A root is unpacked beside its final name and
//! renamed into place, so that a failure (a corrupt layer, a full disk) leaves no half
//! root behind.

use std::collections::BTreeSet;
use std::io::Write;

use serde::{Deserialize, Serialize};

use super::*;

/// Environment variable naming the image store (default [`DEFAULT_IMAGES_DIR`]).
pub const IMAGES_DIR_ENV: &str = "VEMU_IMAGES_DIR";
pub const DEFAULT_IMAGES_DIR: &str = "/var/lib/vemu/images";

/// The image store of this machine.
pub fn store_dir() -> PathBuf {
    std::env::var_os(IMAGES_DIR_ENV)
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_IMAGES_DIR), PathBuf::from)
}

/// An image ready for nodes: its root filesystem and how a container engine would
/// start it (from its configuration: `Entrypoint` + `Cmd`, `Env`, `WorkingDir`, `User`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// The manifest's digest (`sha256:…`).
    pub digest: String,
    /// The references it was prepared from.
    pub references: BTreeSet<String>,
    pub rootfs: PathBuf,
    /// Its main process (empty: none).
    pub args: Vec<String>,
    /// `NAME=VALUE` each.
    pub env: Vec<String>,
    pub cwd: String,
    pub uid: u32,
    pub gid: u32,
}

impl Image {
    /// The main process as a shell command (`exec` of its words, quoted).
    pub fn main_command(&self) -> Option<String> {
        if self.args.is_empty() {
            return None;
        }
        let quoted: Vec<String> =
            self.args.iter().map(|a| format!("'{}'", a.replace('\'', r"'\''"))).collect();
        Some(format!("exec {}", quoted.join(" ")))
    }
}

/// Runs a tool, its error being the last lines it wrote.
fn run_tool(program: &str, args: &[&str]) -> Result<String> {
    let o = Command::new(program).args(args).output().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            anyhow!("{program} is not installed (image nodes need skopeo and umoci)")
        }
        _ => anyhow!("running {program}: {e}"),
    })?;
    if !o.status.success() {
        let err = String::from_utf8_lossy(&o.stderr);
        let last: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        let tail: Vec<String> =
            last[last.len().saturating_sub(3)..].iter().map(|l| logged_message(l)).collect();
        bail!("{}", tail.join("; "));
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The skopeo source of `reference` (as the scenario gives it: `path:P` is an OCI
/// layout directory, or an `oci-archive` or `docker-archive` tarball, told apart here).
fn skopeo_source(reference: &str) -> Result<String> {
    let Some(path) = reference.strip_prefix("path:") else { return Ok(reference.to_string()) };
    let p = Path::new(path);
    let meta = fs::metadata(p).map_err(|e| anyhow!("cannot read {path}: {e}"))?;
    if meta.is_dir() {
        if !p.join("index.json").is_file() {
            bail!("{path} is a directory but not an OCI layout (it has no index.json)");
        }
        return Ok(format!("oci:{path}"));
    }
    for t in ["oci-archive", "docker-archive"] {
        let s = format!("{t}:{path}");
        if run_tool("skopeo", &["inspect", "--raw", &s]).is_ok() {
            return Ok(s);
        }
    }
    bail!("{path} is neither an OCI layout, an oci-archive nor a docker-archive")
}

/// The message of a line skopeo logged (`time=… level=fatal msg="…"`), or the line.
fn logged_message(line: &str) -> String {
    match line.split_once(" msg=\"") {
        Some((_, m)) => m.trim_end_matches('"').replace("\\\"", "\""),
        None => line.to_string(),
    }
}

/// Whether `reference` can be read (a registry's: reached) — without copying it.
pub fn check_reference(reference: &str) -> Result<()> {
    let s = skopeo_source(reference)?;
    let mut args = vec!["inspect", "--raw"];
    if on_loopback(&s) {
        args.push("--tls-verify=false");
    }
    args.push(&s);
    run_tool("skopeo", &args)?;
    Ok(())
}

/// Whether `src` names a registry on this machine's loopback (`localhost`, 127.0.0.0/8,
/// `[::1]`): spoken to without TLS, as Docker does; other registries with TLS unless
/// the machine's `/etc/containers/registries.conf` says otherwise.
fn on_loopback(src: &str) -> bool {
    let Some(rest) = src.strip_prefix("docker://") else { return false };
    let host = rest.split('/').next().unwrap_or_default();
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host.split(':').next().unwrap_or_default(),
    };
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|a| a.is_loopback())
}

/// The store's tag for a reference: a hash of it (tags are short and plain).
fn tag_of(reference: &str) -> String {
    format!("r-{:016x}", lock::stable_hash(reference))
}

/// Hold the store's lock (and make the store) while `f` runs.
fn with_store_locked<T>(f: impl FnOnce(&Path) -> Result<T>) -> Result<T> {
    let dir = store_dir();
    fs::create_dir_all(dir.join("roots"))
        .with_context(|| format!("making the image store {}", dir.display()))?;
    let _lock = lock::lock_file(&dir.join("lock"))?;
    f(&dir)
}

/// Copy `reference` into the store (skopeo skips the blobs it has) and unpack it once:
/// the image, ready for nodes.
pub fn prepare_image(reference: &str) -> Result<Image> {
    let src = skopeo_source(reference)?;
    with_store_locked(|dir| {
        let tag = tag_of(reference);
        let dest = format!("oci:{}:{tag}", dir.join("layout").display());
        // A local image unchanged since it was copied is not copied again (a copy of
        // blobs the store has still costs a third of a second); a registry's always is
        // (its tags move).
        let stamp_path = dir.join("stamps").join(&tag);
        let stamp = local_stamp(&src);
        let unchanged = stamp.is_some()
            && fs::read_to_string(&stamp_path).ok() == stamp
            && tagged_digest(dir, &tag).is_ok();
        if !unchanged {
            let mut args = vec!["copy", "--quiet"];
            if on_loopback(&src) {
                args.push("--src-tls-verify=false");
            }
            args.extend([src.as_str(), dest.as_str()]);
            run_tool("skopeo", &args).context("copying the image")?;
            if let Some(s) = &stamp {
                fs::create_dir_all(dir.join("stamps"))?;
                fs::write(&stamp_path, s)?;
            }
        }
        let digest = tagged_digest(dir, &tag)?;
        let hex = digest.trim_start_matches("sha256:").to_string();
        let root = dir.join("roots").join(&hex);
        let record = root.join("image.json");
        if let Ok(text) = fs::read(&record) {
            let mut image: Image = serde_json::from_slice(&text)
                .with_context(|| format!("reading {}", record.display()))?;
            if image.references.insert(reference.to_string()) {
                write_record(&record, &image)?;
            }
            return Ok(image);
        }
        let partial = dir.join("roots").join(format!(".{hex}.partial"));
        let _ = fs::remove_dir_all(&partial);
        let image_ref = format!("{}:{tag}", dir.join("layout").display());
        let unpacked =
            run_tool("umoci", &["unpack", "--image", &image_ref, &partial.to_string_lossy()])
                .context("unpacking the image (a corrupt layer, or a full disk?)");
        if let Err(e) = unpacked {
            let _ = fs::remove_dir_all(&partial);
            return Err(e);
        }
        let mut image = from_bundle(&partial, &digest, &root)?;
        image.references.insert(reference.to_string());
        write_record(&partial.join("image.json"), &image)?;
        fs::rename(&partial, &root)
            .with_context(|| format!("moving {} into place", root.display()))?;
        Ok(image)
    })
}

/// How a local source (an OCI layout's index, or an archive) looks now: its path, size
/// and modification time; `None` for a registry's.
fn local_stamp(src: &str) -> Option<String> {
    let rest =
        ["oci:", "oci-archive:", "docker-archive:"].iter().find_map(|t| src.strip_prefix(t))?;
    let path = Path::new(rest.split(':').next()?);
    let file = if path.is_dir() { path.join("index.json") } else { path.to_path_buf() };
    let m = fs::metadata(&file).ok()?;
    Some(format!("{src}\n{} {} {}\n", m.len(), m.mtime(), m.mtime_nsec()))
}

/// The manifest digest the store's layout has under `tag`.
fn tagged_digest(dir: &Path, tag: &str) -> Result<String> {
    let index: serde_json::Value =
        serde_json::from_slice(&fs::read(dir.join("layout/index.json"))?)
            .context("reading the image store's index")?;
    index["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == tag)
        .and_then(|m| m["digest"].as_str())
        .map(str::to_string)
        .ok_or_else(|| anyhow!("the image store has no image tagged {tag}"))
}

/// The image unpacked (by umoci) at `bundle`, as it will be at `root`.
fn from_bundle(bundle: &Path, digest: &str, root: &Path) -> Result<Image> {
    let spec: serde_json::Value = serde_json::from_slice(&fs::read(bundle.join("config.json"))?)
        .context("reading the unpacked image's configuration")?;
    let p = &spec["process"];
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|s| s.as_str().map(String::from)).collect()
    };
    Ok(Image {
        digest: digest.to_string(),
        references: BTreeSet::new(),
        rootfs: root.join("rootfs"),
        args: strings(&p["args"]),
        env: strings(&p["env"]),
        cwd: p["cwd"].as_str().filter(|c| c.starts_with('/')).unwrap_or("/").to_string(),
        uid: p["user"]["uid"].as_u64().unwrap_or(0) as u32,
        gid: p["user"]["gid"].as_u64().unwrap_or(0) as u32,
    })
}

fn write_record(path: &Path, image: &Image) -> Result<()> {
    let mut f = fs::File::create(path).with_context(|| format!("writing {}", path.display()))?;
    f.write_all(&serde_json::to_vec_pretty(image)?)?;
    Ok(())
}

/// Every image unpacked in the store, with its size on disk (bytes).
pub fn stored() -> Result<Vec<(Image, u64)>> {
    let roots = store_dir().join("roots");
    let Ok(dir) = fs::read_dir(&roots) else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for e in dir.flatten() {
        if e.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let Ok(text) = fs::read(e.path().join("image.json")) else { continue };
        let Ok(image) = serde_json::from_slice::<Image>(&text) else { continue };
        let size = du_bytes(&e.path());
        out.push((image, size));
    }
    out.sort_by(|a, b| a.0.references.cmp(&b.0.references));
    Ok(out)
}

/// Bytes of the files under `dir` (each inode once).
fn du_bytes(dir: &Path) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let Ok(m) = e.path().symlink_metadata() else { continue };
            if m.is_dir() {
                stack.push(e.path());
            } else if seen.insert(m.ino()) {
                total += m.blocks() * 512;
            }
        }
    }
    total
}

/// The images that nodes of running labs (or shares) on this machine use, by digest.
pub fn in_use() -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    let Ok(labs) = fs::read_dir(STATE_DIR) else { return used };
    for lab in labs.flatten() {
        let Ok(nodes) = fs::read_dir(lab.path().join("fs")) else { continue };
        for n in nodes.flatten() {
            if let Ok(text) = fs::read(n.path().join(NODE_IMAGE)) {
                if let Ok(i) = serde_json::from_slice::<Image>(&text) {
                    used.insert(i.digest);
                }
            }
        }
    }
    used
}

/// Remove the unpacked image whose digest starts with `which` (after `sha256:`, or
/// with it) or that was prepared from reference `which`, unless a node uses it.
/// Returns its digest.
pub fn remove_image(which: &str) -> Result<String> {
    with_store_locked(|_| {
        let all = stored()?;
        let hex = which.trim_start_matches("sha256:");
        let found: Vec<&Image> = all
            .iter()
            .map(|(i, _)| i)
            .filter(|i| {
                i.references.iter().any(|r| {
                    let bare = r.strip_prefix("path:").or(r.strip_prefix("docker://"));
                    r == which || bare == Some(which)
                }) || (hex.len() >= 6 && i.digest.trim_start_matches("sha256:").starts_with(hex))
            })
            .collect();
        let image = match found.as_slice() {
            [one] => *one,
            [] => bail!("no image '{which}' in the store (see 'vemu images ls')"),
            _ => bail!("'{which}' names {} images: give more of the digest", found.len()),
        };
        if in_use().contains(&image.digest) {
            bail!("image {} is used by a running lab's nodes", image.digest);
        }
        remove_root(image)?;
        Ok(image.digest.clone())
    })
}

/// Remove every unpacked image no node uses; their digests.
pub fn prune_unused() -> Result<Vec<String>> {
    with_store_locked(|_| {
        let used = in_use();
        let mut removed = Vec::new();
        for (image, _) in stored()? {
            if !used.contains(&image.digest) {
                remove_root(&image)?;
                removed.push(image.digest);
            }
        }
        Ok(removed)
    })
}

/// Remove an image's root and its tags in the layout (its blobs stay for skopeo's next
/// copy; `umoci gc` drops those no tag holds).
fn remove_root(image: &Image) -> Result<()> {
    let dir = store_dir();
    let layout = dir.join("layout");
    for r in &image.references {
        let _ =
            run_tool("umoci", &["rm", "--image", &format!("{}:{}", layout.display(), tag_of(r))]);
    }
    let _ = run_tool("umoci", &["gc", "--layout", &layout.to_string_lossy()]);
    let root = image.rootfs.parent().unwrap_or(&image.rootfs);
    fs::remove_dir_all(root).with_context(|| format!("removing {}", root.display()))
}

/// A node's image, as its lab's state keeps it (`fs/NODE/image.json`).
pub const NODE_IMAGE: &str = "image.json";

/// Give node `node` of the lab at `paths` image `image`: its record, and the upper
/// and work directories of its root's overlay.
pub fn assign_image(paths: &LabPaths, node: &str, image: &Image) -> Result<()> {
    let root = paths.node_fs(node);
    for d in ["image/upper", "image/work", "root"] {
        fs::create_dir_all(root.join(d))?;
    }
    write_record(&root.join(NODE_IMAGE), image)
}

/// The image of node `node`, if it has one.
pub fn of_node(paths: &LabPaths, node: &str) -> Result<Option<Image>> {
    match fs::read(paths.node_fs(node).join(NODE_IMAGE)) {
        Ok(text) => Ok(Some(serde_json::from_slice(&text).context("reading the node's image")?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).context("reading the node's image"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_main_command_quotes_every_word() {
        let image = Image {
            digest: "sha256:00".into(),
            references: BTreeSet::new(),
            rootfs: PathBuf::from("/x"),
            args: vec!["/bin/echo".into(), "it's".into(), "a b".into()],
            env: Vec::new(),
            cwd: "/".into(),
            uid: 0,
            gid: 0,
        };
        assert_eq!(image.main_command().unwrap(), r"exec '/bin/echo' 'it'\''s' 'a b'");
        assert_eq!(Image { args: Vec::new(), ..image }.main_command(), None);
    }

    #[test]
    fn skopeo_s_log_lines_give_their_message() {
        let l = r#"time="2026-11-27T13:03:19Z" level=fatal msg="reading manifest 1 in \"x\": manifest unknown""#;
        assert_eq!(logged_message(l), r#"reading manifest 1 in "x": manifest unknown"#);
        assert_eq!(logged_message("plain"), "plain");
    }

    #[test]
    fn registries_on_loopback_are_told_apart() {
        for yes in
            ["docker://localhost:5000/a:1", "docker://127.0.0.1:5000/a", "docker://[::1]:5000/a"]
        {
            assert!(on_loopback(yes), "{yes}");
        }
        for no in [
            "docker://registry.example/frr:9",
            "docker://10.0.0.1:5000/a",
            "oci:/x",
            "docker://localhost.example/a",
        ] {
            assert!(!on_loopback(no), "{no}");
        }
    }
}
