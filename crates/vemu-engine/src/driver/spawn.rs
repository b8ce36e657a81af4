//! Starting a shard thread and the handle the engine keeps of it.

use super::*;

/// The handle the engine keeps of a running shard.
pub(crate) struct ShardHandle {
    tx: Sender<Control>,
    wake: OwnedFd,
    /// Nanoseconds the shard has spent working (see [`Shard::work_ns`]).
    pub work_ns: Arc<AtomicU64>,
    /// Why the shard's thread panicked, if it did: set from the panic hook, while the
    /// thread is still unwinding (its links have stopped by then).
    pub died: Death,
    thread: Option<std::thread::JoinHandle<Vec<OwnedFd>>>,
}

/// Why a shard's thread panicked, once it has (see [`ShardHandle::died`]).
type Death = Arc<std::sync::Mutex<Option<String>>>;

thread_local! {
    /// Where a shard thread's panic is reported (set on shard threads only).
    static DEATH: std::cell::RefCell<Option<Death>> = const { std::cell::RefCell::new(None) };
}

/// What a panic's payload says.
fn why_panicked(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

/// Have a shard thread's panic reported from the panic hook, before the hook before it
/// runs (the default one prints, and under `RUST_BACKTRACE` first symbolizes a backtrace:
/// long enough under load that the links stopped while `status` still said `ok`). Once
/// per process.
fn report_deaths_at_once() {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let before = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // (`try_with`: a panic while the thread's locals are being torn down.)
            let _ = DEATH.try_with(|d| {
                if let Some(slot) = d.borrow().as_ref() {
                    *slot.lock().unwrap_or_else(|e| e.into_inner()) =
                        Some(why_panicked(info.payload()));
                }
            });
            before(info)
        }));
    });
}

impl ShardHandle {
    /// Start a shard thread running `core` over `fds` (one per port of the core, in
    /// order), with the ports' plane devices (`plane`, one per port) on `fast`.
    /// `fanout`: the shard's fan-out device in the plane (see [`Shard::fan_target`]).
    /// `tunnel`: the shard's UDP socket for its tunnel ports (see [`TunnelPort`]), `seal`
    /// its keys (a lab across machines).
    #[allow(clippy::too_many_arguments)]
    pub fn spawn(
        index: usize,
        core: Core,
        fds: Vec<Option<OwnedFd>>,
        devs: Vec<PortDev>,
        fast: Option<Arc<FastPath>>,
        probe: Option<Arc<OwnedFd>>,
        fanout: Option<OwnedFd>,
        tunnel: Option<OwnedFd>,
        seal: Option<Seal>,
        clock: LabClock,
    ) -> Result<ShardHandle> {
        assert_eq!(core.port_count(), fds.len(), "one device per port");
        assert_eq!(fds.len(), devs.len(), "one kind per port");
        // SAFETY: eventfd returns a new descriptor or -1.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(std::io::Error::last_os_error()).context("creating an eventfd");
        }
        // SAFETY: efd is a fresh descriptor we own.
        let wake = unsafe { OwnedFd::from_raw_fd(efd) };
        let (tx, rx) = std::sync::mpsc::channel();
        let mut shard = Shard::new(core, fds, rx, wake.as_raw_fd(), clock)?;
        shard.devs = devs;
        // The far sockets, named by their place in this list for the core (which has
        // the tunnels to one probed together).
        let mut fars: Vec<SockAddr> = Vec::new();
        for (port, d) in shard.devs.iter().enumerate() {
            match d {
                PortDev::Tunnel(t) => {
                    let far = t.far.map(|a| match fars.iter().position(|f| *f == a) {
                        Some(i) => i as u64,
                        None => {
                            fars.push(a);
                            (fars.len() - 1) as u64
                        }
                    });
                    shard.core.add_tunnel(port as u32, far, t.max_payload, t.ipv6);
                    // What comes with either VNI of its link: frames and probes the far
                    // side sends (vni_in), answers to this side's probes (vni_out).
                    shard.tunnel_ports.insert(t.vni_in, port);
                    shard.tunnel_ports.insert(t.vni_out, port);
                }
                PortDev::Plane(PlanePort {
                    far: Far::Tunnel { port: tunnel, needs_payload, .. },
                    ..
                }) => shard.core.add_kernel_tunnel(port as u32, *tunnel, *needs_payload),
                _ => {}
            }
        }
        if let Some(t) = &tunnel {
            epoll_add(shard.epoll.as_raw_fd(), t.as_raw_fd(), TUNNEL_TOKEN)?;
        }
        shard.tunnel = tunnel;
        shard.seal = seal;
        shard.fast = fast;
        shard.last_arrival_ns = vec![0; shard.fds.len()];
        if probe.is_some() {
            shard.last_read_ns = vec![None; shard.fds.len()];
            shard.next_input_probe_ns = Some(INPUT_PROBE_EVERY_NS);
        }
        shard.probe_sock = probe;
        shard.fanout = fanout;
        // The first choice of paths is carried out before any frame moves.
        shard.events();
        if index == 0 {
            shard.panic_after = std::env::var(FAULT_ENV)
                .ok()
                .and_then(|v| v.strip_prefix("panic-after:").and_then(|n| n.parse().ok()));
        }
        shard.stall_reads_ns = std::env::var(FAULT_ENV)
            .ok()
            .and_then(|v| v.strip_prefix("stall-reads-us:").and_then(|n| n.parse::<u64>().ok()))
            .map_or(0, |us| us * 1000);
        let work_ns = shard.work_ns.clone();
        let died: Death = Arc::new(std::sync::Mutex::new(None));
        let report = died.clone();
        report_deaths_at_once();
        let thread =
            std::thread::Builder::new().name(format!("vemu-engine-{index}")).spawn(move || {
                // A shard that panics (a bug) must not pass unnoticed: its links stop, and
                // the controller says so (status, events, the fidelity verdict) — from the
                // moment it panics (the panic hook reports it), and again here.
                DEATH.with(|d| *d.borrow_mut() = Some(report.clone()));
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| shard.run())) {
                    Ok(fds) => fds,
                    Err(p) => {
                        // (Already there from the hook, unless another hook replaced it.)
                        report
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert_with(|| why_panicked(&*p));
                        std::mem::take(&mut shard.fds).into_iter().flatten().collect()
                    }
                }
            })?;
        Ok(ShardHandle { tx, wake, work_ns, died, thread: Some(thread) })
    }

    pub fn send(&self, c: Control) {
        let _ = self.tx.send(c);
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to an eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Apply a command and wait until the shard has.
    pub fn apply(&self, cmd: Command) -> Option<Applied> {
        let (done, rx) = std::sync::mpsc::channel();
        self.send(Control::Apply(cmd, Some(done)));
        rx.recv().ok()
    }

    /// Apply a patch; the impairments now in force, or None when the shard has stopped.
    pub fn patched(&self, cmd: Command) -> Option<Impairments> {
        match self.apply(cmd)? {
            Applied::Impairments(i) => Some(*i),
            Applied::Done => None,
        }
    }

    /// Wait for the shard to end (after [`Control::Stop`]); its devices, still open.
    pub fn join(&mut self) -> Vec<OwnedFd> {
        self.thread.take().and_then(|t| t.join().ok()).unwrap_or_default()
    }
}
