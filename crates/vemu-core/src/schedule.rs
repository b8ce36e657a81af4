//! How a shard thread is scheduled, decided without touching the scheduler (the driver
//! carries the decisions out): its priority, and how long it spins before a deadline.
//!
//! By default a shard runs at real-time priority (SCHED_FIFO) and sleeps until a
//! deadline without spinning for it (the figures behind each choice: bench/README.md,
//! "Scheduling a shard"):
//!
//! - At niceness −10 a shard waits behind the nodes' programs it has just woken (a
//!   broadcast to 20 radio neighbours wakes 20 routing daemons, which all run first),
//!   and frames come late: real-time priority avoids that.
//! - Spinning before deadlines (what hides wake-up lateness at normal priority) would
//!   hold the core at real-time priority, away from the nodes' programs: a real-time
//!   shard sets its timer early by the lateness it learnt and spins only for what
//!   remains — within [`SPIN_SHARE`] of each window: under load, deadlines nearer than
//!   the lateness come by the hundred thousand a second.
//! - How late a timed wake-up comes depends on how long the shard slept (the core idles
//!   deeper, its caches go cold), and one estimate fed mostly by short sleeps leaves the
//!   long ones uncovered. So lateness is learnt per class of sleep
//!   ([`SLEEP_CLASSES_NS`]), and the margin of a sleep of at least 250 µs is the class's
//!   mean lateness plus twice its mean deviation, as TCP sets its retransmission timer
//!   from the round trip's mean and deviation (shorter sleeps keep the mean alone: see
//!   [`Schedule::spin_ns`]).
//! - A real-time thread busy for a whole second is stopped by Linux for 50 ms
//!   (`kernel.sched_rt_runtime_us`), and while it is busy nothing else runs on its core.
//!   So a shard busy for more than [`HIGH_LOAD`] of a [`WINDOW_NS`] goes back to
//!   niceness −10 (and to spinning, which helps there), and returns to real time once
//!   under [`LOW_LOAD`].
//! - Real-time priority is taken from the nodes' programs: every frame preempts one.
//!   Where the machine's CPUs are short (some task waited for one over
//!   [`HIGH_PRESSURE`] of a window, the kernel's PSI) and the shard works at least
//!   [`PRESSED_LOAD`] of it, for [`PRESSED_WINDOWS`] in a row, the lab's software waits
//!   behind the shard — 32 TCP flows on two cores reached 0.77–0.86 of their links with
//!   real-time shards, the machine's tasks waiting 99 % of the time, and 0.94–0.96
//!   (tbf's figure) at niceness −10, waiting under 80 %. So such a shard goes back to
//!   niceness −10 too, and returns to real time once the pressure is under
//!   [`LOW_PRESSURE`] (and its load under [`LOW_LOAD`]).
//! - Niceness weighs only within a scheduling group: where the kernel groups tasks by
//!   session (autogroup), the driver raises the controller's session group to niceness
//!   −10 as well, and the controller starts the nodes' programs in sessions of their own.
//! - A real-time shard that sleeps as soon as it has nothing to do is woken for the next
//!   frame of the same exchange on the other core (Linux places a woken real-time
//!   thread on a core not running one), and waking an idle core of a virtual machine
//!   costs tens of microseconds: in a chain, hop after hop alternates between the
//!   shards. So after working a real-time shard keeps polling for [`LINGER_NS`] before
//!   it sleeps — but only while the polling of the current window stays under
//!   [`LINGER_SHARE`] of it: a busy lab is never held up by a polling shard for more
//!   than that. At niceness −10 polling would only delay the shard the frame goes to,
//!   queued behind the poller on the same core: a normal-priority shard sleeps at once.
//!
//! `VEMU_ENGINE_PRIORITY=normal` keeps shards at niceness −10 (with spinning), as when
//! real-time priority is refused (no CAP_SYS_NICE).

/// How the shard thread is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// SCHED_FIFO.
    Realtime,
    /// SCHED_OTHER at niceness −10.
    Normal,
}

