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
//! process changes the store at a time), `log` (what was dropped from images as they
//! were unpacked: device nodes). A root is unpacked beside its final name and
//! renamed into place, so that a failure (a corrupt layer, a full disk) leaves no half
//! root behind.

use std::collections::BTreeSet;
use std::io::Write;

use serde::{Deserialize, Serialize};

use super::*;

/// Environment variable naming the image store (default [`DEFAULT_IMAGES_DIR`]).
pub const IMAGES_DIR_ENV: &str = "VEMU_IMAGES_DIR";
pub const DEFAULT_IMAGES_DIR: &str = "/var/lib/vemu/images";

/// An image reference as the user wrote it (without the `path:` vemu puts before a
/// path).
pub fn display_reference(reference: &str) -> &str {
    reference.strip_prefix("path:").unwrap_or(reference)
}

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
    /// Its root has no device nodes (dropped when it was unpacked: [`drop_devices`]).
    /// Roots unpacked by earlier versions lack it: swept when next prepared.
    #[serde(default)]
    pub devices_dropped: bool,
    /// What its root takes on disk, bytes (0 for roots unpacked by earlier versions).
    #[serde(default)]
    pub size_bytes: u64,
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
    run_tool_until(program, args, None)
}

/// [`run_tool`], killed at `deadline` if it has not ended by then (an error saying so).
fn run_tool_until(program: &str, args: &[&str], deadline: Option<Deadline>) -> Result<String> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow!("{program} is not installed (image nodes need skopeo and umoci)")
            }
            _ => anyhow!("running {program}: {e}"),
        })?;
    let read = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = read(child.stdout.take().map(|p| Box::new(p) as _));
    let err = read(child.stderr.take().map(|p| Box::new(p) as _));
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if deadline.is_some_and(|d| Instant::now() >= d.at) {
            let _ = child.kill();
            let _ = child.wait();
            let d = deadline.expect("checked above");
            bail!("{program} took longer than the {} s an image may take ({})", d.seconds, d.what);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let o = std::process::Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    };
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

/// When an image's pull must be over, and what set that.
#[derive(Clone, Copy)]
struct Deadline {
    at: Instant,
    seconds: u64,
    what: &'static str,
}

/// The manifest of `src` (a skopeo source), the one for this machine's platform when
/// `src` names an index of several.
fn manifest(src: &str, deadline: Deadline) -> Result<serde_json::Value> {
    let inspect = |s: &str| -> Result<serde_json::Value> {
        let mut args = vec!["inspect", "--raw"];
        if on_loopback(s) {
            args.push("--tls-verify=false");
        }
        args.push(s);
        let raw = run_tool_until("skopeo", &args, Some(deadline))?;
        serde_json::from_str(&raw).context("reading the image's manifest")
    };
    let m = inspect(src)?;
    let Some(list) = m["manifests"].as_array() else { return Ok(m) };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let pick = list
        .iter()
        .find(|e| e["platform"]["os"] == "linux" && e["platform"]["architecture"] == arch)
        .or(list.first())
        .and_then(|e| e["digest"].as_str())
        .ok_or_else(|| anyhow!("the image's index names no image for linux/{arch}"))?;
    // (A registry's reference by digest: NAME@DIGEST; a local source's cannot be.)
    match src.strip_prefix("docker://") {
        Some(r) => {
            let name = r.split('@').next().unwrap_or(r);
            let name = match name.rfind(':') {
                Some(i) if !name[i..].contains('/') => &name[..i],
                _ => name,
            };
            inspect(&format!("docker://{name}@{pick}"))
        }
        None => Ok(m),
    }
}

/// Hold an image's manifest to the policy's bounds before anything is copied: at most
/// [`vemu_scenario::images::MAX_LAYERS`] layers, and what they weigh compressed at most
/// `max_bytes`. A refusal names the limit.
fn check_manifest(m: &serde_json::Value, policy: &vemu_scenario::ImagePolicy) -> Result<()> {
    use vemu_scenario::images::MAX_LAYERS;
    let layers = m["layers"].as_array().or(m["fsLayers"].as_array()).map_or(0, Vec::len);
    if layers > MAX_LAYERS {
        bail!("it has {layers} layers: an image may have at most {MAX_LAYERS} (Docker's limit)");
    }
    if let Some(max) = policy.max_bytes {
        let total: u64 = m["layers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|l| l["size"].as_u64().unwrap_or(0))
            .sum();
        if total > max {
            bail!(
                "its layers weigh {} compressed: more than the {} an image may weigh here (--image-max, VemuLabPolicy imageMaxBytes)",
                show_bytes(total),
                show_bytes(max)
            );
        }
    }
    Ok(())
}

/// Bytes as a person reads them (MiB, GiB).
fn show_bytes(b: u64) -> String {
    match b {
        b if b >= 1 << 30 => format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64),
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64),
        b => format!("{b} bytes"),
    }
}

