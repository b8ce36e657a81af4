//! vemu on Kubernetes: the `VemuLab` custom resource and what the operator decides for
//! one (sans-IO: [`decide`] takes what the cluster and the lab look like and returns the
//! step to take; `main.rs` watches the resources, runs the steps with the `vemu`
//! command and writes the status).
//!
//! A `VemuLab` holds a scenario (the same YAML as `vemu up` reads). The operator brings
//! it up across the machines that run a ready vemu agent (the DaemonSet of
//! `deploy/kubernetes`), each machine named after its Kubernetes node, and runs the
//! lab's controller in its own pod; deleting the resource takes the lab down on every
//! machine. A changed scenario is brought up anew; a lab whose controller was lost with
//! the operator's pod is taken over (`vemu attach`) while its agents still hold it.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use vemu_scenario::{Reach, Tenant, Trust};

/// Finalizer the operator puts on every VemuLab: the lab is taken down before the
/// resource goes.
pub const FINALIZER: &str = "vemu.dev/lab";
/// Label of the agents' pods (deploy/kubernetes/agent-daemonset.yaml).
pub const AGENT_LABEL: &str = "app.kubernetes.io/name=vemu-agent";

/// A lab of vemu's on the cluster.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "vemu.dev",
    version = "v1alpha1",
    kind = "VemuLab",
    namespaced,
    status = "VemuLabStatus",
    shortname = "vlab",
    printcolumn = r#"{"name": "Phase", "type": "string", "jsonPath": ".status.phase"}"#,
    printcolumn = r#"{"name": "Lab", "type": "string", "jsonPath": ".status.lab"}"#,
    printcolumn = r#"{"name": "Machines", "type": "string", "jsonPath": ".status.machines"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct VemuLabSpec {
    /// The scenario, as `vemu up` reads it (docs/scenario.md). Its `machines:` are
    /// replaced by the cluster's; `machine:` pins name Kubernetes nodes (dots as '-').
    pub scenario: String,
    /// The Kubernetes nodes to spread the lab over (each must run a ready agent);
    /// default: every node with a ready agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<Vec<String>>,
}

/// What the operator did with a VemuLab.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VemuLabStatus {
    /// `Pending` (waiting for agents), `Up`, or `Failed` (see `message`).
    pub phase: String,
    /// The lab's name for `vemu` (`NAMESPACE_NAME`).
    #[serde(default)]
    pub lab: String,
    /// The machines it was brought up on, as `vemu up --machines` took them.
    #[serde(default)]
    pub machines: String,
    #[serde(default)]
    pub message: String,
    /// Digest of the scenario and nodes the lab runs (a changed spec brings it up anew).
    #[serde(default)]
    pub digest: String,
    /// `Admitted`: whether the scenario uses only what its namespace may (a tenant's
    /// lab gets its own nodes, plus what a VemuLabPolicy allows); when not, the fields
    /// refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<LabCondition>,
}

