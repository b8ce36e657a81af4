//! `vemu-operator`: watches VemuLab resources and brings their labs up and down on the
//! cluster's vemu agents (see the library's documentation and docs/kubernetes.md).
//!
//! `vemu-operator crd` prints the CustomResourceDefinition (JSON, which kubectl and
//! kustomize read as YAML); `vemu-operator run` is the operator. It finds the agents as
//! the pods labelled `app.kubernetes.io/name=vemu-agent` in `VEMU_AGENT_NAMESPACE`
//! (default `vemu`), and runs `vemu` (`VEMU`, default `vemu` on the PATH) with the
//! agents' token (`VEMU_AGENT_TOKEN_FILE`).

use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event};
use kube::runtime::watcher;
use kube::{Client, CustomResourceExt, ResourceExt};
use vemu_operator::{
    admit, decide, digest, tenant_args, trust_of, Agent, LabCondition, Step, VemuLab,
    VemuLabPolicy, VemuLabStatus, AGENT_LABEL, FINALIZER,
};
use vemu_scenario::Trust;

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("Kubernetes: {0}")]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Vemu(String),
    #[error("finalizer: {0}")]
    Finalizer(String),
}

struct Ctx {
    client: Client,
    agent_namespace: String,
    vemu: String,
}

/// `vemu ARGS`: its exit status and output (the runtime's other tasks go on meanwhile:
/// `vemu up` of a big lab takes a while).
fn vemu(ctx: &Ctx, args: &[&str]) -> (bool, String) {
    match tokio::task::block_in_place(|| Command::new(&ctx.vemu).args(args).output()) {
        Ok(o) => (
            o.status.success(),
            format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
                .trim()
                .to_string(),
        ),
        Err(e) => (false, format!("cannot run {}: {e}", ctx.vemu)),
    }
}

async fn agents(ctx: &Ctx) -> Result<Vec<Agent>, Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ctx.agent_namespace);
    let list = pods.list(&ListParams::default().labels(AGENT_LABEL)).await?;
    Ok(list
        .items
        .iter()
        .map(|p| {
            let st = p.status.as_ref();
            let ready = st.is_some_and(|s| {
                s.phase.as_deref() == Some("Running")
                    && s.conditions
                        .iter()
                        .flatten()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
            });
            Agent {
                node: p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default(),
                host_ip: st.and_then(|s| s.host_ip.clone()),
                ready,
            }
        })
        .collect())
}