/// A tenant's registry (`HOST[:PORT]` of a `docker://` reference) may be reached: its
/// name must not resolve to this machine's loopback, link-local or own addresses —
/// unless the administrator listed that address itself. Nothing is sent to it here.
fn check_registry_address(src: &str, policy: &vemu_scenario::ImagePolicy) -> Result<()> {
    let Some(listed) = &policy.registries else { return Ok(()) };
    let registry = vemu_scenario::images::registry_of(src);
    if let Some(why) = policy.refusal(src) {
        bail!("{why}");
    }
    let (host, port) =
        vemu_scenario::images::registry_host_port(&registry).map_err(|e| anyhow!(e))?;
    if host.parse::<std::net::IpAddr>().is_ok()
        && listed.iter().any(|r| r.eq_ignore_ascii_case(&registry))
    {
        return Ok(()); // (an address the administrator wrote: allowed as it is)
    }
    let addrs: Vec<std::net::IpAddr> =
        std::net::ToSocketAddrs::to_socket_addrs(&(host.as_str(), port.unwrap_or(443)))
            .map(|a| a.map(|s| s.ip()).collect())
            .unwrap_or_default();
    if addrs.is_empty() {
        bail!("registry '{registry}' could not be reached");
    }
    let own = own_addresses();
    if let Some(a) = addrs.iter().find(|a| inward(a) || own.contains(a)) {
        bail!("{}: registry '{registry}' is at {a}, an address of this machine (its loopback, link-local or own addresses are reached only when an administrator lists the address itself)", vemu_scenario::REFUSED);
    }
    Ok(())
}

/// Loopback, link-local, unspecified or multicast: never another machine's registry.
fn inward(a: &std::net::IpAddr) -> bool {
    match a {
        std::net::IpAddr::V4(v4) => {
            v4.is_loopback() || v4.is_link_local() || v4.is_unspecified() || v4.is_multicast()
        }
        std::net::IpAddr::V6(v6) => {
            let mapped = v6.to_ipv4_mapped().map(std::net::IpAddr::V4);
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || mapped.is_some_and(|m| inward(&m))
        }
    }
}

/// The addresses of this machine's interfaces (of the calling thread's network
/// namespace).
fn own_addresses() -> Vec<std::net::IpAddr> {
    let Ok(ifs) = nix::ifaddrs::getifaddrs() else { return Vec::new() };
    ifs.filter_map(|i| {
        let a = i.address?;
        a.as_sockaddr_in()
            .map(|s| std::net::IpAddr::V4(s.ip()))
            .or_else(|| a.as_sockaddr_in6().map(|s| std::net::IpAddr::V6(s.ip())))
    })
    .collect()
}

/// What a tenant is told of a failed pull: the registry's own answers (a tag it lacks,
/// a digest that does not match), not how the machine's network answered (which would
/// tell open ports from closed).
fn for_tenant(e: anyhow::Error, src: &str) -> anyhow::Error {
    let text = format!("{e:#}");
    let network = [
        "connection refused",
        "no route to host",
        "i/o timeout",
        "no such host",
        "connection reset",
        "network is unreachable",
        "pinging container registry",
        "tls:",
        "http: server gave HTTP response",
    ];
    match network.iter().any(|n| text.contains(n)) {
        true => {
            anyhow!("registry '{}' could not be reached", vemu_scenario::images::registry_of(src))
        }
        false => e,
    }
}

/// Bytes of the tar streams of the layers of the image tagged `tag` in the store's
/// layout (what unpacking them writes, at most), counted by decompressing them; more
/// than `max` is an error naming the limit.
fn unpacked_bytes(dir: &Path, tag: &str, max: u64, deadline: Deadline) -> Result<u64> {
    let layout = dir.join("layout");
    let blob = |digest: &str| layout.join("blobs").join(digest.replace(':', "/"));
    let digest = tagged_digest(dir, tag)?;
    let m: serde_json::Value = serde_json::from_slice(&fs::read(blob(&digest))?)
        .context("reading the image's manifest in the store")?;
    let mut total = 0u64;
    for l in m["layers"].as_array().into_iter().flatten() {
        let media = l["mediaType"].as_str().unwrap_or("");
        let digest = l["digest"].as_str().ok_or_else(|| anyhow!("a layer without a digest"))?;
        let f = fs::File::open(blob(digest)).with_context(|| format!("reading layer {digest}"))?;
        let mut reader: Box<dyn std::io::Read> = if media.ends_with("gzip") {
            Box::new(flate2::read::MultiGzDecoder::new(std::io::BufReader::new(f)))
        } else if media.ends_with("tar") || media.is_empty() {
            Box::new(f)
        } else {
            bail!("layer {digest} is compressed as {media}: its size cannot be measured before unpacking, so it is not taken where images are bounded");
        };
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = reader.read(&mut buf).with_context(|| format!("reading layer {digest}"))?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > max {
                bail!(
                    "it unpacks to more than {}: more than an image may take here (--image-max, VemuLabPolicy imageMaxBytes)",
                    show_bytes(max)
                );
            }
            if Instant::now() >= deadline.at {
                bail!(
                    "measuring it took longer than the {} s an image may take ({})",
                    deadline.seconds,
                    deadline.what
                );
            }
        }
    }
    Ok(total)
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
/// the image, ready for nodes — held to `policy`: a tenant's from the registries its
/// administrator listed, never one at this machine's own addresses unless listed so;
/// anyone's with at most [`vemu_scenario::images::MAX_LAYERS`] layers and within the
/// policy's time; with a size bound, no bigger than it, downloaded or unpacked (checked
/// from the manifest before copying, and from the layers before unpacking).
pub fn prepare_image(reference: &str, policy: &vemu_scenario::ImagePolicy) -> Result<Image> {
    let r = prepare_bounded(reference, policy);
    match (r, policy.is_tenants()) {
        (Err(e), true) => Err(for_tenant(e, reference)),
        (r, _) => r,
    }
}