/// A condition of a VemuLab (as Kubernetes' own: `kubectl wait --for=condition=...`).
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LabCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True` or `False`.
    pub status: String,
    pub reason: String,
    pub message: String,
    /// RFC 3339.
    #[serde(default)]
    pub last_transition_time: String,
}

/// What the VemuLabs of some namespaces may use beyond their own nodes. Cluster-scoped:
/// only a cluster administrator makes one (a tenant allowed to create VemuLabs in its
/// namespace cannot). Without one, a VemuLab gets its own nodes only.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "vemu.dev",
    version = "v1alpha1",
    kind = "VemuLabPolicy",
    shortname = "vlabpolicy",
    printcolumn = r#"{"name": "Namespaces", "type": "string", "jsonPath": ".spec.namespaces"}"#,
    printcolumn = r#"{"name": "Allow", "type": "string", "jsonPath": ".spec.allow"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct VemuLabPolicySpec {
    /// The namespaces whose VemuLabs it applies to; leave it out for every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<Vec<String>>,
    /// What they may use: `from` (files of the operator's pod copied into nodes:
    /// `files: {from:}`, `template:`), `trace` (movement files of the operator's pod),
    /// `host` and `external` (the machine, its NICs), `divert` (the machine's traffic),
    /// `shared-pids` (`isolation: none`).
    #[serde(default)]
    pub allow: Vec<Feature>,
    /// The registries their images may come from (`HOST[:PORT]`); without one, a
    /// VemuLab's nodes may name no registry image. A registry on the machine's loopback,
    /// link-local or own addresses must be listed by that address itself.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registries: Vec<String>,
    /// The largest image they may use, its download and its unpacked root each, bytes
    /// (4 GiB if no policy says; the largest any policy says otherwise). An image also
    /// counts against its lab's storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_max_bytes: Option<u64>,
}

/// A scenario feature a [`VemuLabPolicy`] can allow (vemu_scenario's [`Reach`]).
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Feature {
    From,
    Trace,
    Host,
    External,
    Divert,
    SharedPids,
}

impl Feature {
    pub fn reach(self) -> Reach {
        match self {
            Feature::From => Reach::From,
            Feature::Trace => Reach::Trace,
            Feature::Host => Reach::Host,
            Feature::External => Reach::External,
            Feature::Divert => Reach::Divert,
            Feature::SharedPids => Reach::SharedPids,
        }
    }
}

/// What the VemuLabs of `namespace` may use: the union of what the policies that apply
/// to it allow.
pub fn trust_of(namespace: &str, policies: &[VemuLabPolicySpec]) -> Trust {
    let applying: Vec<&VemuLabPolicySpec> = policies
        .iter()
        .filter(|p| p.namespaces.as_ref().is_none_or(|n| n.iter().any(|n| n == namespace)))
        .collect();
    let mut allow: Vec<Reach> =
        applying.iter().flat_map(|p| p.allow.iter().map(|f| f.reach())).collect();
    allow.sort();
    allow.dedup();
    let mut registries: Vec<String> = Vec::new();
    for r in applying.iter().flat_map(|p| &p.registries) {
        if !registries.contains(r) {
            registries.push(r.clone());
        }
    }
    let image_max_bytes = applying
        .iter()
        .filter_map(|p| p.image_max_bytes)
        .max()
        .unwrap_or(vemu_scenario::DEFAULT_TENANT_IMAGE_BYTES);
    Trust::Tenant(Tenant { allow, registries, image_max_bytes })
}

/// `vemu up`'s arguments for a tenant allowed `trust`: `--tenant LIST`, and the
/// registries and image size its policies give.
pub fn tenant_args(trust: &Trust) -> Vec<String> {
    let mut args = vec!["--tenant".to_string(), trust.tenant_list()];
    if let Trust::Tenant(t) = trust {
        if !t.registries.is_empty() {
            args.push(format!("--registries={}", t.registries.join(",")));
        }
        args.push(format!("--image-max={}B", t.image_max_bytes));
    }
    args
}

/// The scenario checked as `vemu up --tenant` will load it, on `machines`
/// (`NAME=ADDRESS,...`), without reading any file it is not allowed to: `Err` with what
/// is wrong, each refused field named.
pub fn admit(spec: &VemuLabSpec, lab: &str, machines: &str, trust: &Trust) -> Result<(), Refusal> {
    let machines = vemu_scenario::Machine::parse_list(machines)
        .map_err(|e| Refusal { reason: "InvalidScenario", message: format!("machines: {e}") })?;
    // `from:` and `trace:` (when allowed) are read where `vemu up` reads them: relative
    // to the scenario's file, which the operator writes in its temporary directory.
    let base = std::env::temp_dir();
    match vemu_scenario::load_str_as(
        &spec.scenario,
        "spec.scenario",
        lab,
        Some(lab),
        Some(machines),
        Some(&base),
        trust,
    ) {
        Ok(_) => Ok(()),
        Err(e) => {
            let refused: Vec<_> =
                e.errors.iter().filter(|e| e.message.starts_with(vemu_scenario::REFUSED)).collect();
            let (reason, shown) = match refused.is_empty() {
                true => ("InvalidScenario", e.errors.iter().collect::<Vec<_>>()),
                false => ("Refused", refused),
            };
            Err(Refusal {
                reason,
                message: format!(
                    "spec.scenario: {}",
                    shown
                        .iter()
                        .map(|e| format!("{} (line {}): {}", e.field, e.line, e.message))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            })
        }
    }
}

/// Why a VemuLab's scenario is not brought up: the `Admitted` condition's reason
/// (`Refused`: it uses what its namespace may not; `InvalidScenario`) and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub reason: &'static str,
    pub message: String,
}

/// A pod of the agents' DaemonSet, as the decision needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Agent {
    /// The Kubernetes node it runs on.
    pub node: String,
    /// Its address (the node's: the agents use the host network).
    pub host_ip: Option<String>,
    /// Running, and its readiness probe passes.
    pub ready: bool,
}

/// What to do for a VemuLab now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Bring the lab up: `vemu up SCENARIO --name LAB --machines MACHINES`.
    Up { lab: String, machines: String },
    /// The running lab has another spec: down, then up.
    Recreate { lab: String, machines: String },
    /// Its controller is gone (the operator's pod restarted) but it was up: take it
    /// over with `vemu attach` (and bring it up anew if that fails).
    Attach { lab: String, machines: String },
    /// Up as specified: nothing to do.
    Keep,
    /// Not possible yet (no ready agent, a named node without one): try again later.
    Wait(String),
    /// Never possible as specified: the status says why.
    Invalid(String),
}

impl Step {
    /// The step in words, for the operator's log.
    pub fn describe(&self) -> String {
        match self {
            Step::Up { lab, machines } => format!("bringing lab {lab} up on {machines}"),
            Step::Recreate { lab, machines } => {
                format!("the spec changed: bringing lab {lab} up anew on {machines}")
            }
            Step::Attach { lab, machines } => {
                format!("lab {lab} lost its controller: taking it over on {machines}")
            }
            Step::Keep => "up as specified, kept".into(),
            Step::Wait(why) => format!("waiting: {why}"),
            Step::Invalid(why) => format!("invalid: {why}"),
        }
    }
}

/// A stable digest of a spec (FNV-1a, 64 bits, as hex): the same spec gives the same
/// digest in every version of the operator.
pub fn digest(spec: &VemuLabSpec) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let text = serde_json::to_string(spec).unwrap_or_default();
    for b in text.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// vemu's name of a machine for Kubernetes node `node`: dots become '-', and it must
/// then be a vemu machine name (1-32 letters, digits, '-' or '_', starting with a letter
/// or digit).
pub fn machine_name(node: &str) -> Result<String, String> {
    let m = node.replace('.', "-");
    let ok = !m.is_empty()
        && m.len() <= 32
        && m.starts_with(|c: char| c.is_ascii_alphanumeric())
        && m.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    match ok {
        true => Ok(m),
        false => Err(format!("node '{node}' does not make a vemu machine name (1-32 letters, digits, '-' or '_' once dots become '-')")),
    }
}

/// vemu's name of the lab of VemuLab `name` in `namespace`: `NAMESPACE_NAME`. Neither
/// a namespace nor a resource's name can hold '_' in Kubernetes, so two VemuLabs never
/// map to one lab (with '-', `team`/`x-prod` and `team-x`/`prod` did).
pub fn lab_name(namespace: &str, name: &str) -> Result<String, String> {
    if namespace.contains('_') || name.contains('_') {
        return Err(format!("'{namespace}/{name}': a Kubernetes name holds no '_'"));
    }
    let lab = format!("{namespace}_{name}");
    let ok =
        lab.len() <= 32 && lab.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    match ok {
        true => Ok(lab),
        false => Err(format!("the lab's name '{lab}' (NAMESPACE_NAME) must be at most 32 letters, digits, '-' or '_'")),
    }
}

/// The step for VemuLab `name` in `namespace` given the agents and the lab's state:
/// `status` as last written, `running`: whether `vemu status` reaches its controller.
pub fn decide(
    namespace: &str,
    name: &str,
    spec: &VemuLabSpec,
    status: Option<&VemuLabStatus>,
    agents: &[Agent],
    running: bool,
) -> Step {
    let lab = match lab_name(namespace, name) {
        Ok(l) => l,
        Err(e) => return Step::Invalid(e),
    };
    if spec.scenario.trim().is_empty() {
        return Step::Invalid("spec.scenario is empty".into());
    }
    let ready: Vec<&Agent> = agents.iter().filter(|a| a.ready && a.host_ip.is_some()).collect();
    let chosen: Vec<&Agent> = match &spec.nodes {
        Some(nodes) => {
            if nodes.is_empty() {
                return Step::Invalid(
                    "spec.nodes is empty (leave it out to use every node with an agent)".into(),
                );
            }
            let mut v = Vec::new();
            for n in nodes {
                match ready.iter().find(|a| &a.node == n) {
                    Some(a) => v.push(*a),
                    None => return Step::Wait(format!("node '{n}' has no ready vemu agent")),
                }
            }
            v
        }
        None => ready,
    };
    if chosen.is_empty() {
        return Step::Wait("no node has a ready vemu agent (is the DaemonSet of deploy/kubernetes running, and are nodes labelled vemu.dev/agent=true?)".into());
    }
    let mut machines: Vec<(String, &str)> = Vec::new();
    for a in &chosen {
        let m = match machine_name(&a.node) {
            Ok(m) => m,
            Err(e) => return Step::Invalid(e),
        };
        if machines.iter().any(|(x, _)| *x == m) {
            return Step::Invalid(format!("two nodes make the machine name '{m}'"));
        }
        machines.push((m, a.host_ip.as_deref().unwrap_or_default()));
    }
    machines.sort();
    let machines = machines.iter().map(|(m, ip)| format!("{m}={ip}")).collect::<Vec<_>>().join(",");
    let same = status.is_some_and(|s| s.digest == digest(spec) && s.lab == lab);
    match (running, same, status.is_some_and(|s| s.phase == "Up")) {
        (true, true, true) => Step::Keep,
        // Running, but not as the spec says (another spec's lab), or its last bringing
        // up failed (what runs may be what an earlier attempt left).
        (true, _, _) => Step::Recreate { lab, machines },
        // Up, as last known, on the machines it was brought up on.
        (false, true, true) => {
            Step::Attach { lab, machines: status.map(|s| s.machines.clone()).unwrap_or(machines) }
        }
        (false, _, _) => Step::Up { lab, machines },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(node: &str, ip: &str, ready: bool) -> Agent {
        Agent { node: node.into(), host_ip: (!ip.is_empty()).then(|| ip.to_string()), ready }
    }

    fn spec(nodes: Option<&[&str]>) -> VemuLabSpec {
        VemuLabSpec {
            scenario: "nodes: {a: {}}\n".into(),
            nodes: nodes.map(|n| n.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn up_status(s: &VemuLabSpec, lab: &str, machines: &str) -> VemuLabStatus {
        VemuLabStatus {
            phase: "Up".into(),
            lab: lab.into(),
            machines: machines.into(),
            message: String::new(),
            digest: digest(s),
            conditions: Vec::new(),
        }
    }

    #[test]
    fn a_new_lab_comes_up_on_every_ready_agent_named_after_its_node() {
        let agents = [
            agent("w2.example.org", "10.0.0.12", true),
            agent("w1", "10.0.0.11", true),
            agent("w3", "10.0.0.13", false),
            agent("w4", "", true),
        ];
        let s = spec(None);
        assert_eq!(
            decide("labs", "ring", &s, None, &agents, false),
            Step::Up {
                lab: "labs_ring".into(),
                machines: "w1=10.0.0.11,w2-example-org=10.0.0.12".into()
            }
        );
        // Only the nodes named, each with a ready agent, else wait for it.
        assert_eq!(
            decide("labs", "ring", &spec(Some(&["w1"])), None, &agents, false),
            Step::Up { lab: "labs_ring".into(), machines: "w1=10.0.0.11".into() }
        );
        assert_eq!(
            decide("labs", "ring", &spec(Some(&["w1", "w3"])), None, &agents, false),
            Step::Wait("node 'w3' has no ready vemu agent".into())
        );
        assert!(
            matches!(decide("labs", "ring", &s, None, &[], false), Step::Wait(m) if m.contains("no node has a ready vemu agent"))
        );
    }

    #[test]
    fn a_running_lab_is_kept_recreated_when_its_spec_changes_and_taken_over_when_its_controller_is_gone(
    ) {
        let agents = [agent("w1", "10.0.0.11", true)];
        let s = spec(None);
        let st = up_status(&s, "labs_ring", "w1=10.0.0.11");
        assert_eq!(decide("labs", "ring", &s, Some(&st), &agents, true), Step::Keep);
        let changed = VemuLabSpec { scenario: "nodes: {a: {}, b: {}}\n".into(), nodes: None };
        assert_eq!(
            decide("labs", "ring", &changed, Some(&st), &agents, true),
            Step::Recreate { lab: "labs_ring".into(), machines: "w1=10.0.0.11".into() }
        );
        // Up when last seen, its controller gone (the operator's pod restarted): attach,
        // on the machines it was brought up on.
        let agents2 = [agent("w1", "10.0.0.11", true), agent("w2", "10.0.0.12", true)];
        assert_eq!(
            decide("labs", "ring", &s, Some(&st), &agents2, false),
            Step::Attach { lab: "labs_ring".into(), machines: "w1=10.0.0.11".into() }
        );
        // Failed earlier: tried again.
        let failed = VemuLabStatus { phase: "Failed".into(), ..st.clone() };
        assert!(matches!(
            decide("labs", "ring", &s, Some(&failed), &agents, false),
            Step::Up { .. }
        ));
        // Failed earlier, yet a lab of its name runs (what an earlier attempt left, or a
        // lab whose `down` did not finish): not kept, but brought up anew.
        assert_eq!(
            decide("labs", "ring", &s, Some(&failed), &agents, true),
            Step::Recreate { lab: "labs_ring".into(), machines: "w1=10.0.0.11".into() }
        );
    }

    #[test]
    fn two_vemulabs_never_map_to_one_lab() {
        assert_eq!(lab_name("team", "x-prod"), Ok("team_x-prod".into()));
        assert_eq!(lab_name("team-x", "prod"), Ok("team-x_prod".into()));
        // Kubernetes names hold no '_' ...
        assert!(lab_name("team", "x_prod").is_err());
        // ... and what vemu cannot name is refused.
        assert!(lab_name("team", "x.prod").is_err());
    }

    #[test]
    fn what_can_never_work_says_why() {
        let agents = [agent("w1", "10.0.0.11", true)];
        assert!(
            matches!(decide("a-very-long-namespace-name", "and-a-long-lab", &spec(None), None, &agents, false), Step::Invalid(m) if m.contains("at most 32"))
        );
        assert_eq!(
            decide(
                "labs",
                "x",
                &VemuLabSpec { scenario: " \n".into(), nodes: None },
                None,
                &agents,
                false
            ),
            Step::Invalid("spec.scenario is empty".into())
        );
        assert!(
            matches!(decide("labs", "x", &spec(Some(&[])), None, &agents, false), Step::Invalid(m) if m.contains("spec.nodes is empty"))
        );
        let clash = [agent("w.1", "10.0.0.1", true), agent("w-1", "10.0.0.2", true)];
        assert_eq!(
            decide("labs", "x", &spec(None), None, &clash, false),
            Step::Invalid("two nodes make the machine name 'w-1'".into())
        );
        assert!(
            matches!(decide("labs", "x", &spec(None), None, &[agent("-bad", "10.0.0.1", true)], false), Step::Invalid(m) if m.contains("node '-bad'"))
        );
    }

    #[test]
    fn the_digest_is_stable_and_follows_the_spec() {
        // (A fixed value: an operator upgrade must not bring every lab up anew.)
        assert_eq!(digest(&spec(None)), digest(&spec(None)));
        assert_ne!(digest(&spec(None)), digest(&spec(Some(&["w1"]))));
        assert_eq!(
            digest(&VemuLabSpec { scenario: String::new(), nodes: None }),
            "639c6eb51c8b6a3d"
        );
    }

    /// The CRDs in deploy/kubernetes are the ones the operator's types make
    /// (`vemu-operator crd KIND > deploy/kubernetes/KIND-crd.json` after a change).
    #[test]
    fn the_crds_in_the_repository_are_the_types_ones() {
        use kube::CustomResourceExt;
        for (kind, crd) in [("vemulab", VemuLab::crd()), ("vemulabpolicy", VemuLabPolicy::crd())] {
            let path =
                format!("{}/../../deploy/kubernetes/{kind}-crd.json", env!("CARGO_MANIFEST_DIR"));
            let file: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&path).expect("the CRD file"))
                    .expect("JSON");
            assert_eq!(
                file,
                serde_json::to_value(crd).unwrap(),
                "regenerate it: vemu-operator crd {kind} > deploy/kubernetes/{kind}-crd.json"
            );
        }
    }

    /// Issue 39: a tenant's VemuLab gets its own nodes, plus what the policies for its
    /// namespace allow; what it may not use is refused naming its fields.
    #[test]
    fn a_vemulab_gets_what_the_policies_for_its_namespace_allow() {
        let policies = [
            VemuLabPolicySpec {
                namespaces: Some(vec!["lab-admins".into()]),
                allow: vec![Feature::Host, Feature::Divert],
                registries: vec!["reg.example:5000".into()],
                image_max_bytes: Some(8 << 30),
            },
            VemuLabPolicySpec {
                namespaces: None,
                allow: vec![Feature::Trace],
                registries: vec![],
                image_max_bytes: None,
            },
        ];
        let tenant = |allow: Vec<Reach>, registries: Vec<&str>, image_max_bytes: u64| {
            let registries = registries.into_iter().map(String::from).collect();
            Trust::Tenant(Tenant { allow, registries, image_max_bytes })
        };
        let four = vemu_scenario::DEFAULT_TENANT_IMAGE_BYTES;
        assert_eq!(trust_of("team", &policies), tenant(vec![Reach::Trace], vec![], four));
        assert_eq!(
            trust_of("lab-admins", &policies),
            tenant(
                vec![Reach::Trace, Reach::Host, Reach::Divert],
                vec!["reg.example:5000"],
                8 << 30
            )
        );
        assert_eq!(trust_of("team", &[]), tenant(vec![], vec![], four));
        assert_eq!(
            tenant_args(&trust_of("team", &[])),
            ["--tenant", "none", "--image-max=4294967296B"]
        );
        assert_eq!(
            tenant_args(&trust_of("lab-admins", &policies)),
            [
                "--tenant",
                "trace,host,divert",
                "--registries=reg.example:5000",
                "--image-max=8589934592B"
            ]
        );
        let spec = |y: &str| VemuLabSpec { scenario: y.into(), nodes: None };
        let m = "w1=10.0.0.1,w2=10.0.0.2";
        assert_eq!(
            admit(
                &spec("nodes: {a: {}, b: {machine: w2}}\nlinks: [{endpoints: [a, b]}]\n"),
                "team_x",
                m,
                &tenant(vec![], vec![], four)
            ),
            Ok(())
        );
        let r = admit(&spec("nodes:\n  a: {isolation: none}\n  b:\n    files: {/etc/t: {from: /etc/vemu/agent-token/token}}\n"), "team_x", m, &tenant(vec![], vec![], four)).unwrap_err();
        assert_eq!(r.reason, "Refused");
        assert!(
            r.message.starts_with("spec.scenario: nodes.a.isolation (line 2): refused")
                && r.message.contains("; nodes.b.files./etc/t.from (line 4): refused"),
            "{}",
            r.message
        );
        assert!(!r.message.contains("cannot read"), "nothing refused is read: {}", r.message);
        let r =
            admit(&spec("nodes: {a: {bogus: 1}}\n"), "team_x", m, &tenant(vec![], vec![], four))
                .unwrap_err();
        assert_eq!(r.reason, "InvalidScenario");
        assert!(r.message.contains("nodes.a.bogus"), "{}", r.message);
    }
}
