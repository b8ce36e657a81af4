//! On a real Kubernetes cluster: kubelets with containerd and runc run vemu's image.
//!
//! Each machine of [`Machines`] becomes a Kubernetes node: Debian's containerd (with
//! runc and the CNI bridge plugin), kube-proxy and a kubelet (built from the
//! k8s.io/kubernetes module, as the API server is), in the machine's network namespace
//! and in mount and PID namespaces of their own (their /run, /var/log and cgroup root:
//! two nodes side by side on one computer, each dying whole with its PID namespace).
//! The control plane (etcd, API server, scheduler, controller manager) runs in the
//! controller's namespace, and a registry there serves the images built here
//! (scripts/image.sh, scripts/pause-image.sh), which the nodes pull as any cluster's do.

use super::kubernetes::{cluster_token, lab_status, Kube};
use super::*;

/// Kubernetes nodes on machines of `m`: a process each, the PID namespace's first.
struct Nodes {
    tag: String,
    names: Vec<String>,
    procs: Vec<Child>,
    registry: Child,
}

/// The cgroup hierarchies of this machine (v1 controllers, the named systemd one and the
/// cgroup2 one), where a node's cgroup root is made.
fn cgroup_hierarchies() -> Vec<std::path::PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() > 2 && (f[2] == "cgroup" || f[2] == "cgroup2")).then(|| f[1].into())
        })
        .collect()
}

/// The name of node `name`'s cgroup root (of machines `tag`), in every hierarchy.
fn cgroup_root(tag: &str, name: &str) -> String {
    format!("vemu-test-{tag}-{name}")
}

