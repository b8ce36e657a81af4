//! The devices a confined node's processes may open, enforced by the node's cgroup: the
//! v1 `devices` controller where the machine mounts it (`devices.deny` everything,
//! then `devices.allow` the list), otherwise a `BPF_PROG_TYPE_CGROUP_DEVICE` program on
//! the node's v2 cgroup. Every other device — a disk, a loop device, `/dev/mem` — is
//! refused (EPERM) on open and on `mknod`, whatever a file system shows: a device node
//! in an image's layer, or one made some other way, reaches nothing.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

use anyhow::{Context, Result};

/// Character devices a confined node may use: (major, first minor, last minor).
pub const ALLOWED: &[(u32, u32, u32)] = &[
    (1, 3, 3),          // null
    (1, 5, 5),          // zero
    (1, 7, 7),          // full
    (1, 8, 8),          // random
    (1, 9, 9),          // urandom
    (5, 0, 0),          // tty
    (5, 2, 2),          // ptmx
    (10, 200, 200),     // net/tun
    (136, 0, u32::MAX), // pts (Unix 98 pseudo-terminals, majors 136-143)
    (137, 0, u32::MAX),
    (138, 0, u32::MAX),
    (139, 0, u32::MAX),
    (140, 0, u32::MAX),
    (141, 0, u32::MAX),
    (142, 0, u32::MAX),
    (143, 0, u32::MAX),
];

/// The v1 `devices.allow` lines of [`ALLOWED`].
pub fn v1_rules() -> Vec<String> {
    ALLOWED
        .iter()
        .map(|&(major, lo, hi)| match lo == hi {
            true => format!("c {major}:{lo} rwm"),
            false => format!("c {major}:* rwm"),
        })
        .collect()
}

/// Limit the v1 `devices` cgroup `dir` (made if missing) to [`ALLOWED`].
pub fn restrict_v1(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).with_context(|| format!("creating cgroup {}", dir.display()))?;
    let write = |file: &str, v: &str| {
        fs::write(dir.join(file), v)
            .with_context(|| format!("writing '{v}' to {}", dir.join(file).display()))
    };
    write("devices.deny", "a")?;
    for rule in v1_rules() {
        write("devices.allow", &rule)?;
    }
    Ok(())
}

/// Attach the allow-list program to the v2 cgroup `dir` (whose processes and their
/// descendants it then governs; it stays attached as long as the cgroup exists).
pub fn restrict_v2(dir: &Path) -> Result<()> {
    let cgroup =
        fs::File::open(dir).with_context(|| format!("opening cgroup {}", dir.display()))?;
    let prog = load_program().context("loading the node's device allow-list (BPF)")?;
    bpf_attach(&cgroup, &prog).with_context(|| {
        format!("attaching the node's device allow-list to cgroup {}", dir.display())
    })
}

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: (src << 4) | dst, off, imm }
}

/// `r{dst} = *(u32 *)(r1 + off)`
const fn load_ctx(dst: u8, off: i16) -> Insn {
    insn(0x61, dst, 1, off, 0)
}

/// The program: `struct bpf_cgroup_dev_ctx { u32 access_type; u32 major; u32 minor; }`,
/// the device's type in the low half of `access_type` (2: a character device); 1
/// allows, 0 refuses.
fn program() -> Vec<Insn> {
    const JNE: u8 = 0x55; // if dst != imm goto +off
    const JLT: u8 = 0xa5; // if dst < imm (unsigned) goto +off
    const JGT: u8 = 0x25; // if dst > imm (unsigned) goto +off
    const MOV: u8 = 0xb7;
    const AND: u8 = 0x57;
    const EXIT: u8 = 0x95;
    let mut p = vec![load_ctx(2, 0), insn(AND, 2, 0, 0, 0xffff), load_ctx(3, 4), load_ctx(4, 8)];
    // Not a character device: refused.
    p.push(insn(JNE, 2, 0, 0, 2)); // patched below: to the end
    let refuse_jump = p.len() - 1;
    for &(major, lo, hi) in ALLOWED {
        // Five instructions each: skip the rest of this entry when it does not match.
        p.push(insn(JNE, 3, 0, 4, major as i32));
        p.push(insn(JLT, 4, 0, 3, lo.min(i32::MAX as u32) as i32));
        p.push(insn(JGT, 4, 0, 2, hi.min(i32::MAX as u32) as i32));
        p.push(insn(MOV, 0, 0, 0, 1));
        p.push(insn(EXIT, 0, 0, 0, 0));
    }
    let end = p.len();
    p[refuse_jump].off = (end - refuse_jump - 1) as i16;
    p.push(insn(MOV, 0, 0, 0, 0));
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 2;

fn bpf(cmd: libc::c_long, attr: &mut [u8]) -> std::io::Result<i64> {
    // SAFETY: the bpf system call with an attribute buffer of the size given.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r)
}

fn put(attr: &mut [u8], at: usize, v: &[u8]) {
    attr[at..at + v.len()].copy_from_slice(v);
}

/// `BPF_PROG_LOAD` of [`program`], with the verifier's log in the error.
fn load_program() -> Result<OwnedFd> {
    let insns = program();
    let license = c"GPL";
    let mut log = vec![0u8; 64 * 1024];
    // union bpf_attr for BPF_PROG_LOAD: prog_type u32 @0, insn_cnt u32 @4, insns u64 @8,
    // license u64 @16, log_level u32 @24, log_size u32 @28, log_buf u64 @32.
    let mut attr = [0u8; 128];
    put(&mut attr, 0, &BPF_PROG_TYPE_CGROUP_DEVICE.to_ne_bytes());
    put(&mut attr, 4, &(insns.len() as u32).to_ne_bytes());
    put(&mut attr, 8, &(insns.as_ptr() as u64).to_ne_bytes());
    put(&mut attr, 16, &(license.as_ptr() as u64).to_ne_bytes());
    put(&mut attr, 24, &1u32.to_ne_bytes());
    put(&mut attr, 28, &(log.len() as u32).to_ne_bytes());
    put(&mut attr, 32, &(log.as_mut_ptr() as u64).to_ne_bytes());
    match bpf(BPF_PROG_LOAD, &mut attr) {
        // SAFETY: a new descriptor the kernel returned, owned by nothing else.
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) }),
        Err(e) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let said = String::from_utf8_lossy(&log[..end]);
            Err(anyhow::Error::from(e).context(format!("the verifier said: {}", said.trim())))
        }
    }
}