fn prepare_bounded(reference: &str, policy: &vemu_scenario::ImagePolicy) -> Result<Image> {
    let seconds = policy.pull_seconds();
    let deadline = Deadline {
        at: Instant::now() + Duration::from_secs(seconds),
        seconds,
        what: match policy.is_tenants() {
            true => "a tenant's",
            false => "anyone's",
        },
    };
    if policy.is_tenants() && !reference.starts_with("docker://") {
        bail!("{}: a tenant's images come from registries only", vemu_scenario::REFUSED);
    }
    check_registry_address(reference, policy)?;
    let src = skopeo_source(reference)?;
    check_manifest(&manifest(&src, deadline)?, policy)?;
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
            run_tool_until("skopeo", &args, Some(deadline)).context("copying the image")?;
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
            let unsized_ = image.size_bytes == 0;
            if unsized_ {
                image.size_bytes = du_bytes(&image.rootfs);
            }
            if let Some(max) = policy.max_bytes.filter(|m| image.size_bytes > *m) {
                bail!(
                    "it unpacks to {}: more than the {} an image may take here (--image-max, VemuLabPolicy imageMaxBytes)",
                    show_bytes(image.size_bytes),
                    show_bytes(max)
                );
            }
            let mut changed = image.references.insert(reference.to_string()) || unsized_;
            if !image.devices_dropped {
                drop_devices(dir, &image.rootfs, &digest)?;
                image.devices_dropped = true;
                changed = true;
            }
            if changed {
                write_record(&record, &image)?;
            }
            return Ok(image);
        }
        if let Some(max) = policy.max_bytes {
            unpacked_bytes(dir, &tag, max, deadline)?;
        }
        let partial = dir.join("roots").join(format!(".{hex}.partial"));
        let _ = fs::remove_dir_all(&partial);
        let image_ref = format!("{}:{tag}", dir.join("layout").display());
        let unpacked = run_tool_until(
            "umoci",
            &["unpack", "--image", &image_ref, &partial.to_string_lossy()],
            Some(deadline),
        )
        .context("unpacking the image (a corrupt layer, or a full disk?)");
        if let Err(e) = unpacked {
            let _ = fs::remove_dir_all(&partial);
            return Err(e);
        }
        if let Err(e) = drop_devices(dir, &partial.join("rootfs"), &digest) {
            let _ = fs::remove_dir_all(&partial);
            return Err(e);
        }
        let mut image = from_bundle(&partial, &digest, &root)?;
        image.devices_dropped = true;
        image.size_bytes = du_bytes(&partial.join("rootfs"));
        image.references.insert(reference.to_string());
        write_record(&partial.join("image.json"), &image)?;
        fs::rename(&partial, &root)
            .with_context(|| format!("moving {} into place", root.display()))?;
        Ok(image)
    })
}

/// Remove every device node (block or character) from the unpacked root `rootfs`, and
/// say which in the store's log (`log` in the store): a node's devices are those of
/// its own `/dev`, never an image's — an image holding a disk's device node would
/// otherwise reach that disk wherever the node's mounts allowed devices.
fn drop_devices(store: &Path, rootfs: &Path, digest: &str) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let mut dropped = Vec::new();
    let mut stack = vec![rootfs.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))?;
        for e in rd {
            let e = e.with_context(|| format!("reading {}", d.display()))?;
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_block_device() || t.is_char_device() {
                fs::remove_file(e.path())
                    .with_context(|| format!("removing device node {}", e.path().display()))?;
                dropped.push(e.path());
            }
        }
    }
    if dropped.is_empty() {
        return Ok(());
    }
    let names: Vec<String> = dropped
        .iter()
        .map(|p| format!("/{}", p.strip_prefix(rootfs).unwrap_or(p).display()))
        .collect();
    let line = format!(
        "{} image {digest}: dropped {} device node(s) from its root: {}\n",
        unix_seconds(),
        names.len(),
        names.join(" ")
    );
    let mut log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(store.join("log"))
        .context("writing the image store's log")?;
    log.write_all(line.as_bytes()).context("writing the image store's log")
}

fn unix_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
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
        devices_dropped: false,
        size_bytes: 0,
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
            devices_dropped: true,
            size_bytes: 0,
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