/// Length of the window over which a shard's load is judged.
pub const WINDOW_NS: u64 = 100_000_000;
/// Share of a window spent working above which a real-time shard goes back to normal.
pub const HIGH_LOAD: f64 = 0.8;
/// Share below which a shard that went back to normal returns to real time.
pub const LOW_LOAD: f64 = 0.5;
/// Share of a window in which some task of the machine waited for a CPU above which a
/// real-time shard that works at least [`PRESSED_LOAD`] of it goes back to normal.
pub const HIGH_PRESSURE: f64 = 0.5;
/// See [`HIGH_PRESSURE`]: a shard working less than this takes too little CPU to matter.
pub const PRESSED_LOAD: f64 = 0.1;
/// Share under which the machine's CPU pressure lets a shard return to real time.
pub const LOW_PRESSURE: f64 = 0.2;
/// Windows in a row a shard must be pressed (see [`HIGH_PRESSURE`]) before it gives way:
/// a lab's start (dozens of programs started at once, TCP's first bursts) is pressure
/// that passes, and a shard that gave way then wrote frames late.
pub const PRESSED_WINDOWS: u32 = 10;
/// At normal priority the shard wakes at least this long before a deadline and polls for
/// the rest: waking from a sleep takes tens of microseconds on a virtual machine and
/// more when the core is shared.
pub const NORMAL_SPIN_NS: u64 = 80_000;
/// The margins grow with the wake-up lateness the shard observes (smoothed), up to these.
pub const MAX_NORMAL_SPIN_NS: u64 = 1_000_000;
pub const MAX_REALTIME_SPIN_NS: u64 = 100_000;
/// ...except before a sleep of at least 250 µs, which can afford more.
pub const MAX_REALTIME_LONG_SPIN_NS: u64 = 200_000;
/// Sleeps shorter than the first bound are one class, then shorter than the second, then
/// the rest: each has its own estimate of how late wake-ups come.
pub const SLEEP_CLASSES_NS: [u64; 2] = [250_000, 2_500_000];
/// How long a shard goes on polling after it worked, before it sleeps.
pub const LINGER_NS: u64 = 100_000;
/// Share of each window a shard may spend polling after work.
pub const LINGER_SHARE: f64 = 0.05;
/// Share of each window a real-time shard may spend polling for deadlines it woke early
/// for: beyond it, it sleeps until them. Under load deadlines come every few
/// microseconds, and spinning for each took a core from the nodes' programs while the
/// lingering after work already kept the shard awake (bench/README.md, "Spinning on a
/// budget").
pub const SPIN_SHARE: f64 = 0.05;

#[derive(Debug, Clone)]
pub struct Schedule {
    /// Real-time priority was asked for and granted at start.
    realtime_allowed: bool,
    priority: Priority,
    /// How late timed wake-ups come, per class of sleep ([`SLEEP_CLASSES_NS`]).
    late: [Lateness; 3],
    window_start_ns: u64,
    window_start_work_ns: u64,
    /// The machine's CPU pressure (ns some task waited) at the window's start.
    window_start_pressure_ns: Option<u64>,
    /// Windows in a row the shard has been pressed (see [`HIGH_PRESSURE`]).
    pressed_windows: u32,
    /// Time spent polling after work in the current window (ns).
    lingered_ns: u64,
    /// Time spent polling for deadlines in the current window (ns).
    spun_ns: u64,
}

impl Schedule {
    /// A shard that starts at `priority` at `now_ns`.
    pub fn new(priority: Priority, now_ns: u64) -> Schedule {
        Schedule {
            realtime_allowed: priority == Priority::Realtime,
            priority,
            late: [Lateness::default(); 3],
            window_start_ns: now_ns,
            window_start_work_ns: 0,
            window_start_pressure_ns: None,
            pressed_windows: 0,
            lingered_ns: 0,
            spun_ns: 0,
        }
    }

    pub fn priority(&self) -> Priority {
        self.priority
    }

    /// How long before a deadline `until_ns` from now to wake up (the rest is polled).
    pub fn spin_ns(&self, until_ns: u64) -> u64 {
        // Short sleeps come by the thousand a second on a busy link, where every µs of
        // spinning at real-time priority is taken from the nodes' programs (0.913–0.925
        // of a 100 Mbit/s link's rate for TCP with a margin, 0.956 without): their
        // margin is the mean lateness alone. A longer sleep can afford more.
        let (late, most) = match class(until_ns) {
            0 => (self.late[0].mean_ns, MAX_REALTIME_SPIN_NS),
            c => (self.late[c].margin_ns(), MAX_REALTIME_LONG_SPIN_NS),
        };
        match self.priority {
            Priority::Realtime if self.spun_ns >= share_of_window_ns(SPIN_SHARE) => 0,
            Priority::Realtime => late.min(most),
            Priority::Normal => (2 * late).clamp(NORMAL_SPIN_NS, MAX_NORMAL_SPIN_NS),
        }
    }

