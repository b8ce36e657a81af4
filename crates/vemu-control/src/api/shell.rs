//! A terminal in a node over a WebSocket (`GET /v1/nodes/{node}/shell`, and the
//! agent's route for nodes of its machine): an interactive shell on a pseudo-terminal
//! of this machine, started in the node's namespaces and cgroups.
//!
//! The protocol, both ways on one WebSocket:
//! * binary messages are the terminal's bytes (keys to the shell, its output back);
//! * the client may send a text message `{"resize": {"rows": R, "cols": C}}`;
//! * when the shell ends the server sends `{"exit": N}` (128 + signal when killed) and
//!   closes. A client that goes away hangs the shell up (SIGHUP, then SIGKILL to its
//!   session after a second).

use std::os::fd::{AsRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::Duration;

use axum::extract::ws::{Message, WebSocket};
use serde::Deserialize;
use serde_json::json;
use tokio::io::unix::AsyncFd;

use super::ApiError;

/// A terminal's size in characters.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct Size {
    pub rows: u16,
    pub cols: u16,
}

/// Query of the shell route: the terminal's size at the start.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ShellQuery {
    pub rows: Option<u16>,
    pub cols: Option<u16>,
}

impl ShellQuery {
    pub fn size(&self) -> Size {
        Size { rows: self.rows.unwrap_or(24), cols: self.cols.unwrap_or(80) }.clamped()
    }
}

impl Size {
    /// Within 1 … 1000 rows and columns: what a client asks for (at the start or in a
    /// resize message) is never a zero-sized or absurd terminal.
    fn clamped(self) -> Size {
        Size { rows: self.rows.clamp(1, 1000), cols: self.cols.clamp(1, 1000) }
    }
}

#[derive(Deserialize)]
struct Control {
    resize: Size,
}

fn winsize(s: Size) -> nix::pty::Winsize {
    let s = s.clamped();
    nix::pty::Winsize { ws_row: s.rows, ws_col: s.cols, ws_xpixel: 0, ws_ypixel: 0 }
}

/// A shell started in a node on a new pseudo-terminal: the child and the terminal's
/// master side. Dropped before its session took it (the client never upgraded), the
/// shell is hung up.
pub(crate) struct Shell {
    child: Option<std::process::Child>,
    master: Option<OwnedFd>,
}

impl Drop for Shell {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            hang_up(child.id());
            std::thread::spawn(move || {
                let _ = child.wait();
                vemu_machine::forget_waited(child.id());
            });
        }
    }
}

/// Start an interactive shell in a node of this machine (bash without rc files if the
/// node has it, else sh), its prompt naming the node.
pub(crate) fn start(door: &vemu_machine::door::HereDoor, size: Size) -> Result<Shell, ApiError> {
    let node = door.node();
    let entry = door.open().map_err(|e| ApiError::not_found(format!("{e:#}")))?;
    let pty = nix::pty::openpty(Some(&winsize(size)), None)
        .map_err(|e| ApiError::internal(format!("opening a pseudo-terminal: {e}")))?;
    let (master, slave) = (pty.master, pty.slave);
    let dup = |fd: &OwnedFd| {
        fd.try_clone().map(Stdio::from).map_err(|e| ApiError::internal(format!("{e}")))
    };
    let argv = vemu_machine::door::shell_argv("/bin/bash");
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    cmd.current_dir(door.node_dir())
        .env("TERM", "xterm-256color")
        .env("PS1", format!("[{node}] \\w# "))
        .stdin(dup(&slave)?)
        .stdout(dup(&slave)?)
        .stderr(dup(&slave)?);
    // SAFETY: setsid and ioctl are async-signal-safe; they make the terminal (the
    // child's stdin by now) the controlling terminal of a new session.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = entry
        .spawn(&mut cmd, vemu_machine::spawn_waited)
        .map_err(|e| ApiError::internal(format!("starting a shell in node '{node}': {e}")))?;
    drop(slave);
    Ok(Shell { child: Some(child), master: Some(master) })
}

/// Wait (at most [`super::ui::FIRST_MESSAGE_WITHIN`]) for the first message of a
/// WebSocket made without a proof: `{"session": S}` with a session `valid` says is the
/// web interface's. Anything else is answered `{"error": ...}` and the socket closed.
pub(crate) async fn first_message_proves(ws: &mut WebSocket, valid: impl Fn(&str) -> bool) -> bool {
    #[derive(Deserialize)]
    struct First {
        session: String,
    }
    let first = tokio::time::timeout(super::ui::FIRST_MESSAGE_WITHIN, ws.recv()).await;
    let ok = match first {
        Ok(Some(Ok(Message::Text(t)))) => {
            serde_json::from_str::<First>(t.as_str()).is_ok_and(|f| valid(&f.session))
        }
        _ => false,
    };
    if !ok {
        refuse_now(ws, "this WebSocket's first message must be {\"session\": S}, a session of the web interface (or its upgrade must carry 'Authorization: Bearer TOKEN')").await;
    }
    ok
}

/// Say why in `{"error": ...}`, and close.
pub(crate) async fn refuse(mut ws: WebSocket, why: &str) {
    refuse_now(&mut ws, why).await;
}

