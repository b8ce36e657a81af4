//! The controller over a fake worker: what it orders for each operation, what it keeps,
//! what it tells, and what it does when the worker refuses or a machine is lost —
//! without root, namespaces or agents.

use std::sync::{Arc, Mutex};

use vemu_engine::{CaptureSpec, Captured, LabClock};
use vemu_link::ImpairmentsPatch;

use super::*;
use crate::Direction;
use vemu_machine::worker::{Counters, Worker, WorkerError};

/// An order the fake worker received, as a value.
#[derive(Debug, Clone, PartialEq)]
enum Order {
    Patch {
        target: Target,
        dir: usize,
        patch: Box<ImpairmentsPatch>,
    },
    SetUp {
        target: Target,
        up: bool,
    },
    NodeState {
        node: String,
        up: bool,
    },
    /// Any other, by its name.
    Other(&'static str),
}

fn set_up(link: usize, up: bool) -> Order {
    Order::SetUp { target: Target::Link(link), up }
}

/// What the fake worker saw and is to do.
#[derive(Default)]
struct Script {
    /// Orders received, in order.
    orders: Vec<Order>,
    /// Machines it reports lost.
    lost: Vec<usize>,
    /// Refuse every order so.
    refuse: Option<WorkerError>,
    /// States handed to it for the agents to keep.
    kept: usize,
}

/// A worker that carries out nothing and answers as a real one would.
struct Fake(Arc<Mutex<Script>>);

impl Fake {
    /// Record order `o`: refused if the script says so.
    fn order(&self, o: Order) -> Result<(), WorkerError> {
        let mut s = self.0.lock().unwrap();
        s.orders.push(o);
        s.refuse.clone().map_or(Ok(()), Err)
    }
}

impl Worker for Fake {
    fn build(
        &mut self,
        _: Plan,
        _: u64,
        _: &mut dyn FnMut(usize, usize),
    ) -> Result<(), WorkerError> {
        self.order(Order::Other("build"))
    }

    fn patch(
        &mut self,
        target: Target,
        dir: usize,
        patch: ImpairmentsPatch,
    ) -> Result<Option<Impairments>, WorkerError> {
        self.order(Order::Patch { target, dir, patch: Box::new(patch.clone()) })?;
        let mut imp = Impairments::default();
        patch.apply_to(&mut imp);
        Ok(Some(imp))
    }

    fn set_up(&mut self, target: Target, up: bool) -> Result<(), WorkerError> {
        self.order(Order::SetUp { target, up })
    }

    fn node_state(&mut self, node: &str, up: bool) -> Result<(), WorkerError> {
        self.order(Order::NodeState { node: node.into(), up })
    }

    fn stats(&mut self) -> Result<Counters, WorkerError> {
        self.order(Order::Other("stats")).map(|()| Counters::default())
    }

    fn processes(&mut self) -> Result<Vec<vemu_machine::supervise::ProcStatus>, WorkerError> {
        self.order(Order::Other("processes")).map(|()| Vec::new())
    }

    fn positions(&mut self, _: usize, _: Vec<vemu_radio::Pos>) -> Result<(), WorkerError> {
        self.order(Order::Other("positions"))
    }

    fn radio(&mut self, _: usize, _: u64) -> Result<vemu_engine::RadioSnapshot, WorkerError> {
        self.order(Order::Other("radio"))?;
        Err(WorkerError::caller("no radio here"))
    }

    fn tap_queues(&mut self) -> Result<Vec<vemu_machine::worker::TapQueue>, WorkerError> {
        self.order(Order::Other("tap_queues")).map(|()| Vec::new())
    }

    fn backlog(&mut self) -> Result<u64, WorkerError> {
        self.order(Order::Other("backlog")).map(|()| 0)
    }

    fn set_limits(&mut self, _: &str, _: vemu_scenario::Limits) -> Result<(), WorkerError> {
        self.order(Order::Other("set_limits"))
    }

    fn usage(&mut self) -> Result<Vec<vemu_host::cgroup::Usage>, WorkerError> {
        self.order(Order::Other("usage")).map(|()| Vec::new())
    }

    fn traffic_end(&mut self, _: &str, _: vemu_machine::traffic::End) -> Result<(), WorkerError> {
        self.order(Order::Other("traffic_end"))
    }

    fn traffic_records(&mut self, _: &str, _: &str, _: u64) -> Result<String, WorkerError> {
        self.order(Order::Other("traffic_records")).map(|()| String::new())
    }

    fn teardown(&mut self) -> Result<(), WorkerError> {
        self.order(Order::Other("teardown"))
    }

    fn capture(
        &mut self,
        _: &[CaptureSpec],
        _: std::sync::mpsc::SyncSender<Captured>,
    ) -> anyhow::Result<u64> {
        anyhow::bail!("no captures here")
    }

    fn stop_capture(&mut self, _: u64) {}