    /// `ns` were spent polling for a deadline (woken early for it, or waiting for one
    /// too near to sleep for) and found nothing else to do.
    pub fn spun(&mut self, ns: u64) {
        self.spun_ns = self.spun_ns.saturating_add(ns);
    }

    /// A timed wake-up, asked for `until_ns` before its deadline (less the spin), came
    /// `late_ns` after it was asked for.
    pub fn woke(&mut self, until_ns: u64, late_ns: u64) {
        self.late[class(until_ns)].add(late_ns.min(10 * MAX_NORMAL_SPIN_NS));
    }

    /// How long to go on polling after working (0: sleep at once): [`LINGER_NS`], or
    /// what is left of this window's share; never at normal priority.
    pub fn linger_ns(&self) -> u64 {
        match self.priority {
            Priority::Realtime => {
                share_of_window_ns(LINGER_SHARE).saturating_sub(self.lingered_ns).min(LINGER_NS)
            }
            Priority::Normal => 0,
        }
    }

    /// `ns` were spent polling after work and found nothing.
    pub fn lingered(&mut self, ns: u64) {
        self.lingered_ns = self.lingered_ns.saturating_add(ns);
    }

    /// Look at the load (`work_ns`: the shard's total time spent working) and at the
    /// machine's CPU pressure (`pressure_ns`, asked only then: total time some task
    /// waited for a CPU, none where the kernel does not count it) once a window has
    /// passed; the priority to change to, if it changes.
    pub fn review(
        &mut self,
        now_ns: u64,
        work_ns: u64,
        pressure_ns: impl FnOnce() -> Option<u64>,
    ) -> Option<Priority> {
        let wall = now_ns.saturating_sub(self.window_start_ns);
        if wall < WINDOW_NS {
            return None;
        }
        let pressure_ns = pressure_ns();
        let load = work_ns.saturating_sub(self.window_start_work_ns) as f64 / wall as f64;
        let pressure = match (self.window_start_pressure_ns, pressure_ns) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / wall as f64,
            _ => 0.0,
        };
        self.window_start_ns = now_ns;
        self.window_start_work_ns = work_ns;
        self.window_start_pressure_ns = pressure_ns;
        self.lingered_ns = 0;
        self.spun_ns = 0;
        self.pressed_windows = match pressure > HIGH_PRESSURE && load >= PRESSED_LOAD {
            true => self.pressed_windows + 1,
            false => 0,
        };
        let pressed = self.pressed_windows >= PRESSED_WINDOWS;
        let next = match self.priority {
            Priority::Realtime if load > HIGH_LOAD || pressed => Priority::Normal,
            Priority::Normal
                if self.realtime_allowed && load < LOW_LOAD && pressure < LOW_PRESSURE =>
            {
                Priority::Realtime
            }
            p => p,
        };
        (next != self.priority).then(|| {
            self.priority = next;
            next
        })
    }
}

/// A shard asleep at least this long before it woke was idle (see [`Writers`]).
pub const IDLE_SLEEP_NS: u64 = 1_000_000;
/// In an exchange on the shard's own CPU, a deadline at most this far is waited for
/// polling, not asleep (see [`Writers`]).
pub const EXCHANGE_SPIN_NS: u64 = 50_000;
/// An exchange lasts at most this long after the idle wake-up that began it.
pub const EXCHANGE_MAX_NS: u64 = 250_000;