async fn refuse_now(ws: &mut WebSocket, why: &str) {
    let _ = ws.send(Message::Text(json!({"error": why}).to_string().into())).await;
    let _ = ws.send(Message::Close(None)).await;
}

/// Carry the terminal's bytes between `ws` and the shell until either ends.
pub(crate) async fn session(mut ws: WebSocket, mut shell: Shell) {
    let (Some(mut child), Some(master)) = (shell.child.take(), shell.master.take()) else { return };
    let pid = child.id();
    if let Err(e) =
        nix::fcntl::fcntl(&master, nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK))
    {
        let _ = ws.send(Message::Text(json!({"error": format!("{e}")}).to_string().into())).await;
    }
    // SAFETY: an OwnedFd keeps its descriptor open and the same until dropped.
    let Ok(pty) = (unsafe { AsyncFd::register(master) }) else {
        hang_up(pid);
        return;
    };
    let mut buf = vec![0u8; 16384];
    let client_left = loop {
        tokio::select! {
            r = pty.readable() => {
                let Ok(mut guard) = r else { break false };
                match guard.try_io(|fd| nix::unistd::read(fd.get_ref(), &mut buf).map_err(std::io::Error::from)) {
                    Ok(Ok(0)) | Ok(Err(_)) => break false, // EIO: the shell's side closed.
                    Ok(Ok(n)) => {
                        if ws.send(Message::Binary(buf[..n].to_vec().into())).await.is_err() {
                            break true;
                        }
                    }
                    Err(_would_block) => continue,
                }
            }
            m = ws.recv() => match m {
                Some(Ok(Message::Binary(b))) => {
                    if write_all(&pty, &b).await.is_err() {
                        break false;
                    }
                }
                Some(Ok(Message::Text(t))) => {
                    if let Ok(c) = serde_json::from_str::<Control>(&t) {
                        // SAFETY: TIOCSWINSZ reads a winsize from the pointer.
                        unsafe { libc::ioctl(pty.get_ref().as_raw_fd(), libc::TIOCSWINSZ, &winsize(c.resize)) };
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(_)) | None => break true,
            }
        }
    };
    if client_left {
        hang_up(pid);
    }
    drop(pty);
    let status = tokio::task::spawn_blocking(move || {
        let s = child.wait();
        vemu_machine::forget_waited(pid);
        s
    })
    .await;
    if !client_left {
        let code = status.ok().and_then(|s| s.ok()).map_or(-1, vemu_machine::exit_code);
        let _ = ws.send(Message::Text(json!({ "exit": code }).to_string().into())).await;
        let _ = ws.send(Message::Close(None)).await;
    }
}

async fn write_all(pty: &AsyncFd<OwnedFd>, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        let mut guard = pty.writable().await?;
        match guard
            .try_io(|fd| nix::unistd::write(fd.get_ref(), data).map_err(std::io::Error::from))
        {
            Ok(Ok(n)) => data = &data[n..],
            Ok(Err(e)) => return Err(e),
            Err(_would_block) => {}
        }
    }
    Ok(())
}

/// Hang up a shell whose client went away: SIGHUP to its session, SIGKILL a second later.
fn hang_up(pid: u32) {
    // SAFETY: kill with a negative pid signals the process group the shell leads.
    unsafe { libc::kill(-(pid as i32), libc::SIGHUP) };
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: as above.
        unsafe { libc::kill(-(pid as i32), libc::SIGKILL) };
    });
}

/// Carry a client's WebSocket to and from the agent's for a node of another machine.
pub(crate) async fn relay<S>(
    mut client: WebSocket,
    mut agent: tokio_tungstenite::WebSocketStream<S>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message as T;
    loop {
        tokio::select! {
            m = client.recv() => {
                let m = match m {
                    Some(Ok(Message::Binary(b))) => T::Binary(b),
                    Some(Ok(Message::Text(t))) => T::Text(t.as_str().into()),
                    Some(Ok(_)) => continue,
                    Some(Err(_)) | None => break,
                };
                if agent.send(m).await.is_err() {
                    break;
                }
            }
            m = agent.next() => {
                let m = match m {
                    Some(Ok(T::Binary(b))) => Message::Binary(b),
                    Some(Ok(T::Text(t))) => Message::Text(t.as_str().into()),
                    Some(Ok(T::Close(_))) | Some(Err(_)) | None => {
                        let _ = client.send(Message::Close(None)).await;
                        break;
                    }
                    Some(Ok(_)) => continue,
                };
                if client.send(m).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = agent.close(None).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_sizes_are_clamped_wherever_they_come_from() {
        let q = ShellQuery { rows: Some(0), cols: Some(60_000) };
        assert_eq!((q.size().rows, q.size().cols), (1, 1000));
        let q = ShellQuery { rows: None, cols: None };
        assert_eq!((q.size().rows, q.size().cols), (24, 80));
        let c: Control = serde_json::from_str(r#"{"resize": {"rows": 0, "cols": 65535}}"#).unwrap();
        let w = winsize(c.resize);
        assert_eq!((w.ws_row, w.ws_col), (1, 1000));
    }
}