impl Nodes {
    /// The registry on the controller's address, holding vemu's image (`vemu:latest`)
    /// and the pod sandbox image (`pause:3.10`), then a node on each machine of `m`.
    fn start(m: &Machines, k: &Kube) -> Nodes {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
        let registry_address = format!("10.{}.0.254:5000", m.net);
        let reg_dir = k.dir.join("registry");
        std::fs::create_dir_all(&reg_dir).unwrap();
        std::fs::write(
            reg_dir.join("config.yml"),
            format!(
                "version: 0.1\nstorage: {{filesystem: {{rootdirectory: {}}}}}\nhttp: {{addr: '{registry_address}'}}\n",
                reg_dir.join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(k.dir.join("registry.log")).unwrap();
        let registry = Command::new("ip")
            .args(["netns", "exec", &k.ctl, "docker-registry", "serve"])
            .arg(reg_dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("docker-registry (scripts/setup.sh installs it)");
        let mut nodes =
            Nodes { tag: m.tag.clone(), names: m.names.clone(), procs: Vec::new(), registry };
        for (image, at) in [
            (format!("oci:{root}/target/image/vemu:latest"), "vemu:latest"),
            (format!("oci-archive:{root}/target/image/pause.tar"), "pause:3.10"),
        ] {
            eventually(20, "the image is in the registry", || {
                sh(&format!("ip netns exec {} skopeo copy --quiet --dest-tls-verify=false {image} docker://{registry_address}/{at}", k.ctl))
                    .status
                    .success()
            });
        }
        for i in 0..m.names.len() {
            nodes.spawn(m, k, i, &registry_address);
        }
        nodes
    }

    /// Node `i`: containerd, kube-proxy and the kubelet, with their configuration.
    fn spawn(&mut self, m: &Machines, k: &Kube, i: usize, registry: &str) {
        let name = &m.names[i];
        let ip = m.address(i);
        let dir = k.dir.join(format!("node-{name}"));
        std::fs::create_dir_all(dir.join("cni")).unwrap();
        let d = dir.display();
        let net = m.net;
        let cgroup_root = cgroup_root(&m.tag, name);
        for h in cgroup_hierarchies() {
            let c = h.join(&cgroup_root);
            let _ = std::fs::create_dir_all(&c);
            if h.ends_with("cpuset") {
                for f in ["cpuset.cpus", "cpuset.mems"] {
                    let _ = std::fs::write(c.join(f), std::fs::read(h.join(f)).unwrap());
                }
            }
        }
        std::fs::write(
            dir.join("containerd.toml"),
            format!(
                r#"version = 2
root = "{d}/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  restrict_oom_score_adj = true
  sandbox_image = "{registry}/pause:3.10"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{d}/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."{registry}"]
    endpoint = ["http://{registry}"]
"#
            ),
        )
        .unwrap();
        // The pod network: a bridge on each node, its pods' addresses 10.NET.(128+i).0/24,
        // their traffic leaving the node masqueraded as the node's.
        std::fs::write(
            dir.join("cni/10-vemu-test.conflist"),
            serde_json::json!({"cniVersion": "1.0.0", "name": "vemu-test", "plugins": [{"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "ipam": {"type": "host-local", "dataDir": format!("{d}/cni-ipam"), "ranges": [[{"subnet": format!("10.{net}.{}.0/24", 128 + i)}]], "routes": [{"dst": "0.0.0.0/0"}]}}]}).to_string(),
        )
        .unwrap();
        let kubeconfig =
            k.write_config(&format!("node-{name}"), &cluster_token(&format!("system:node:{name}")));
        let proxy_config = k.write_config("proxy", &cluster_token("system:kube-proxy"));
        std::fs::write(
            dir.join("kubelet.yaml"),
            format!(
                "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {ip}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup_root}
failSwapOn: false
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {kd}/kubelet-ca.crt}}
authorization: {{mode: Webhook}}
evictionHard: {{memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
resolvConf: /etc/resolv.conf
",
                kd = k.dir.display()
            ),
        )
        .unwrap();
        std::fs::write(
            dir.join("proxy.yaml"),
            format!(
                "apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {{kubeconfig: {}}}
hostnameOverride: {name}
mode: nftables
clusterCIDR: 10.{net}.128.0/17
conntrack: {{maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}}
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
",
                proxy_config.display()
            ),
        )
        .unwrap();
        // The machine forwards its pods' traffic; the Services' addresses are reached
        // through it (kube-proxy translates them).
        ok(&format!("ip netns exec {0}-{name} sysctl -qw net.ipv4.ip_forward=1 && ip -n {0}-{name} route replace 10.{net}.200.0/24 dev eth0", m.tag));
        let bin = Kube::bin();
        // /run (its containerd, its namespaces, vemu's state) and /var/log are the node's
        // own, shared so that the agents' Bidirectional mounts reach back; the kubelet's
        // directory too. The machine's mounts under /run go first: hidden under the new
        // /run they would still be found by path (containerd found the machine's
        // /run/netns, not shared, and refused the agents' Bidirectional mount).
        let script = format!(
            "set -e
awk '$5 ~ \"^/run/\" {{print $5}}' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l
mount -t tmpfs tmpfs /run && mkdir -p /run/containerd /run/netns /run/vemu /run/lock && mount --make-shared /run
mount -t tmpfs tmpfs /var/log && mkdir -p /var/log/pods /var/log/containers /var/log/vemu
mkdir -p {d}/kubelet && mount --bind {d}/kubelet {d}/kubelet && mount --make-shared {d}/kubelet
containerd -c {d}/containerd.toml > {d}/containerd.log 2>&1 &
while [ ! -S /run/containerd/containerd.sock ]; do sleep 0.1; done
{bin} proxy --config {d}/proxy.yaml > {d}/proxy.log 2>&1 &
exec {bin} kubelet --config {d}/kubelet.yaml --kubeconfig {kubeconfig} --root-dir {d}/kubelet --hostname-override {name} --node-ip {ip} > {d}/kubelet.log 2>&1",
            kubeconfig = kubeconfig.display()
        );
        // A PID namespace too: everything of the node dies with its first process.
        let child = m.spawn_in(i, &["-p", "-f", "--kill-child", "--mount-proc"], &script);
        self.procs.push(child);
    }

    /// A command in node `i`'s mount and network namespaces (its containerd's world).
    fn on(&self, i: usize, cmd: &str) -> Output {
        let pid = self.procs[i].id();
        Command::new("nsenter")
            .args(["-t", &pid.to_string(), "-m", "-n", "sh", "-c", cmd])
            .output()
            .unwrap()
    }

    /// What node `i` holds of labs and pods: vemu's state and namespaces (the pods'
    /// own network namespaces, `cni-…`, left out), running containers, pods' cgroups.
    fn leftovers(&self, i: usize, pods_too: bool) -> String {
        let mut cmd =
            "ls -A /run/vemu /run/netns | grep -v :$ | grep -v '^$' | grep -v '^cni-' || true"
                .to_string();
        if pods_too {
            cmd += "; ctr -n k8s.io tasks ls -q; ls /run/netns";
        }
        let mut out = text(&self.on(i, &cmd)).trim().to_string();
        if pods_too {
            for h in cgroup_hierarchies() {
                let root = h.join(cgroup_root(&self.tag, &self.names[i]));
                for qos in ["kubepods", "kubepods/burstable", "kubepods/besteffort"] {
                    for e in std::fs::read_dir(root.join(qos)).into_iter().flatten().flatten() {
                        let n = e.file_name().to_string_lossy().to_string();
                        if n.starts_with("pod") && e.path().is_dir() {
                            out += &format!("\n{}", e.path().display());
                        }
                    }
                }
            }
        }
        out.trim().to_string()
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for p in self.procs.iter_mut().chain([&mut self.registry]) {
            let _ = p.kill();
            let _ = p.wait();
        }
        // The PID namespaces are gone, and every process of the pods with them: their
        // cgroups are empty, deepest first.
        for i in 0..self.names.len() {
            for h in cgroup_hierarchies() {
                let root = h.join(cgroup_root(&self.tag, &self.names[i]));
                if root.exists() {
                    for _ in 0..50 {
                        let o = sh(&format!(
                            "find {} -depth -type d -exec rmdir {{}} \\; 2>&1",
                            root.display()
                        ));
                        if !root.exists() || o.stdout.is_empty() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        }
    }
}

/// What a user of a real cluster does (docs/kubernetes.md), on two real kubelets: the
/// image built here pushed to the cluster's registry, the agents' token as a Secret,
/// machines labelled, `helm install` with the image's digest. The DaemonSet's agents
/// and the operator's Deployment are started by the kubelets from that image; the
/// repository's example VemuLab comes up across both agents (RTT from inside the lab,
/// by `kubectl exec` into the operator's pod); the operator's container killed (the
/// kubelet restarts it) and its pod deleted (the Deployment makes another on either
/// node): the lab is taken over each time; a changed spec changes it; deleting the
/// VemuLab leaves nothing of it on the nodes, and `helm uninstall` nothing of the pods.
/// Before the lab: a VemuLab naming a node without an agent waits, and the tenant rules
/// hold for a tenant's ServiceAccount.
#[test]
fn kubelets_run_vemus_image_and_its_operator_runs_a_vemulab_across_them() {
    let _g = serial();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    for script in ["image.sh", "pause-image.sh"] {
        let o = Command::new("bash").arg(format!("{root}/scripts/{script}")).output().unwrap();
        assert!(o.status.success(), "{script}: {}", text(&o));
    }
    let digest = std::fs::read_to_string(format!("{root}/target/image/digest")).unwrap();
    let digest = digest.trim();
    let m = Machines::start_bare("kl", 93, &["w1", "w2"]);
    let k = &Kube::start_with(&m, true);
    let nodes = Nodes::start(&m, k);
    let node_log = |i: usize| {
        std::fs::read_to_string(k.dir.join(format!("node-{}/kubelet.log", m.names[i])))
            .unwrap_or_default()
    };
    // What the cluster says of itself, for a wait that timed out.
    let state = || {
        let pods = k.kubectl(&["get", "pods", "-A", "-o", "wide"], "");
        let events = k.kubectl(&["get", "events", "-A", "--sort-by=.lastTimestamp"], "");
        let tail = |t: String| {
            t.lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n")
        };
        let labs = k.kubectl(
            &[
                "get",
                "vemulabs",
                "-A",
                "-o",
                "jsonpath={range .items[*]}{.metadata.name}: {.status}{\"\\n\"}{end}",
            ],
            "",
        );
        let operator = k.kubectl(&["-n", "vemu", "logs", "deploy/vemu-operator", "--tail=30"], "");
        // Each node's kubelet and containerd, last lines (a node that never became Ready).
        let mut nodes = String::new();
        for name in &m.names {
            for log in ["kubelet", "containerd"] {
                let t = std::fs::read_to_string(k.dir.join(format!("node-{name}/{log}.log")))
                    .unwrap_or_default();
                let last: Vec<&str> = t.lines().rev().take(15).collect();
                nodes += &format!("--- {name} {log}.log (last lines)\n");
                nodes.extend(last.into_iter().rev().map(|l| format!("{l}\n")));
            }
        }
        format!(
            "{}\n{}\n{}\n{}\n{nodes}",
            text(&pods),
            tail(text(&events)),
            text(&labs),
            text(&operator)
        )
    };
    let wait = |secs: u64, what: &str, cond: &mut dyn FnMut() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while !cond() {
            assert!(Instant::now() < deadline, "{what}: not within {secs} s\n{}", state());
            std::thread::sleep(Duration::from_millis(500));
        }
    };
    wait(120, "both kubelets' nodes are Ready", &mut || {
        let o = k.kubectl(
            &["get", "nodes", "-o", r#"jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status} {end}"#],
            "",
        );
        text(&o).split_whitespace().filter(|s| s.ends_with("=True")).count() == 2
    });
    k.must(&["label", "node", "w1", "w2", "vemu.dev/agent=true"], "");

    k.must(&["create", "namespace", "vemu"], "");
    k.must(&["label", "namespace", "vemu", "pod-security.kubernetes.io/enforce=privileged"], "");
    k.must(
        &[
            "-n",
            "vemu",
            "create",
            "secret",
            "generic",
            "vemu-agent-token",
            &format!("--from-file=token={}", m.token_file.display()),
        ],
        "",
    );
    k.helm(&[
        "install",
        "vemu",
        &format!("{root}/deploy/helm/vemu"),
        "-n",
        "vemu",
        "--set",
        &format!("image.repository=10.{}.0.254:5000/vemu", m.net),
        "--set",
        &format!("image.digest={digest}"),
    ]);
    let pods = || -> Vec<serde_json::Value> {
        let o = k.kubectl(&["-n", "vemu", "get", "pods", "-o", "json"], "");
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default()["items"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let ready = |p: &serde_json::Value| {
        p["status"]["phase"] == "Running"
            && p["metadata"]["deletionTimestamp"].is_null()
            && p["status"]["conditions"]
                .as_array()
                .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    };
    let running = |prefix: &str| -> Vec<serde_json::Value> {
        pods()
            .into_iter()
            .filter(|p| {
                p["metadata"]["name"].as_str().unwrap_or_default().starts_with(prefix) && ready(p)
            })
            .collect()
    };
    wait(180, "the agents and the operator are running", &mut || {
        running("vemu-agent-").len() == 2 && running("vemu-operator-").len() == 1
    });
    // Started by the kubelets, from the image built here (its digest), one agent a node.
    let agents = running("vemu-agent-");
    let agent_nodes: std::collections::BTreeSet<&str> =
        agents.iter().map(|p| p["spec"]["nodeName"].as_str().unwrap()).collect();
    assert_eq!(agent_nodes.into_iter().collect::<Vec<_>>(), ["w1", "w2"]);
    for p in agents.iter().chain(&running("vemu-operator-")) {
        let id = p["status"]["containerStatuses"][0]["imageID"].as_str().unwrap_or_default();
        assert!(id.ends_with(&format!("@{digest}")), "{id} is not the image built here ({digest})");
    }

    let operator_log = || {
        let o = k.kubectl(&["-n", "vemu", "logs", "deploy/vemu-operator", "--tail=200"], "");
        text(&o)
    };
    // `kubectl exec` into the operator's pod: `vemu ARGS` there.
    let in_operator = |args: &[&str]| -> Output {
        let mut a = vec!["-n", "vemu", "exec", "deploy/vemu-operator", "--", "vemu"];
        a.extend_from_slice(args);
        k.kubectl(&a, "")
    };
    super::kubernetes::a_lab_without_an_agent_waits(k, &operator_log);
    let leftovers = |i: usize| nodes.leftovers(i, false);
    super::kubernetes::tenants_get_what_the_administrator_allows(
        k,
        &super::kubernetes::OperatorView {
            vemu: &in_operator,
            log: &operator_log,
            leftovers: &leftovers,
        },
    );

    let example =
        std::fs::read_to_string(format!("{root}/deploy/kubernetes/examples/vemulab-chain.yaml"))
            .unwrap();
    k.must(&["apply", "-f", "-"], &example);
    wait(120, "the example VemuLab is up", &mut || {
        lab_status(k, "chain")["phase"] == "Up" || lab_status(k, "chain")["phase"] == "Failed"
    });
    let st = lab_status(k, "chain");
    let machines = format!("w1=10.{0}.0.1,w2=10.{0}.0.2", m.net);
    assert_eq!(
        (st["phase"].as_str(), st["lab"].as_str(), st["machines"].as_str()),
        (Some("Up"), Some("default_chain"), Some(machines.as_str())),
        "{st} {}",
        operator_log()
    );
    // The lab's RTT n1 → n3 now, by `kubectl exec`: its ping's output.
    let ping = || {
        in_operator(&[
            "exec",
            "--lab",
            "default_chain",
            "n1",
            "--",
            "ping",
            "-c",
            "5",
            "-i",
            "0.2",
            "-W",
            "2",
            "n3",
        ])
    };
    let rtt = || min_rtt_ms(&ping());
    let r = rtt();
    assert!((40.0..42.0).contains(&r), "RTT {r} ms for 2 x 10 ms set");
    let vs: serde_json::Value = serde_json::from_slice(
        &in_operator(&["status", "--lab", "default_chain", "--json"]).stdout,
    )
    .unwrap_or_default();
    let used: std::collections::BTreeSet<&str> = vs["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["machine"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(used.len(), 2, "the lab spans both agents: {vs}");

    // The operator's container dies (killed on its node, as an OOM kill would): the
    // kubelet starts it again in the same pod (its /run/vemu, an emptyDir, kept), and the
    // new container serves the lab again.
    let op = running("vemu-operator-").remove(0);
    let op_name = op["metadata"]["name"].as_str().unwrap().to_string();
    let op_node = m.names.iter().position(|n| op["spec"]["nodeName"] == n.as_str()).unwrap();
    let cid = op["status"]["containerStatuses"][0]["containerID"].as_str().unwrap();
    let cid = cid.trim_start_matches("containerd://");
    let o = nodes.on(op_node, &format!("ctr -n k8s.io tasks kill -s SIGKILL {cid}"));
    assert!(o.status.success(), "{}", text(&o));
    wait(90, "the restarted operator serves the lab again", &mut || {
        let p = pods().into_iter().find(|p| p["metadata"]["name"] == op_name.as_str());
        p.is_some_and(|p| ready(&p) && p["status"]["containerStatuses"][0]["restartCount"] == 1)
            && lab_status(k, "chain")["message"]
                .as_str()
                .unwrap_or_default()
                .contains("served again")
            && in_operator(&["status", "--lab", "default_chain"]).status.success()
    });
    let r = rtt();
    assert!((40.0..42.0).contains(&r), "RTT {r} ms after the container's restart");

    // The pod deleted: the Deployment's new pod (an empty /run/vemu, on either node)
    // takes the lab over from its agents.
    k.must(&["-n", "vemu", "delete", "pod", &op_name, "--wait=false"], "");
    // The old operator stops on SIGTERM (not after the 30 s grace period, acting on the
    // lab beside the new one all that time).
    wait(15, "the deleted operator pod is gone", &mut || {
        !pods().iter().any(|p| p["metadata"]["name"] == op_name.as_str())
    });
    wait(120, "a new operator pod has the lab", &mut || {
        running("vemu-operator-").iter().any(|p| p["metadata"]["name"] != op_name.as_str())
            && lab_status(k, "chain")["message"] == "taken over from its agents"
            && in_operator(&["status", "--lab", "default_chain"]).status.success()
    });
    assert_eq!(lab_status(k, "chain")["phase"], "Up");
    let r = rtt();
    assert!((40.0..42.0).contains(&r), "RTT {r} ms after the takeover by a new pod");

    // A changed spec: the lab comes up anew with it.
    k.must(&["apply", "-f", "-"], &example.replace("delay: 10ms", "delay: 5ms"));
    wait(120, "the changed lab is up", &mut || {
        // (Until the operator has seen the change, the old lab answers, and may go
        // down under a ping: only a whole ping's RTT counts.)
        let o = ping();
        lab_status(k, "chain")["phase"] == "Up"
            && o.status.success()
            && (20.0..22.0).contains(&min_rtt_ms(&o))
    });

    // Deleted: the finalizer holds the resource until the lab is down on every agent.
    k.must(&["-n", "default", "delete", "vemulab", "chain", "--timeout=60s"], "");
    let gone = k.kubectl(&["-n", "default", "get", "vemulab", "chain"], "");
    assert!(!gone.status.success() && text(&gone).contains("not found"), "{}", text(&gone));
    for i in 0..2 {
        assert_eq!(nodes.leftovers(i, false), "", "node {i} keeps something of the VemuLab");
    }
    let log = operator_log();
    assert!(!log.contains("panicked"), "{log}");

    // Uninstalled: the agents take nothing down with them (no lab is left), their pods
    // and the operator's go, their containers, network namespaces and cgroups with them.
    k.helm(&["uninstall", "vemu", "-n", "vemu", "--wait", "--timeout=180s"]);
    wait(180, "the pods are gone", &mut || pods().is_empty());
    for i in 0..2 {
        eventually(60, &format!("node {i} holds nothing of the pods"), || {
            nodes.leftovers(i, true).is_empty()
        });
        assert!(!node_log(i).contains("panic"), "{}", node_log(i));
    }
}