/// Where the frames a shard reads were sent from (the CPU the plane's program saw each
/// arrive on: its sender's), and what follows for the shard's sleeping.
///
/// Waking a thread on another, idle CPU of a virtual machine goes through the hypervisor:
/// on this project's VM 70–90 µs for a round trip of two such wake-ups, against 15–20 µs
/// on one CPU (`bench/run.sh engine`, first row). An idle ping through the engine paid
/// two: its sender woke the shard, asleep on the other CPU (Linux wakes a real-time
/// thread where it last ran), and the shard woke the sender for the reply (Linux wakes
/// it on an idle CPU rather than behind the running shard). So:
///
/// - **Follow**: when a shard goes idle, and the frame that last woke it from idle came
///   from another CPU, it moves to that CPU before it sleeps: the next frame from the
///   same sender then wakes it on the sender's own CPU, without the hypervisor.
/// - **Exchange**: when the first frame after an idle wake-up comes from the shard's own
///   CPU, its sender was preempted there by the shard (a real-time thread) and has not
///   yet waited for an answer. While the exchange stays on that CPU (every frame from
///   it, for at most [`EXCHANGE_MAX_NS`], until the shard sleeps), the shard polls
///   through deadlines up to [`EXCHANGE_SPIN_NS`] away (asleep, it would let the sender
///   run and wait for the answer, then need waking from elsewhere), and does not linger
///   after working (a sender on the shard's own CPU cannot write while the shard polls
///   there: lingering would only keep the answer from it).
///
/// Only idle shards change: a shard that never sleeps for [`IDLE_SLEEP_NS`] (a busy
/// link) neither moves nor polls more than before. A frame whose CPU is not known (a
/// TCP super-frame, a datagram from another machine) counts as from elsewhere.
#[derive(Debug, Clone, Default)]
pub struct Writers {
    /// The shard's CPU since it last woke (none: not known, or not at real-time priority).
    here: Option<u32>,
    /// When the shard last woke from an idle sleep, while no frame has been read since.
    first_after_idle_ns: Option<u64>,
    /// When the current exchange on the shard's own CPU ends (none: no exchange).
    exchange_until_ns: Option<u64>,
    /// The other CPU the first frame after the last idle wake-up came from.
    follow: Option<u32>,
}

impl Writers {
    /// The shard woke at `now_ns` on CPU `here` after sleeping `slept_ns` (0: it polled).
    pub fn woke(&mut self, now_ns: u64, here: Option<u32>, slept_ns: u64) {
        self.here = here;
        if slept_ns >= IDLE_SLEEP_NS {
            self.first_after_idle_ns = Some(now_ns);
            self.follow = None;
            self.exchange_until_ns = None;
        }
    }

    /// A frame was read whose sender ran on `cpu` (none: not known).
    pub fn read_from(&mut self, cpu: Option<u32>) {
        let local = cpu.is_some() && cpu == self.here;
        if let Some(woke) = self.first_after_idle_ns.take() {
            self.follow = if local || self.here.is_none() { None } else { cpu };
            self.exchange_until_ns = local.then(|| woke.saturating_add(EXCHANGE_MAX_NS));
        } else if !local {
            self.exchange_until_ns = None;
        }
    }

    fn in_exchange(&self, now_ns: u64) -> bool {
        self.exchange_until_ns.is_some_and(|t| now_ns < t)
    }

    /// Whether lingering after work done at `now_ns` can catch a next frame.
    pub fn linger_worth(&self, now_ns: u64) -> bool {
        !self.in_exchange(now_ns)
    }

    /// How far a deadline may be, at `now_ns`, and be waited for polling whatever the
    /// learnt lateness of wake-ups.
    pub fn spin_through_ns(&self, now_ns: u64) -> u64 {
        if self.in_exchange(now_ns) {
            EXCHANGE_SPIN_NS
        } else {
            0
        }
    }

    /// The shard goes to sleep for `sleep_ns` (none: until woken): the CPU to move to
    /// first, if any. Asleep, it ends any exchange.
    pub fn sleeping(&mut self, sleep_ns: Option<u64>) -> Option<u32> {
        self.exchange_until_ns = None;
        if sleep_ns.is_some_and(|s| s < IDLE_SLEEP_NS) {
            return None;
        }
        self.follow.take()
    }
}

/// A share of [`WINDOW_NS`], ns: a budget of polling.
fn share_of_window_ns(share: f64) -> u64 {
    (WINDOW_NS as f64 * share) as u64
}

/// The class of a sleep until a deadline `until_ns` away.
fn class(until_ns: u64) -> usize {
    SLEEP_CLASSES_NS.iter().take_while(|&&b| until_ns >= b).count()
}

/// How late wake-ups of one class come: mean and mean deviation, smoothed (ns).
#[derive(Debug, Clone, Copy, Default)]
struct Lateness {
    mean_ns: u64,
    dev_ns: u64,
}