    fn door(&self, node: usize) -> Result<vemu_machine::door::Door, WorkerError> {
        let paths = vemu_host::LabPaths::new("unit-fake");
        Ok(vemu_machine::door::Door::Here(vemu_machine::door::HereDoor::new(
            paths,
            &format!("node{node}"),
        )))
    }

    fn lost_machines(&self) -> Vec<usize> {
        self.0.lock().unwrap().lost.clone()
    }

    fn keep_saved(&self, _: Arc<Vec<u8>>) {
        self.0.lock().unwrap().kept += 1;
    }
}

/// A controller of the scenario `yaml` over a fake worker, and the worker's script.
fn controller(yaml: &str) -> (Controller, Arc<Mutex<Script>>) {
    let name = format!("unit-fake-{}", std::process::id());
    let plan = vemu_scenario::load_str(yaml, "t.yaml", "t", Some(&name)).unwrap();
    let script = Arc::new(Mutex::new(Script::default()));
    let ctl = Controller::new(plan, Box::new(Fake(script.clone())), LabClock::start(), 0);
    (ctl, script)
}

/// The orders given since the last look, but reads (stats, processes...).
fn orders(s: &Arc<Mutex<Script>>) -> Vec<Order> {
    let all = std::mem::take(&mut s.lock().unwrap().orders);
    all.into_iter().filter(|o| !matches!(o, Order::Other(_))).collect()
}

fn delay(ms: u64) -> ImpairmentsPatch {
    ImpairmentsPatch { delay_ns: Some(ms * 1_000_000), ..Default::default() }
}

const TWO: &str = "nodes: {a: {}, b: {}}\nlinks:\n  - endpoints: [a, b]\n";
const TWO_MACHINES: &str = "machines: {m1: 10.0.0.1, m2: 10.0.0.2}\nnodes: {a: {machine: m1}, b: {machine: m2}, c: {machine: m1}}\nlinks:\n  - endpoints: [a, b]\n  - endpoints: [a, c]\n";

#[test]
fn a_link_change_is_ordered_kept_and_told_and_a_bad_one_orders_nothing() {
    let (mut ctl, script) = controller(TWO);
    let mut events = ctl.events().subscribe();
    ctl.link_set("a:b", Direction::Forward, delay(5)).unwrap();
    assert_eq!(
        orders(&script),
        [Order::Patch { target: Target::Link(0), dir: 0, patch: Box::new(delay(5)) }]
    );
    assert_eq!(ctl.links[0].imps[0].delay_ns, 5_000_000);
    assert_eq!(ctl.links[0].imps[1].delay_ns, 0);
    let ev = events.try_recv().unwrap();
    assert_eq!((ev["type"].as_str(), ev["direction"].as_u64()), (Some("link"), Some(0)));
    // Out of range, an unknown link, the MTU at run time: refused before any order.
    let bad = ImpairmentsPatch {
        loss: Some(vemu_link::Loss::Bernoulli { rate: 2.0, correlation: 0.0 }),
        ..Default::default()
    };
    assert!(matches!(ctl.link_set("a:b", Direction::Both, bad), Err(LabError::Invalid(_))));
    assert!(matches!(ctl.link_set("a:z", Direction::Both, delay(1)), Err(LabError::NotFound(_))));
    let mtu = ImpairmentsPatch { mtu: Some(Some(9000)), ..Default::default() };
    assert!(matches!(ctl.link_set("a:b", Direction::Both, mtu), Err(LabError::Invalid(_))));
    assert_eq!(orders(&script), []);
    // Down and up: one order each, the state follows.
    ctl.link_state("a:b", false).unwrap();
    assert!(!ctl.links[0].up);
    ctl.link_state("a:b", true).unwrap();
    assert_eq!(orders(&script), [set_up(0, false), set_up(0, true)]);
}

#[test]
fn a_refusing_worker_is_an_internal_error_and_the_lab_keeps_its_state() {
    let (mut ctl, script) = controller(TWO);
    script.lock().unwrap().refuse = Some(WorkerError::internal("engine gone"));
    let e = ctl.link_set("a:b", Direction::Both, delay(5)).unwrap_err();
    assert_eq!(e, LabError::Internal("engine gone".into()));
    assert_eq!(ctl.links[0].imps[0].delay_ns, 0);
    assert!(matches!(ctl.node_state("a", false), Err(LabError::Internal(_))));
    assert!(!ctl.stopped[0]);
    assert!(matches!(ctl.status(), Err(LabError::Internal(_))));
    // Nodes that are not there are the caller's mistake, found before any order.
    script.lock().unwrap().orders.clear();
    assert!(matches!(ctl.node_state("zz", false), Err(LabError::NotFound(_))));
    assert_eq!(orders(&script), []);
}

#[test]
fn a_lost_machine_takes_its_links_down_and_its_return_brings_them_back_as_set_meanwhile() {
    let (mut ctl, script) = controller(TWO_MACHINES);
    let mut events = ctl.events().subscribe();
    // Link 1 (a-c) is on one machine; link 0 (a-b) crosses to m2.
    ctl.check_machines();
    assert_eq!(orders(&script), []);
    script.lock().unwrap().lost = vec![1];
    ctl.check_machines();
    assert_eq!(orders(&script), [set_up(0, false)]);
    assert!(!ctl.links[0].up && ctl.links[1].up);
    let ev = events.try_recv().unwrap();
    assert_eq!(ev["type"], "machine-lost");
    assert_eq!((ev["machine"].as_str(), ev["nodes"][0].as_str()), (Some("m2"), Some("b")));
    // Told once, however often it is looked at; the state is saved for a takeover.
    ctl.check_machines();
    assert_eq!(orders(&script), []);
    assert!(events.try_recv().is_err());
    assert!(script.lock().unwrap().kept >= 1);
    // Entering a node of the lost machine is refused, naming it.
    let Err(e) = ctl.door("b") else { panic!("a node of a lost machine") };
    assert!(e.message().contains("which is lost"), "{e}");
    // Changed while it was lost; then it answers again: it gets the settings of now,
    // and the link its loss took down comes up.
    ctl.link_set("a:b", Direction::Forward, delay(7)).unwrap();
    orders(&script);
    script.lock().unwrap().lost.clear();
    ctl.check_machines();
    let o = orders(&script);
    assert!(
        matches!(
            o.as_slice(),
            [
                Order::Patch { target: Target::Link(0), dir: 0, patch: p },
                Order::Patch { target: Target::Link(0), dir: 1, .. },
                Order::SetUp { target: Target::Link(0), up: true },
            ] if p.delay_ns == Some(7_000_000)
        ),
        "{o:?}"
    );
    assert!(ctl.links[0].up);
    let ev = std::iter::from_fn(|| events.try_recv().ok()).last().unwrap();
    assert_eq!(
        (ev["type"].as_str(), ev["links"][0].as_str()),
        (Some("machine-rejoined"), Some("a:b"))
    );
}

#[test]
fn a_link_the_user_took_down_stays_down_when_its_lost_machine_returns() {
    let (mut ctl, script) = controller(TWO_MACHINES);
    ctl.link_state("a:b", false).unwrap();
    script.lock().unwrap().lost = vec![1];
    ctl.check_machines();
    // (Already down: nothing to take down.)
    assert_eq!(orders(&script), [set_up(0, false)]);
    script.lock().unwrap().lost.clear();
    ctl.check_machines();
    assert_eq!(orders(&script).last(), Some(&set_up(0, false)));
    assert!(!ctl.links[0].up);
}

/// A refusal's fault decides the lab's error (and so the API's status): the caller's
/// mistake is a bad request, a machine that did not answer makes the lab unavailable.
#[test]
fn a_refusal_says_whose_fault_it_is() {
    let (mut ctl, script) = controller(TWO);
    for (refusal, want) in [
        (WorkerError::caller("no node 'x'"), LabError::Invalid("no node 'x'".into())),
        (WorkerError::lost("m2 did not answer"), LabError::Unavailable("m2 did not answer".into())),
        (WorkerError::internal("engine gone"), LabError::Internal("engine gone".into())),
    ] {
        script.lock().unwrap().refuse = Some(refusal);
        assert_eq!(ctl.link_state("a:b", false).unwrap_err(), want);
        assert!(ctl.links[0].up, "the state is kept");
    }
}

/// The status shows what the plan built and what was changed since, the worker's
/// counters in place (zeros where it counted nothing), and the machines of a lab across
/// machines with their state.
#[test]
fn the_status_shows_the_plan_the_changes_and_the_machines() {
    let (mut ctl, script) = controller(TWO_MACHINES);
    ctl.link_set("a:b", Direction::Forward, delay(3)).unwrap();
    script.lock().unwrap().lost = vec![1];
    ctl.check_machines();
    let s = ctl.status().unwrap();
    let names: Vec<&str> = s.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    // b is on the lost machine.
    assert_eq!(s.nodes.iter().map(|n| n.up).collect::<Vec<_>>(), [true, false, true]);
    assert_eq!(s.links.len(), 2);
    assert_eq!(s.links[0].forward.impairments.delay_ns, 3_000_000);
    assert!(!s.links[0].up && s.links[1].up);
    assert_eq!(s.links[0].forward.stats.tx_frames, 0);
    let machines: Vec<(&str, &str, usize)> =
        s.machines.iter().map(|m| (m.name.as_str(), m.state.as_str(), m.nodes)).collect();
    assert_eq!(machines, [("m1", "up", 2), ("m2", "lost", 1)]);
    assert!(s.segments.is_empty() && s.diverts.is_empty());
}