async fn set_status(api: &Api<VemuLab>, name: &str, status: VemuLabStatus) -> Result<(), Error> {
    let patch = serde_json::json!({"status": status});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// What the VemuLabs of `namespace` may use (the cluster's VemuLabPolicies).
async fn trust(ctx: &Ctx, namespace: &str) -> Result<Trust, Error> {
    let policies: Api<VemuLabPolicy> = Api::all(ctx.client.clone());
    let list = policies.list(&ListParams::default()).await?;
    Ok(trust_of(namespace, &list.items.into_iter().map(|p| p.spec).collect::<Vec<_>>()))
}

/// The `Admitted` condition: `Ok`, or the refusal.
fn admitted(
    verdict: &Result<(), vemu_operator::Refusal>,
    before: &[LabCondition],
) -> Vec<LabCondition> {
    let (status, reason, message) = match verdict {
        Ok(()) => ("True", "Allowed", "the scenario uses only what its namespace may".to_string()),
        Err(r) => ("False", r.reason, r.message.clone()),
    };
    let old = before.iter().find(|c| c.type_ == "Admitted");
    let since = match old.filter(|c| c.status == status) {
        Some(c) => c.last_transition_time.clone(),
        None => k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
    };
    vec![LabCondition {
        type_: "Admitted".into(),
        status: status.into(),
        reason: reason.into(),
        message,
        last_transition_time: since,
    }]
}

/// Bring lab `lab` up from the scenario on `machines`, for a tenant allowed `trust`.
fn up(
    ctx: &Ctx,
    lab: &str,
    scenario: &str,
    machines: &str,
    trust: &Trust,
) -> Result<String, Error> {
    let file = std::env::temp_dir().join(format!("vemulab-{lab}.yaml"));
    std::fs::write(&file, scenario)
        .map_err(|e| Error::Vemu(format!("writing {}: {e}", file.display())))?;
    let file_arg = file.to_string_lossy();
    let mut args = vec!["up", &file_arg, "--name", lab, "--machines", machines];
    let tenant = tenant_args(trust);
    args.extend(tenant.iter().map(String::as_str));
    let (ok, out) = vemu(ctx, &args);
    let _ = std::fs::remove_file(&file);
    match ok {
        true => Ok(out),
        false => Err(Error::Vemu(out)),
    }
}

async fn apply(lab_obj: Arc<VemuLab>, ctx: &Ctx, api: &Api<VemuLab>) -> Result<Action, Error> {
    // The watch's copy may be older than this operator's own last status write (a look
    // queued before it, as when a policy change and a spec change come together): read
    // afresh, so that a lab just brought up is not brought up again — which failed, and
    // took the lab down for a moment (CI saw it Up, then "not running").
    let lab_obj = match api.get_opt(&lab_obj.name_any()).await? {
        Some(fresh) => Arc::new(fresh),
        None => return Ok(Action::await_change()),
    };
    let (ns, name) = (lab_obj.namespace().unwrap_or_default(), lab_obj.name_any());
    let status = lab_obj.status.clone();
    let agents = agents(ctx).await?;
    let lab_now = status.as_ref().map(|s| s.lab.clone()).unwrap_or_default();
    let running = !lab_now.is_empty() && vemu(ctx, &["status", "--lab", &lab_now, "--json"]).0;
    let step = decide(&ns, &name, &lab_obj.spec, status.as_ref(), &agents, running);
    // One line a decision (`kubectl logs` shows what the operator did and why).
    eprintln!("vemu-operator: {ns}/{name}: {}", step.describe());
    let mut st =
        VemuLabStatus { digest: digest(&lab_obj.spec), ..status.clone().unwrap_or_default() };
    let trust = trust(ctx, &ns).await?;
    // A running lab the policies no longer admit (one was changed or deleted) is taken
    // down: what an administrator takes back is taken back from running labs too.
    if matches!(step, Step::Keep) && running {
        let machines = status.as_ref().map(|s| s.machines.clone()).unwrap_or_default();
        if let Err(r) = admit(&lab_obj.spec, &lab_now, &machines, &trust) {
            eprintln!("vemu-operator: {ns}/{name}: no longer admitted, taken down: {}", r.message);
            let _ = vemu(ctx, &["down", "--lab", &lab_now]);
            st.conditions = admitted(&Err(r.clone()), &st.conditions);
            st.phase = "Failed".into();
            st.message =
                format!("no longer admitted (a VemuLabPolicy changed), taken down: {}", r.message);
            st.lab = String::new();
            set_status(api, &name, st).await?;
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
    }
    // What is brought up from the spec is a tenant's: checked first, without running or
    // reading anything it may not.
    if let Step::Up { lab, machines } | Step::Recreate { lab, machines } = &step {
        let verdict = admit(&lab_obj.spec, lab, machines, &trust);
        st.conditions = admitted(&verdict, &st.conditions);
        if let Err(r) = verdict {
            eprintln!("vemu-operator: {ns}/{name}: not admitted: {}", r.message);
            if matches!(step, Step::Recreate { .. }) {
                let _ = vemu(ctx, &["down", "--lab", &lab_now]);
            }
            st.phase = "Failed".into();
            st.message = r.message;
            set_status(api, &name, st).await?;
            // A policy made later admits it: every VemuLab is looked at again when a
            // policy changes (and now and then anyway).
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
    }
    let result = match step {
        Step::Keep => return Ok(Action::requeue(Duration::from_secs(30))),
        Step::Wait(why) => {
            st.phase = "Pending".into();
            st.message = why;
            set_status(api, &name, st).await?;
            return Ok(Action::requeue(Duration::from_secs(10)));
        }
        Step::Invalid(why) => {
            st.phase = "Failed".into();
            st.message = why;
            set_status(api, &name, st).await?;
            return Ok(Action::await_change());
        }
        Step::Up { lab, machines } => {
            up(ctx, &lab, &lab_obj.spec.scenario, &machines, &trust).map(|m| (lab, machines, m))
        }
        Step::Recreate { lab, machines } => {
            let (down, out) = vemu(ctx, &["down", "--lab", &lab_now]);
            if !down {
                eprintln!(
                    "vemu-operator: {ns}/{name}: lab {lab_now} did not go down: {}",
                    out.lines().last().unwrap_or_default()
                );
            }
            up(ctx, &lab, &lab_obj.spec.scenario, &machines, &trust).map(|m| (lab, machines, m))
        }
        // From this pod's own state, else (a new pod: its /run is empty) from the state
        // the dead controller handed to the agents, that of the first machine.
        Step::Attach { lab, machines } => match vemu(ctx, &["attach", "--lab", &lab]) {
            (true, out) => Ok((lab, machines, out)),
            (false, _)
                if first_agent(&machines)
                    .is_some_and(|a| vemu(ctx, &["attach", "--lab", &lab, "--from", a]).0) =>
            {
                Ok((lab, machines, "taken over from its agents".into()))
            }
            // Its agents no longer hold it: what is left goes, and it comes up anew.
            (false, _) => {
                let _ = vemu(ctx, &["clean"]);
                up(ctx, &lab, &lab_obj.spec.scenario, &machines, &trust).map(|m| (lab, machines, m))
            }
        },
    };
    match result {
        Ok((lab, machines, out)) => {
            st = VemuLabStatus {
                phase: "Up".into(),
                lab,
                machines,
                message: out.lines().last().unwrap_or_default().to_string(),
                digest: st.digest,
                conditions: st.conditions,
            };
            set_status(api, &name, st).await?;
            Ok(Action::requeue(Duration::from_secs(30)))
        }
        Err(e) => {
            st.phase = "Failed".into();
            st.message = e.to_string();
            // Agents still hold a share of the lab that no controller serves (an earlier
            // controller died, or its `down` did not reach them all): taken over from
            // them and taken down, so that the next look brings it up.
            // The lab runs here already: a look at an older state of the VemuLab (its
            // status not yet seen) brought it up again. Taken down, and up at the next
            // look (seen when a policy change and a spec change came together).
            let here = vemu_operator::lab_name(&ns, &name).ok();
            if let Some(lab) =
                here.filter(|_| st.message.contains("is already running or being started"))
            {
                let down = vemu(ctx, &["down", "--lab", &lab]);
                eprintln!(
                    "vemu-operator: {ns}/{name}: lab {lab} was up already: taken down ({}), up again next",
                    down.1.lines().last().unwrap_or_default()
                );
                set_status(api, &name, st).await?;
                return Ok(Action::requeue(Duration::from_secs(2)));
            }
            let held = st.message.contains(&format!("already holds a share of lab '{}'", st.lab));
            if let Some(agent) = first_agent(&st.machines).filter(|_| held) {
                let lab = st.lab.clone();
                let attached = vemu(ctx, &["attach", "--lab", &lab, "--from", agent]);
                let down = vemu(ctx, &["down", "--lab", &lab]);
                eprintln!(
                    "vemu-operator: {ns}/{name}: its agents still held lab {lab}: taken over ({}) and down ({})",
                    attached.1.lines().last().unwrap_or_default(),
                    down.1.lines().last().unwrap_or_default()
                );
                set_status(api, &name, st).await?;
                return Ok(Action::requeue(Duration::from_secs(2)));
            }
            set_status(api, &name, st).await?;
            Ok(Action::requeue(Duration::from_secs(60)))
        }
    }
}

async fn reconcile(lab: Arc<VemuLab>, ctx: Arc<Ctx>) -> Result<Action, Error> {
    let api: Api<VemuLab> =
        Api::namespaced(ctx.client.clone(), &lab.namespace().unwrap_or_default());
    finalizer(&api, FINALIZER, lab, |event| async {
        match event {
            Event::Apply(l) => apply(l, &ctx, &api).await,
            Event::Cleanup(l) => {
                if let Some(s) = l.status.as_ref().filter(|s| !s.lab.is_empty()) {
                    let (ok, out) = vemu(&ctx, &["down", "--lab", &s.lab]);
                    if !ok && !out.contains("is not running") {
                        return Err(Error::Vemu(out));
                    }
                }
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e| Error::Finalizer(e.to_string()))
}

fn error_policy(_lab: Arc<VemuLab>, err: &Error, _ctx: Arc<Ctx>) -> Action {
    eprintln!("vemu-operator: {err}");
    Action::requeue(Duration::from_secs(15))
}

async fn run() -> anyhow::Result<()> {
    let client = Client::try_default().await?;
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        agent_namespace: std::env::var("VEMU_AGENT_NAMESPACE").unwrap_or_else(|_| "vemu".into()),
        vemu: std::env::var("VEMU").unwrap_or_else(|_| "vemu".into()),
    });
    let labs: Api<VemuLab> = Api::all(client.clone());
    // Every VemuLab is looked at again as soon as a VemuLabPolicy is made, changed or
    // deleted: what it now allows comes up, what it no longer allows goes down.
    let policies: Api<VemuLabPolicy> = Api::all(client);
    let policy_changed = watcher(policies, watcher::Config::default()).filter_map(|e| async move {
        matches!(e, Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))).then_some(())
    });
    // SIGTERM (the pod deleted) stops it at once, once what it is doing is done: as the
    // container's first process it would otherwise ignore the signal and act on labs for
    // the whole grace period beside the pod that replaces it (a real kubelet showed two
    // operators bringing one lab up at once).
    Controller::new(labs, watcher::Config::default())
        .reconcile_all_on(policy_changed)
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                eprintln!("vemu-operator: {e}");
            }
        })
        .await;
    eprintln!("vemu-operator: stopped by a signal");
    Ok(())
}

fn main() -> std::process::ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("crd") => {
            let crd = match std::env::args().nth(2).as_deref() {
                None | Some("vemulab") => VemuLab::crd(),
                Some("vemulabpolicy") => VemuLabPolicy::crd(),
                Some(other) => {
                    eprintln!("vemu-operator crd: '{other}' is not a resource of vemu's (vemulab, vemulabpolicy)");
                    return std::process::ExitCode::from(2);
                }
            };
            println!("{}", serde_json::to_string_pretty(&crd).unwrap_or_default());
            std::process::ExitCode::SUCCESS
        }
        Some("run") => {
            let rt = match tokio::runtime::Runtime::new() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("vemu-operator: {e}");
                    return std::process::ExitCode::FAILURE;
                }
            };
            match rt.block_on(run()) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("vemu-operator: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            }
        }
        _ => {
            eprintln!("usage: vemu-operator crd [vemulab | vemulabpolicy] | run");
            std::process::ExitCode::from(2)
        }
    }
}

/// The agent's address of the first machine in `NAME=ADDRESS,...`.
fn first_agent(machines: &str) -> Option<&str> {
    machines.split(',').next()?.split_once('=').map(|(_, a)| a.trim()).filter(|a| !a.is_empty())
}