impl Lateness {
    fn add(&mut self, late_ns: u64) {
        let dev = late_ns.abs_diff(self.mean_ns);
        self.dev_ns = (self.dev_ns * 3 + dev) / 4;
        self.mean_ns = (self.mean_ns * 7 + late_ns) / 8;
    }

    /// How early to wake: the mean lateness and twice its deviation.
    fn margin_ns(&self) -> u64 {
        self.mean_ns + 2 * self.dev_ns
    }
}

/// The shard a new link or segment goes to when nothing ties it to one (a trunk's or a
/// tunnel's shard): the one with the fewest devices (`devices`: each shard's count),
/// the lowest-numbered among equals; 0 without shards.
pub fn lightest_shard(devices: impl IntoIterator<Item = usize>) -> usize {
    devices.into_iter().enumerate().min_by_key(|&(s, d)| (d, s)).map_or(0, |(s, _)| s)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn a_busy_real_time_shard_goes_back_to_normal_and_returns_when_calm() {
        let mut s = Schedule::new(Priority::Realtime, 0);
        let mut work = 0;
        // Half busy: stays.
        work += 50 * MS;
        assert_eq!(s.review(100 * MS, work, || None), None);
        // Not a whole window yet: nothing judged.
        work += 90 * MS;
        assert_eq!(s.review(150 * MS, work, || None), None);
        // 90 % of the window: back to normal.
        assert_eq!(s.review(200 * MS, work, || None), Some(Priority::Normal));
        // 60 %: stays normal (between the thresholds).
        work += 60 * MS;
        assert_eq!(s.review(300 * MS, work, || None), None);
        assert_eq!(s.priority(), Priority::Normal);
        // 40 %: real time again.
        work += 40 * MS;
        assert_eq!(s.review(400 * MS, work, || None), Some(Priority::Realtime));
    }

    #[test]
    fn a_real_time_shard_gives_way_where_the_machine_is_short_of_cpu() {
        let mut s = Schedule::new(Priority::Realtime, 0);
        let (mut now, mut work, mut waited) = (0, 0, 0);
        let mut window = |s: &mut Schedule, work_ms: u64, waited_ms: u64| {
            now += 100 * MS;
            work += work_ms * MS;
            waited += waited_ms * MS;
            s.review(now, work, || Some(waited))
        };
        // The first window has no pressure to compare with: stays.
        assert_eq!(window(&mut s, 30, 90), None);
        // Tasks waited 90 % of each window while the shard worked 30 %: it gives way once
        // that has lasted PRESSED_WINDOWS windows (a lab's start is pressure that passes)...
        for _ in 1..PRESSED_WINDOWS {
            assert_eq!(window(&mut s, 30, 90), None);
        }
        assert_eq!(window(&mut s, 30, 90), Some(Priority::Normal));
        // Still pressed (40 %), though the shard is calm: stays normal.
        assert_eq!(window(&mut s, 10, 40), None);
        // The pressure gone: real time again.
        assert_eq!(window(&mut s, 10, 10), Some(Priority::Realtime));
        // ...and a calm window starts the count again.
        for _ in 1..PRESSED_WINDOWS {
            assert_eq!(window(&mut s, 30, 90), None);
        }
        assert_eq!(window(&mut s, 30, 10), None);
        assert_eq!(window(&mut s, 30, 90), None);
        assert_eq!(s.priority(), Priority::Realtime);
        // Pressure from others while the shard hardly works: it is not the cause, stays.
        for _ in 0..2 * PRESSED_WINDOWS {
            assert_eq!(window(&mut s, 5, 95), None);
        }
        // Where the kernel counts no pressure, the load alone decides.
        let mut n = Schedule::new(Priority::Realtime, 0);
        assert_eq!(n.review(100 * MS, 30 * MS, || None), None);
        assert_eq!(n.review(200 * MS, 60 * MS, || None), None);
        // The pressure is read only once a window has passed.
        let mut asked = false;
        n.review(250 * MS, 60 * MS, || {
            asked = true;
            None
        });
        assert!(!asked);
    }

    #[test]
    fn polling_after_work_is_bounded_by_a_share_of_each_window() {
        let mut s = Schedule::new(Priority::Realtime, 0);
        assert_eq!(s.linger_ns(), LINGER_NS);
        let budget = (WINDOW_NS as f64 * LINGER_SHARE) as u64;
        // Polling that finds nothing uses the window's share up...
        s.lingered(budget - 10_000);
        assert_eq!(s.linger_ns(), 10_000, "only what is left of the share");
        s.lingered(10_000);
        assert_eq!(s.linger_ns(), 0, "share used: sleep at once");
        // ...until the next window.
        assert_eq!(s.review(50 * MS, 0, || None), None);
        assert_eq!(s.linger_ns(), 0, "still the same window");
        s.review(100 * MS, 0, || None);
        assert_eq!(s.linger_ns(), LINGER_NS);
        // At normal priority the frame's next shard would wait behind the poller.
        assert_eq!(Schedule::new(Priority::Normal, 0).linger_ns(), 0);
    }

    const US: u64 = 1_000;

    #[test]
    fn spinning_for_deadlines_is_bounded_by_a_share_of_each_window() {
        let mut s = Schedule::new(Priority::Realtime, 0);
        // Wake-ups 30 µs late: a deadline 100 µs away is woken for 30 µs early.
        for _ in 0..50 {
            s.woke(100 * US, 30 * US);
        }
        let early = s.spin_ns(100 * US);
        assert!((25 * US..=30 * US).contains(&early), "{early}");
        let budget = (WINDOW_NS as f64 * SPIN_SHARE) as u64;
        s.spun(budget - 1);
        assert_eq!(s.spin_ns(100 * US), early, "within the share");
        s.spun(1);
        assert_eq!(s.spin_ns(100 * US), 0, "share used: it sleeps until the deadline");
        assert_eq!(s.spin_ns(5 * MS), 0, "long sleeps too");
        assert_eq!(s.review(50 * MS, 0, || None), None);
        assert_eq!(s.spin_ns(100 * US), 0, "still the same window");
        s.review(100 * MS, 0, || None);
        assert_eq!(s.spin_ns(100 * US), early, "a new window");
        // At normal priority spinning is what hides the lateness (the share does not
        // apply: the nodes' programs preempt it there).
        let mut n = Schedule::new(Priority::Normal, 0);
        n.spun(WINDOW_NS);
        assert_eq!(n.spin_ns(100 * US), NORMAL_SPIN_NS);
    }

    #[test]
    fn an_idle_shard_woken_from_another_cpu_moves_there_when_it_goes_idle() {
        let mut w = Writers::default();
        w.woke(10 * MS, Some(1), 10 * MS);
        w.read_from(Some(0));
        assert!(w.linger_worth(10 * MS), "its sender is elsewhere: lingering may catch the next");
        assert_eq!(w.spin_through_ns(10 * MS), 0);
        // A short sleep (a frame due soon) is not going idle: it stays.
        assert_eq!(w.sleeping(Some(20 * US)), None);
        assert_eq!(w.sleeping(None), Some(0), "idle: to the sender's CPU");
        assert_eq!(w.sleeping(None), None, "once");
        // Woken by a frame from a sender on another CPU while busy (no idle sleep): it
        // does not move.
        w.woke(30 * MS, Some(0), 0);
        w.read_from(Some(1));
        assert_eq!(w.sleeping(None), None);
        // Where its CPU is not known (not at real-time priority), it never moves.
        w.woke(50 * MS, None, 10 * MS);
        w.read_from(Some(1));
        assert_eq!(w.sleeping(None), None);
    }

    #[test]
    fn an_exchange_on_the_shards_cpu_polls_through_short_deadlines_and_does_not_linger() {
        let mut w = Writers::default();
        let t0 = 10 * MS;
        w.woke(t0, Some(1), 10 * MS);
        w.read_from(Some(1));
        assert!(!w.linger_worth(t0 + US), "the sender waits on this CPU: no lingering");
        assert_eq!(w.spin_through_ns(t0 + US), EXCHANGE_SPIN_NS);
        // The answer (written by the shard, sent back on this CPU) keeps it going...
        w.woke(t0 + 20 * US, Some(1), 0);
        w.read_from(Some(1));
        assert_eq!(w.spin_through_ns(t0 + 30 * US), EXCHANGE_SPIN_NS);
        // ...until its time is up,
        assert_eq!(w.spin_through_ns(t0 + EXCHANGE_MAX_NS), 0);
        assert!(w.linger_worth(t0 + EXCHANGE_MAX_NS));
        // or a frame comes from elsewhere (or from where is not known),
        let mut w2 = Writers::default();
        w2.woke(t0, Some(1), 10 * MS);
        w2.read_from(Some(1));
        w2.read_from(None);
        assert_eq!(w2.spin_through_ns(t0 + US), 0);
        // or the shard sleeps.
        let mut w3 = Writers::default();
        w3.woke(t0, Some(1), 10 * MS);
        w3.read_from(Some(1));
        assert_eq!(w3.sleeping(Some(100 * US)), None, "a local exchange moves nowhere");
        assert_eq!(w3.spin_through_ns(t0 + 200 * US), 0);
        // A busy shard (short sleeps) starts no exchange.
        let mut w4 = Writers::default();
        w4.woke(t0, Some(1), 100 * US);
        w4.read_from(Some(1));
        assert_eq!(w4.spin_through_ns(t0 + US), 0);
        assert!(w4.linger_worth(t0 + US));
    }

    #[test]
    fn a_shard_refused_real_time_stays_normal() {
        let mut s = Schedule::new(Priority::Normal, 0);
        assert_eq!(s.review(100 * MS, 0, || None), None);
        assert_eq!(s.priority(), Priority::Normal);
    }

    #[test]
    fn spinning_follows_the_wake_up_lateness() {
        let mut rt = Schedule::new(Priority::Realtime, 0);
        assert_eq!(rt.spin_ns(MS), 0, "no spinning before the first wake-up is measured");
        for _ in 0..100 {
            rt.woke(MS, 16_000);
        }
        let spin = rt.spin_ns(MS);
        assert!((15_000..=17_000).contains(&spin), "steady lateness: about itself, {spin}");
        let mut normal = Schedule::new(Priority::Normal, 0);
        assert_eq!(normal.spin_ns(MS), NORMAL_SPIN_NS);
        for _ in 0..100 {
            normal.woke(MS, 400_000);
        }
        assert!(normal.spin_ns(MS) > 700_000 && normal.spin_ns(MS) <= MAX_NORMAL_SPIN_NS);
        // A wake-up seconds late (a stopped process) does not make the shard spin for seconds.
        rt.woke(MS, 5_000_000_000);
        assert_eq!(rt.spin_ns(MS), MAX_REALTIME_LONG_SPIN_NS);
        rt.woke(MS / 10, 5_000_000_000);
        assert_eq!(rt.spin_ns(MS / 10), MAX_REALTIME_SPIN_NS);
    }

    #[test]
    fn long_sleeps_learn_their_own_lateness() {
        let mut s = Schedule::new(Priority::Realtime, 0);
        // Many short sleeps that wake 20 us late, a few long ones that wake 70 us late.
        for i in 0..1000 {
            s.woke(50_000, 20_000);
            if i % 100 == 0 {
                s.woke(10 * MS, 70_000);
            }
        }
        let (short, long) = (s.spin_ns(50_000), s.spin_ns(10 * MS));
        assert!((19_000..=20_000).contains(&short), "short sleeps: their mean, {short}");
        assert!(
            (60_000..=MAX_REALTIME_LONG_SPIN_NS).contains(&long),
            "the long sleeps' own estimate: {long}"
        );
        // A class not measured yet spins for nothing (it learns from its first wake-up).
        assert_eq!(s.spin_ns(MS), 0);
    }

    #[test]
    fn lateness_that_varies_gets_a_margin_above_its_mean() {
        let mut s = Schedule::new(Priority::Realtime, 0);
        for i in 0..200 {
            s.woke(10 * MS, if i % 2 == 0 { 30_000 } else { 90_000 });
        }
        let spin = s.spin_ns(10 * MS);
        assert!((100_000..=140_000).contains(&spin), "mean 60 us, deviation 30 us: {spin}");
        // The class bounds.
        assert_eq!(
            (
                class(0),
                class(249_999),
                class(250_000),
                class(2_499_999),
                class(2_500_000),
                class(u64::MAX)
            ),
            (0, 0, 1, 1, 2, 2)
        );
    }

    #[test]
    fn a_new_link_goes_to_the_shard_with_fewest_devices_the_first_among_equals() {
        assert_eq!(lightest_shard([4, 2, 3, 2]), 1);
        assert_eq!(lightest_shard([0, 0]), 0);
        assert_eq!(lightest_shard(std::iter::empty()), 0);
    }
}
