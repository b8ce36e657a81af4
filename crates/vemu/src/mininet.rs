//! `vemu mininet` and `vemu mn`: Mininet scripts and Mininet's `mn` on vemu. The Python
//! package that serves `import mininet` (vemu.mininet, and the `mininet` package that
//! points at it) is carried inside this executable and written out once per version, so
//! that it runs on a machine where nothing but vemu was installed.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};

use crate::lab::need_root;

macro_rules! py {
    ($($p:literal),* $(,)?) => {
        &[$(($p, include_str!(concat!("../../../python/", $p)))),*]
    };
}

/// The files of the package, by their path under `python/`.
const FILES: &[(&str, &str)] = py![
    "vemu/__init__.py",
    "vemu/mininet/__init__.py",
    "vemu/mininet/LICENSE.mininet",
    "vemu/mininet/_nettests.py",
    "vemu/mininet/_scenario.py",
    "vemu/mininet/clean.py",
    "vemu/mininet/cli.py",
    "vemu/mininet/link.py",
    "vemu/mininet/log.py",
    "vemu/mininet/mn.py",
    "vemu/mininet/moduledeps.py",
    "vemu/mininet/net.py",
    "vemu/mininet/node.py",
    "vemu/mininet/nodelib.py",
    "vemu/mininet/term.py",
    "vemu/mininet/topo.py",
    "vemu/mininet/topolib.py",
    "vemu/mininet/util.py",
    "mininet/__init__.py",
    "vemu/mn_wifi/__init__.py",
    "vemu/mn_wifi/_radio.py",
    "vemu/mn_wifi/cli.py",
    "vemu/mn_wifi/link.py",
    "vemu/mn_wifi/net.py",
    "vemu/mn_wifi/node.py",
    "vemu/mn_wifi/plot.py",
    "vemu/mn_wifi/replaying.py",
    "vemu/mn_wifi/topo.py",
    "vemu/mn_wifi/wmediumdConnector.py",
    "mn_wifi/__init__.py",
];

/// Where the package is written: one directory per version of its files.
const PYTHON_DIR: &str = "/run/vemu-python";

/// The directory to put first on PYTHONPATH: it holds `vemu/` and `mininet/`, written
/// out if this version of them is not there yet.
pub(crate) fn python_path() -> Result<PathBuf> {
    let dir = package_dir()?;
    // Which vemu the package runs when $VEMU is not set (a script run with PYTHONPATH
    // from `vemu mininet --path`, under sudo's PATH without vemu on it): this one.
    if let Ok(exe) = std::env::current_exe() {
        let file = dir.join("vemu").join(EXE_FILE);
        if std::fs::read(&file).ok().as_deref() != Some(exe.as_os_str().as_encoded_bytes()) {
            let tmp = file.with_extension(format!("tmp-{}", std::process::id()));
            std::fs::write(&tmp, exe.as_os_str().as_encoded_bytes())
                .and_then(|()| std::fs::rename(&tmp, &file))
                .with_context(|| format!("writing {}", file.display()))?;
        }
    }
    Ok(dir)
}

/// The file beside the package that names the vemu executable that last wrote it out
/// (`vemu.find_vemu` reads it).
const EXE_FILE: &str = "vemu-executable";

/// The package's directory for this version of its files, written out if not there.
fn package_dir() -> Result<PathBuf> {
    let mut h = DefaultHasher::new();
    FILES.hash(&mut h);
    let dir = Path::new(PYTHON_DIR).join(format!("{:016x}", h.finish()));
    if dir.join(".complete").exists() {
        return Ok(dir);
    }
    // Written beside, then renamed into place: a reader never sees half of it.
    let tmp = Path::new(PYTHON_DIR).join(format!(".tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    for (path, text) in FILES {
        let file = tmp.join(path);
        std::fs::create_dir_all(file.parent().unwrap())
            .and_then(|()| std::fs::write(&file, text))
            .with_context(|| format!("writing {}", file.display()))?;
    }
    std::fs::write(tmp.join(".complete"), "")?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        // (Another vemu wrote the same version meanwhile.)
        Err(_) if dir.join(".complete").exists() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(e) => Err(e).with_context(|| format!("moving {} into place", tmp.display())),
    }
}

/// python3 with the package first on its path and this vemu as `$VEMU`.
fn python() -> Result<Command> {
    need_root()?;
    let dir = python_path()?;
    let mut path = dir.into_os_string();
    if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut cmd = Command::new("python3");
    cmd.env("PYTHONPATH", path);
    if let Ok(exe) = std::env::current_exe() {
        cmd.env("VEMU", exe);
    }
    Ok(cmd)
}

fn run(mut cmd: Command) -> Result<ExitCode> {
    let status = match cmd.status() {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("python3 is needed to run Mininet scripts (apt-get install python3)")
        }
        Err(e) => return Err(e).context("running python3"),
    };
    Ok(ExitCode::from(vemu_machine::exit_code(status) as u8))
}

/// `vemu mininet SCRIPT [ARGS...]`.
pub(crate) fn run_script(script: &[String]) -> Result<ExitCode> {
    let Some(file) = script.first() else {
        bail!("give a Mininet script to run: vemu mininet SCRIPT.py [ARGS...] (or --path)");
    };
    if !Path::new(file).is_file() {
        bail!("{file}: no such script");
    }
    let mut cmd = python()?;
    cmd.args(script);
    run(cmd)
}

/// `vemu mn [OPTIONS]`.
pub(crate) fn run_mn(args: &[String]) -> Result<ExitCode> {
    let mut cmd = python()?;
    cmd.args(["-m", "vemu.mininet.mn"]).args(args);
    run(cmd)
}