/// `BPF_PROG_ATTACH` of `prog` to `cgroup` (beside what is attached already).
fn bpf_attach(cgroup: &fs::File, prog: &OwnedFd) -> std::io::Result<()> {
    // target_fd u32 @0, attach_bpf_fd u32 @4, attach_type u32 @8, attach_flags u32 @12.
    let mut attr = [0u8; 32];
    put(&mut attr, 0, &(cgroup.as_raw_fd() as u32).to_ne_bytes());
    put(&mut attr, 4, &(prog.as_raw_fd() as u32).to_ne_bytes());
    put(&mut attr, 8, &BPF_CGROUP_DEVICE.to_ne_bytes());
    put(&mut attr, 12, &BPF_F_ALLOW_MULTI.to_ne_bytes());
    bpf(BPF_PROG_ATTACH, &mut attr).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::Command;

    #[test]
    fn the_v1_rules_name_each_allowed_device() {
        let r = v1_rules();
        assert_eq!(r[0], "c 1:3 rwm");
        assert!(r.contains(&"c 10:200 rwm".to_string()) && r.contains(&"c 136:* rwm".to_string()));
    }

    /// What a process in cgroup `dir` (joined before it runs) can open: /dev/null, but
    /// not a block device made in a temporary directory (loop0, 7:0), nor /dev/kmsg.
    /// Each test passes its own `tag`: they run at once, and one's clean-up must not take
    /// the other's device node away.
    fn opens_in(dir: &Path, tag: &str) -> (bool, bool, bool) {
        let tmp = std::env::temp_dir().join(format!("vemu-devices-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(&tmp).unwrap();
        let node = tmp.join("loop");
        let c = std::ffi::CString::new(node.to_str().unwrap()).unwrap();
        // SAFETY: mknod with a valid C string.
        let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(7, 0)) };
        assert_eq!(made, 0, "mknod {}: {}", node.display(), std::io::Error::last_os_error());
        let procs = fs::OpenOptions::new().write(true).open(dir.join("cgroup.procs")).unwrap();
        let fd = procs.as_raw_fd();
        let try_open = |path: &str| {
            let mut cmd = Command::new("sh");
            cmd.args(["-c", &format!("exec 3< {path}")]);
            // SAFETY: a write to a descriptor that stays open until spawn returns.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::write(fd, c"0".as_ptr().cast(), 1) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            cmd.stderr(std::process::Stdio::null()).status().unwrap().success()
        };
        let r = (try_open("/dev/null"), try_open(node.to_str().unwrap()), try_open("/dev/kmsg"));
        let _ = fs::remove_dir_all(&tmp);
        r
    }

    /// The program, on a cgroup of the machine's v2 hierarchy (skipped where there is
    /// none): the allowed device opens, the others are refused.
    #[test]
    fn the_v2_program_lets_only_the_allowed_devices_open() {
        let Some(root) = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.join("cgroup.controllers").exists())
        else {
            return;
        };
        let dir = root.join(format!("vemu-devices-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let before = opens_in(&dir, "v2");
        restrict_v2(&dir).unwrap();
        let after = opens_in(&dir, "v2");
        let _ = fs::remove_dir(&dir);
        assert_eq!(before, (true, true, true), "the test cannot tell: {before:?}");
        assert_eq!(after, (true, false, false));
    }

    /// The v1 controller (skipped where the machine does not mount it).
    #[test]
    fn the_v1_controller_lets_only_the_allowed_devices_open() {
        let root = Path::new("/sys/fs/cgroup/devices");
        if !root.join("devices.allow").exists() {
            return;
        }
        let dir = root.join(format!("vemu-devices-test-{}", std::process::id()));
        restrict_v1(&dir).unwrap();
        let after = opens_in(&dir, "v1");
        let _ = fs::remove_dir(&dir);
        assert_eq!(after, (true, false, false));
    }
}
