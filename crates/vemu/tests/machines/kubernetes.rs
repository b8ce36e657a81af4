//! On Kubernetes: the operator and the Helm chart against a real API server (the test
//! plays the kubelet: [`Kube`]).

use super::*;

/// A Kubernetes API server (with etcd) in the controller's namespace of machines `m`,
/// on its loopback: the real kube-apiserver and etcd, built from their Go modules
/// (deploy/kubernetes/test-apiserver, into target/ by scripts/test.sh), with RBAC and
/// its admission plugins but without kubelet, scheduler or controller manager.
struct Kube {
    dir: std::path::PathBuf,
    ctl: String,
    procs: Vec<Child>,
}

impl Kube {
    fn start(m: &Machines) -> Kube {
        let bin = std::env::var("VEMU_TEST_APISERVER").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/vemu-test-apiserver").to_string()
        });
        assert!(std::path::Path::new(&bin).exists(), "{bin} is missing: build it with `go build -C deploy/kubernetes/test-apiserver -o $PWD/target/vemu-test-apiserver .` (scripts/test.sh does)");
        let dir = std::env::temp_dir().join(format!("vemu-{}-kube", m.tag));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("certs")).unwrap();
        let d = dir.display();
        ok(&format!("openssl genrsa -out {d}/sa.key 2048 2>/dev/null && openssl rsa -in {d}/sa.key -pubout -out {d}/sa.pub 2>/dev/null"));
        std::fs::write(dir.join("tokens.csv"), "admin-token-0123456789abcdef,admin,admin,system:masters\ntenant-token-0123456789abcdef,tenant,tenant\n").unwrap();
        let ctl = format!("{}-ctl", m.tag);
        let spawn = |args: &[&str], log: &str| {
            let log = std::fs::File::create(dir.join(log)).unwrap();
            Command::new("ip")
                .args(["netns", "exec", &ctl, &bin])
                .args(args)
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap()
        };
        let etcd = spawn(
            &[
                "etcd",
                "--data-dir",
                &format!("{d}/etcd"),
                "--listen-client-urls",
                "http://127.0.0.1:2379",
                "--advertise-client-urls",
                "http://127.0.0.1:2379",
                "--listen-peer-urls",
                "http://127.0.0.1:2380",
            ],
            "etcd.log",
        );
        let api = spawn(
            &[
                "apiserver",
                "--etcd-servers=http://127.0.0.1:2379",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--secure-port=6443",
                &format!("--cert-dir={d}/certs"),
                &format!("--token-auth-file={d}/tokens.csv"),
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.255.0.0/24",
                "--service-account-issuer=https://kubernetes.default.svc",
                &format!("--service-account-key-file={d}/sa.pub"),
                &format!("--service-account-signing-key-file={d}/sa.key"),
                // Its controller (which makes the "default" service accounts) does not run.
                "--disable-admission-plugins=ServiceAccount",
                "--allow-privileged=true",
            ],
            "apiserver.log",
        );
        let k = Kube { dir, ctl, procs: vec![etcd, api] };
        k.write_config("admin", "admin-token-0123456789abcdef");
        eventually(60, "the API server is ready", || {
            k.kubectl(&["get", "--raw", "/readyz"], "").status.success()
        });
        k
    }

    /// A kubeconfig for this API server as `user`, who shows `token`.
    fn write_config(&self, user: &str, token: &str) -> std::path::PathBuf {
        let path = self.dir.join(format!("{user}.kubeconfig"));
        let ca = self.dir.join("certs/apiserver.crt");
        let cfg = format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: t, cluster: {{server: 'https://127.0.0.1:6443', certificate-authority: {}}}}}]\nusers: [{{name: {user}, user: {{token: '{token}'}}}}]\ncontexts: [{{name: t, context: {{cluster: t, user: {user}}}}}]\ncurrent-context: t\n",
            ca.display()
        );
        std::fs::write(&path, cfg).unwrap();
        path
    }

    /// `kubectl ARGS` as the cluster's administrator, `stdin` on its input.
    fn kubectl(&self, args: &[&str], stdin: &str) -> Output {
        self.kubectl_as("admin", args, stdin)
    }

    fn kubectl_as(&self, user: &str, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut c = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ctl,
                "kubectl",
                "--kubeconfig",
                &self.dir.join(format!("{user}.kubeconfig")).to_string_lossy(),
            ])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
        c.wait_with_output().unwrap()
    }

    fn must(&self, args: &[&str], stdin: &str) -> String {
        let o = self.kubectl(args, stdin);
        assert!(o.status.success(), "kubectl {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    /// Pod `name` in namespace vemu from a workload's pod `template` (on Kubernetes node
    /// `node`, if given), as the API server made it.
    fn create_pod(
        &self,
        template: &serde_json::Value,
        name: &str,
        node: Option<&str>,
    ) -> serde_json::Value {
        let mut spec = template["spec"].clone();
        if let Some(node) = node {
            spec["nodeName"] = node.into();
        }
        let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "vemu", "labels": template["metadata"]["labels"]}, "spec": spec});
        serde_json::from_str(&self.must(&["create", "-f", "-", "-o", "json"], &pod.to_string()))
            .unwrap()
    }

    /// What a kubelet reports of pod `name` (namespace vemu) once its container runs and
    /// its readiness probe passes: running and ready, at `ip`.
    fn set_ready(&self, name: &str, ip: &str) {
        let status = serde_json::json!({"status": {"phase": "Running", "hostIP": ip, "podIP": ip, "conditions": [{"type": "Ready", "status": "True"}]}});
        self.must(
            &[
                "-n",
                "vemu",
                "patch",
                "pod",
                name,
                "--subresource=status",
                "--type=merge",
                "-p",
                &status.to_string(),
            ],
            "",
        );
    }

    /// What a kubelet would run for `pod`'s (first) container on the machine of address
    /// `host_ip`, as a shell command for a mount namespace of its own: its command and
    /// arguments with `$(VAR)` from its environment (values and the fields `status.hostIP`,
    /// `metadata.namespace`, `metadata.name`, `spec.nodeName`); its volumes: secrets (the
    /// keys as files, with the volume's mode), emptyDirs (a directory of the test's, kept
    /// while the pod lives: `fresh` starts them empty), hostPaths (the machine's own path,
    /// asserted to be the same in the container); the service account's token, CA and
    /// namespace in /run/secrets/kubernetes.io/serviceaccount with KUBERNETES_SERVICE_HOST
    /// and _PORT, as in-cluster clients read them (the API server's address, 127.0.0.1:
    /// no kube-proxy here). The image's programs are the binaries under test (on PATH). A
    /// container without the machine's /run gets its own; /etc and /var/log are overlaid,
    /// so that what the container writes there never reaches the real machine's.
    fn container_command(&self, pod: &serde_json::Value, host_ip: &str, fresh: bool) -> String {
        let c = &pod["spec"]["containers"][0];
        let (name, ns) = (
            pod["metadata"]["name"].as_str().unwrap(),
            pod["metadata"]["namespace"].as_str().unwrap(),
        );
        let mut env = vec![(
            "PATH".to_string(),
            format!(
                "{}:/usr/sbin:/usr/bin:/sbin:/bin",
                std::path::Path::new(VEMU).parent().unwrap().display()
            ),
        )];
        for e in c["env"].as_array().into_iter().flatten() {
            let v = match (&e["value"], e["valueFrom"]["fieldRef"]["fieldPath"].as_str()) {
                (serde_json::Value::String(v), _) => v.clone(),
                (_, Some("status.hostIP")) => host_ip.to_string(),
                (_, Some("metadata.namespace")) => ns.to_string(),
                (_, Some("metadata.name")) => name.to_string(),
                (_, Some("spec.nodeName")) => {
                    pod["spec"]["nodeName"].as_str().unwrap_or_default().to_string()
                }
                _ => panic!("the stand-in kubelet cannot fill {e}"),
            };
            env.push((e["name"].as_str().unwrap().to_string(), v));
        }
        let pod_dir = self.dir.join(name);
        if fresh {
            let _ = std::fs::remove_dir_all(&pod_dir);
        }
        for d in ["etc", "etc-work", "log", "log-work"] {
            let _ = std::fs::remove_dir_all(pod_dir.join(d));
            std::fs::create_dir_all(pod_dir.join(d)).unwrap();
        }
        let volumes = pod["spec"]["volumes"].as_array().cloned().unwrap_or_default();
        let mounts = c["volumeMounts"].as_array().cloned().unwrap_or_default();
        let machines = |base: &str| {
            mounts.iter().any(|vm| {
                vm["mountPath"].as_str().unwrap().starts_with(base)
                    && volumes.iter().any(|v| v["name"] == vm["name"] && v["hostPath"].is_object())
            })
        };
        let mut script = "true".to_string();
        for (base, upper) in [("/etc", "etc"), ("/var/log", "log")] {
            if !machines(base) {
                script += &format!(" && mount -t overlay overlay -o lowerdir={base},upperdir={0}/{upper},workdir={0}/{upper}-work {base}", pod_dir.display());
            }
        }
        if !machines("/run/") {
            script += " && mount -t tmpfs tmpfs /run";
        }
        let files = |mp: &str, data: &[(String, String)], mode: u64| {
            let mut s = format!(" && mkdir -p {mp} && mount -t tmpfs tmpfs {mp}");
            for (key, b64) in data {
                s += &format!(
                    " && echo {b64} | base64 -d > {mp}/{key} && chmod {mode:o} {mp}/{key}"
                );
            }
            s
        };
        for vm in &mounts {
            let mp = vm["mountPath"].as_str().unwrap();
            let vol = volumes.iter().find(|v| v["name"] == vm["name"]).unwrap();
            if let Some(path) = vol["hostPath"]["path"].as_str() {
                assert_eq!(path, mp, "a hostPath mounted elsewhere in the container: the stand-in kubelet does not do that");
            } else if let Some(secret) = vol["secret"]["secretName"].as_str() {
                let secret: serde_json::Value = serde_json::from_str(
                    &self.must(&["-n", ns, "get", "secret", secret, "-o", "json"], ""),
                )
                .unwrap();
                let data: Vec<(String, String)> = secret["data"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string()))
                    .collect();
                script += &files(mp, &data, vol["secret"]["defaultMode"].as_u64().unwrap_or(0o644));
            } else if vol["emptyDir"].is_object() {
                let dir = pod_dir.join(format!("volume-{}", vol["name"].as_str().unwrap()));
                std::fs::create_dir_all(&dir).unwrap();
                script += &format!(" && mkdir -p {mp} && mount --bind {} {mp}", dir.display());
            } else {
                panic!("the stand-in kubelet cannot mount {vol}");
            }
        }
        if let Some(sa) = pod["spec"]["serviceAccountName"]
            .as_str()
            .filter(|_| pod["spec"]["automountServiceAccountToken"] != false)
        {
            let uid = pod["metadata"]["uid"].as_str().unwrap();
            let token = self.must(
                &[
                    "-n",
                    ns,
                    "create",
                    "token",
                    sa,
                    "--duration=2h",
                    "--bound-object-kind=Pod",
                    &format!("--bound-object-name={name}"),
                    &format!("--bound-object-uid={uid}"),
                ],
                "",
            );
            let b64 = |t: &[u8]| {
                use std::io::Write;
                let mut c = Command::new("base64")
                    .args(["-w", "0"])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .unwrap();
                c.stdin.take().unwrap().write_all(t).unwrap();
                String::from_utf8(c.wait_with_output().unwrap().stdout).unwrap()
            };
            let ca = std::fs::read(self.dir.join("certs/apiserver.crt")).unwrap();
            let data = [
                ("token".to_string(), b64(token.trim().as_bytes())),
                ("ca.crt".to_string(), b64(&ca)),
                ("namespace".to_string(), b64(ns.as_bytes())),
            ];
            script += &files("/run/secrets/kubernetes.io/serviceaccount", &data, 0o644);
            env.push(("KUBERNETES_SERVICE_HOST".into(), "127.0.0.1".into()));
            env.push(("KUBERNETES_SERVICE_PORT".into(), "6443".into()));
        }
        let expand =
            |a: &str| env.iter().fold(a.to_string(), |a, (n, v)| a.replace(&format!("$({n})"), v));
        let argv: Vec<String> = c["command"]
            .as_array()
            .into_iter()
            .chain(c["args"].as_array())
            .flatten()
            .map(|a| format!("'{}'", expand(a.as_str().unwrap())))
            .collect();
        let env: Vec<String> = env.iter().map(|(n, v)| format!("{n}='{v}'")).collect();
        format!("{script} && exec env -i {} {}", env.join(" "), argv.join(" "))
    }
}

impl Drop for Kube {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The operator of docs/kubernetes.md against a real Kubernetes API server: the
/// packaging (`kubectl kustomize deploy/kubernetes`) applied as is; the agents' pods made
/// from its DaemonSet's template on two machines and the operator's pod from its
/// Deployment's, each run as the pod says by the test, which plays their kubelet
/// ([`Kube::container_command`]: command, environment, secret and emptyDir volumes, the
/// service account's token for the operator's in-cluster configuration, so that RBAC
/// judges operator.yaml's roles; the operator's container in a PID namespace that dies
/// with it). A VemuLab waits for a node without an agent; the repository's example comes
/// up across both machines with its delays and is kept; its controller lost with the
/// operator's container is taken over, by the restarted container (its /run/vemu kept)
/// and by a new pod (from the agents); a changed spec brings it up anew; deleting it
/// takes it down everywhere, leaving nothing.
#[test]
fn the_operator_brings_a_vemulab_up_across_machines_and_down_when_it_is_deleted() {
    let _g = serial();
    let mut m = Machines::start_bare("vk", 91, &["w1", "w2"]);
    let k = &Kube::start(&m);
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    install_and_start_agents(&mut m, k, root);
    let ops = OperatorPods {
        k,
        template: template(k, "deployment", "vemu-operator"),
        log: k.dir.join("operator.log"),
    };
    let mut pod = ops.run("vemu-operator-1", true);
    let mut pod_name = "vemu-operator-1";
    a_lab_without_an_agent_waits(k, &ops);
    tenants_get_what_the_administrator_allows(&m, k, &ops, &pod);

    // The repository's example: a chain of three nodes, 10 ms a link, over both machines.
    let example =
        std::fs::read_to_string(format!("{root}/deploy/kubernetes/examples/vemulab-chain.yaml"))
            .unwrap();
    k.must(&["apply", "-f", "-"], &example);
    eventually(90, "the example VemuLab is up", || {
        lab_status(k, "chain")["phase"] == "Up" || lab_status(k, "chain")["phase"] == "Failed"
    });
    let st = lab_status(k, "chain");
    assert_eq!(
        (st["phase"].as_str(), st["lab"].as_str(), st["machines"].as_str()),
        (Some("Up"), Some("default_chain"), Some("w1=10.91.0.1,w2=10.91.0.2")),
        "{st} {}",
        ops.log()
    );
    let table = k.must(&["get", "vemulabs", "-A"], "");
    assert!(
        table.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()
            == ["default", "chain", "Up", "default_chain", "w1=10.91.0.1,w2=10.91.0.2"]),
        "{table}"
    );
    let vs: serde_json::Value = serde_json::from_slice(
        &in_pod(&pod, &["status", "--lab", "default_chain", "--json"]).stdout,
    )
    .unwrap_or_default();
    let machines_used: std::collections::BTreeSet<String> = vs["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["machine"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(machines_used.len(), 2, "the lab spans both machines: {vs}");
    let rtt = |pod: &Container| {
        min_rtt_ms(&in_pod(
            pod,
            &[
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
            ],
        ))
    };
    let r = rtt(&pod);
    assert!((40.0..42.0).contains(&r), "RTT {r} ms for 2 x 10 ms set");
    // Looked at again (its status written), the lab is kept.
    eventually(60, "the operator keeps the running lab", || {
        ops.log().contains("default/chain: up as specified, kept")
    });
    let controller_pid = |pod: &str| {
        std::fs::read_to_string(k.dir.join(pod).join("volume-run-vemu/default_chain/daemon.pid"))
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    assert!(
        !controller_pid(pod_name).is_empty(),
        "the lab's controller keeps its state in the pod's /run/vemu"
    );

    // The operator's container restarts: the lab's controller dies with it; the pod's
    // /run/vemu (an emptyDir) is kept. The new container takes the lab over from it.
    drop(pod);
    pod = ops.run(pod_name, false);
    eventually(60, "the lab has a controller again", || {
        lab_status(k, "chain")["message"].as_str().unwrap_or_default().contains("served again")
            && in_pod(&pod, &["status", "--lab", "default_chain"]).status.success()
    });
    assert_eq!(lab_status(k, "chain")["phase"], "Up");
    let r = rtt(&pod);
    assert!((40.0..42.0).contains(&r), "RTT {r} ms after the takeover");

    // A new pod (the old one deleted): its /run is empty. It takes the lab over from the
    // state the controller handed to the agents.
    drop(pod);
    k.must(&["-n", "vemu", "delete", "pod", pod_name, "--wait=false"], "");
    pod_name = "vemu-operator-2";
    pod = ops.run(pod_name, true);
    eventually(60, "the lab has a controller in the new pod", || {
        lab_status(k, "chain")["message"] == "taken over from its agents"
            && in_pod(&pod, &["status", "--lab", "default_chain"]).status.success()
    });
    assert_eq!(lab_status(k, "chain")["phase"], "Up");
    let r = rtt(&pod);
    assert!((40.0..42.0).contains(&r), "RTT {r} ms after the takeover from the agents");

    // A changed spec: the lab comes up anew with it.
    let before = controller_pid(pod_name);
    k.must(&["apply", "-f", "-"], &example.replace("delay: 10ms", "delay: 5ms"));
    eventually(90, "the changed lab is up", || {
        let p = controller_pid(pod_name);
        !p.is_empty()
            && p != before
            && lab_status(k, "chain")["phase"] == "Up"
            && in_pod(&pod, &["status", "--lab", "default_chain"]).status.success()
    });
    let r = rtt(&pod);
    assert!((20.0..22.0).contains(&r), "RTT {r} ms for 2 x 5 ms set");

    // Deleted: the finalizer holds the resource until the lab is down on every machine.
    k.must(&["-n", "default", "delete", "vemulab", "chain", "--timeout=60s"], "");
    let gone = k.kubectl(&["-n", "default", "get", "vemulab", "chain"], "");
    assert!(!gone.status.success() && text(&gone).contains("not found"), "{}", text(&gone));
    assert!(controller_pid(pod_name).is_empty(), "{}", ops.log());
    for i in 0..2 {
        assert_eq!(m.leftovers(i), "", "machine {i} keeps something after the VemuLab went");
    }
    drop(pod);
    assert!(!ops.log().contains("panicked"), "{}", ops.log());
}

// The parts of `the_operator_brings_a_vemulab_up_across_machines_and_down_when_it_is_deleted`.

/// The Deployment's or DaemonSet's pod template `kind`/`name` in namespace vemu.
fn template(k: &Kube, kind: &str, name: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(
        &k.must(&["-n", "vemu", "get", kind, name, "-o", "json"], ""),
    )
    .unwrap()["spec"]["template"]
        .clone()
}

/// The status of VemuLab `name` of namespace default.
fn lab_status(k: &Kube, name: &str) -> serde_json::Value {
    let o = k.kubectl(&["-n", "default", "get", "vemulab", name, "-o", "json"], "");
    serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default()["status"].clone()
}

/// The repository's manifests applied, the agents' token as a secret, and an agent pod
/// of the DaemonSet on each machine, ready.
fn install_and_start_agents(m: &mut Machines, k: &Kube, root: &str) {
    let rendered = Command::new("kubectl")
        .args(["kustomize", &format!("{root}/deploy/kubernetes")])
        .output()
        .unwrap();
    assert!(rendered.status.success(), "{}", text(&rendered));
    k.must(&["apply", "-f", "-"], &String::from_utf8_lossy(&rendered.stdout));
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
    let agent = template(k, "daemonset", "vemu-agent");
    for (i, node) in m.names.clone().iter().enumerate() {
        let pod = k.create_pod(&agent, &format!("vemu-agent-{node}"), Some(node));
        let cmd = k.container_command(&pod, &m.address(i), true);
        m.spawn_agent(i, &cmd);
    }
    // Their readiness probe (a TCP port), then what their kubelet would report.
    m.wait_for_agents();
    for (i, node) in m.names.iter().enumerate() {
        k.set_ready(&format!("vemu-agent-{node}"), &m.address(i));
    }
}

/// The operator's pods, run as a kubelet would: from its Deployment's template, in the
/// controller's namespace (the pod network), each a container of its own (its PID
/// namespace dies with it, as the labs' controllers it started do), in-cluster
/// configuration from its service account, whose roles RBAC applies.
struct OperatorPods<'a> {
    k: &'a Kube,
    template: serde_json::Value,
    /// Where every container of theirs writes.
    log: std::path::PathBuf,
}

/// An operator's container, ended when dropped.
struct Container(Child);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl OperatorPods<'_> {
    /// Run pod `name`'s container: a new pod, or a new container of the pod there is.
    fn run(&self, name: &str, fresh: bool) -> Container {
        let k = self.k;
        let pod = match fresh {
            true => k.create_pod(&self.template, name, None),
            false => {
                serde_json::from_str(&k.must(&["-n", "vemu", "get", "pod", name, "-o", "json"], ""))
                    .unwrap()
            }
        };
        let script = k.container_command(&pod, "10.91.0.254", fresh);
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).unwrap();
        let c = Command::new("ip")
            .args([
                "netns",
                "exec",
                &k.ctl,
                "unshare",
                "-m",
                "-p",
                "-f",
                "--kill-child",
                "--mount-proc",
                "--propagation",
                "private",
                "sh",
                "-c",
                &script,
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        k.set_ready(name, "10.91.0.254");
        Container(c)
    }

    /// What their containers wrote.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// `kubectl exec POD -- vemu ARGS`: in the container's namespaces.
fn in_pod(c: &Container, args: &[&str]) -> Output {
    let init = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", c.0.id()))
        .unwrap_or_default();
    let init = init.split_whitespace().next().unwrap_or("0").to_string();
    Command::new("nsenter").args(["-t", &init, "-m", "-n", "-p", VEMU]).args(args).output().unwrap()
}

fn a_lab_without_an_agent_waits(k: &Kube, ops: &OperatorPods) {
    // A node without an agent: the lab waits, saying so.
    let waiting = "apiVersion: vemu.dev/v1alpha1\nkind: VemuLab\nmetadata: {name: waits, namespace: default}\nspec:\n  scenario: 'nodes: {a: {}}'\n  nodes: [w1, w3]\n";
    k.must(&["apply", "-f", "-"], waiting);
    eventually(30, "the VemuLab naming w3 is pending", || {
        lab_status(k, "waits")["phase"] == "Pending"
    });
    assert_eq!(
        lab_status(k, "waits")["message"],
        "node 'w3' has no ready vemu agent",
        "{}",
        ops.log()
    );
    k.must(&["-n", "default", "delete", "vemulab", "waits", "--timeout=30s"], "");
}

fn tenants_get_what_the_administrator_allows(
    m: &Machines,
    k: &Kube,
    ops: &OperatorPods,
    pod: &Container,
) {
    // Issue 39: a tenant allowed to make VemuLabs in its namespace, and nothing else.
    k.must(&["create", "namespace", "team"], "");
    k.must(
        &[
            "-n",
            "team",
            "create",
            "role",
            "vemulabs",
            "--verb=get,list,watch,create,update,patch,delete",
            "--resource=vemulabs.vemu.dev",
        ],
        "",
    );
    k.must(
        &["-n", "team", "create", "rolebinding", "tenant", "--role=vemulabs", "--user=tenant"],
        "",
    );
    k.write_config("tenant", "tenant-token-0123456789abcdef");
    let policy = "apiVersion: vemu.dev/v1alpha1\nkind: VemuLabPolicy\nmetadata: {name: team-files}\nspec: {namespaces: [team], allow: [from]}\n";
    let o = k.kubectl_as("tenant", &["apply", "-f", "-"], policy);
    assert!(
        !o.status.success() && text(&o).contains("forbidden"),
        "a tenant cannot allow itself: {}",
        text(&o)
    );
    // Each feature that reads the machine's files or reaches beyond the lab's nodes: the
    // VemuLab is refused, the condition naming the field; nothing runs.
    let refused = [
        ("token", "nodes:\n  a:\n    files: {/etc/t: {from: /etc/vemu/agent-token/token}}\n", "nodes.a.files./etc/t.from"),
        ("host", "nodes:\n  h: {kind: host}\n  a: {}\nlinks: [{endpoints: [h, a]}]\n", "nodes.h.kind"),
        ("nic", "nodes:\n  x: {kind: external, iface: eth0}\n  a: {}\nlinks: [{endpoints: [x, a]}]\n", "nodes.x.kind"),
        ("divert", "nodes: {a: {}}\ndivert: [{match: tcp dport 80, delay: 5ms}]\n", "divert"),
        ("trace", "nodes: {a: {}, b: {}}\nsegments:\n  r: {kind: wireless, members: [a, b], trace: /etc/vemu/agent-token/token}\n", "segments.r.trace"),
        ("pids", "nodes:\n  a: {isolation: none, run: ['touch /tmp/vemu-tenant-ran']}\n", "nodes.a.isolation"),
    ];
    let vemulab = |name: &str, scenario: &str| {
        serde_json::json!({"apiVersion": "vemu.dev/v1alpha1", "kind": "VemuLab", "metadata": {"name": name, "namespace": "team"}, "spec": {"scenario": scenario}}).to_string()
    };
    let team_status = |name: &str| -> serde_json::Value {
        let o = k.kubectl_as("tenant", &["-n", "team", "get", "vemulab", name, "-o", "json"], "");
        serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default()["status"].clone()
    };
    for (name, scenario, _) in refused {
        let o = k.kubectl_as("tenant", &["apply", "-f", "-"], &vemulab(name, scenario));
        assert!(o.status.success(), "{}", text(&o));
    }
    for (name, _, field) in refused {
        eventually(60, &format!("VemuLab team/{name} is refused"), || {
            team_status(name)["phase"] == "Failed"
        });
        let st = team_status(name);
        let c = &st["conditions"][0];
        assert_eq!(
            (c["type"].as_str(), c["status"].as_str(), c["reason"].as_str()),
            (Some("Admitted"), Some("False"), Some("Refused")),
            "{st}"
        );
        let msg = c["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("{field} (line ")) && msg.contains("refused in a tenant's lab"),
            "{name}: {msg}"
        );
        assert_eq!(st["message"].as_str(), Some(msg), "{st}");
        assert!(!msg.contains("cannot read"), "nothing refused is read: {msg}");
    }
    let ls = in_pod(pod, &["ls"]);
    assert!(!text(&ls).contains("team_"), "a refused VemuLab runs nothing: {}", text(&ls));
    for i in 0..2 {
        assert_eq!(m.leftovers(i), "", "machine {i} holds something of a refused VemuLab");
    }
    assert!(!std::path::Path::new("/tmp/vemu-tenant-ran").exists());
    // The administrator allows `from` for the team: that VemuLab (looked at again) comes
    // up, with the file where its operator reads it (its pod's own files).
    k.must(&["apply", "-f", "-"], policy);
    k.must(
        &[
            "-n",
            "team",
            "delete",
            "vemulab",
            "host",
            "nic",
            "divert",
            "trace",
            "pids",
            "--timeout=30s",
        ],
        "",
    );
    let os_release = "nodes:\n  a:\n    files: {/etc/os: {from: /etc/os-release}}\n";
    assert!(k
        .kubectl_as("tenant", &["apply", "-f", "-"], &vemulab("token", os_release))
        .status
        .success());
    eventually(90, "the allowed VemuLab is up", || {
        team_status("token")["phase"] == "Up"
            || team_status("token")["message"].as_str().is_some_and(|m| m.contains("vemu"))
    });
    let st = team_status("token");
    assert_eq!(st["phase"], "Up", "{st} {}", ops.log());
    assert_eq!(
        (st["conditions"][0]["status"].as_str(), st["conditions"][0]["reason"].as_str()),
        (Some("True"), Some("Allowed")),
        "{st}"
    );
    let o =
        in_pod(pod, &["exec", "--lab", "team_token", "a", "--", "grep", "-c", "^ID=", "/etc/os"]);
    assert_eq!(text(&o).trim(), "1", "the node holds the allowed file: {}", text(&o));
    // Its node runs on an agent's machine, confined: the agent's token (its pod's
    // /etc/vemu/agent-token) is not there, and nothing can be unmounted to find it.
    let o = in_pod(pod, &["exec", "--lab", "team_token", "a", "--", "sh", "-c", "cat /etc/vemu/agent-token/token; umount -l /etc && echo UNMOUNTED; ls -A /etc/vemu | wc -l"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0", "{}", text(&o));
    k.must(&["-n", "team", "delete", "vemulab", "token", "--timeout=60s"], "");
    k.must(&["delete", "vemulabpolicy", "team-files"], "");
}

/// The Helm chart installed, upgraded and uninstalled by a real `helm` on a real API
/// server (see [`Kube`]): every object it renders is accepted (the API server's own
/// validation and admission, Pod Security among them), the operator's service account may
/// do what the operator does and no more, `operator.enabled=false` removes the operator,
/// and uninstalling removes everything but the resource definition (Helm's rule for CRDs).
#[test]
fn the_helm_chart_installs_upgrades_and_uninstalls_on_a_real_api_server() {
    let _g = serial();
    let m = Machines::start_bare("vh", 92, &[]);
    let k = Kube::start(&m);
    let helm_bin = ["helm", "/root/.local/bin/helm"]
        .into_iter()
        .find(|h| Command::new(h).arg("version").output().is_ok_and(|o| o.status.success()));
    let helm_bin = helm_bin
        .expect("helm is not installed (scripts/setup.sh builds it into ~/.local/bin with Go)");
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/helm/vemu");
    let helm = |args: &[&str]| -> String {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &k.ctl,
                helm_bin,
                "--kubeconfig",
                &k.dir.join("admin.kubeconfig").to_string_lossy(),
            ])
            .args(args)
            .env("HELM_CACHE_HOME", k.dir.join("helm/cache"))
            .env("HELM_CONFIG_HOME", k.dir.join("helm/config"))
            .env("HELM_DATA_HOME", k.dir.join("helm/data"))
            .output()
            .unwrap();
        assert!(o.status.success(), "helm {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    };
    k.must(&["create", "namespace", "vemu"], "");
    k.must(&["label", "namespace", "vemu", "pod-security.kubernetes.io/enforce=privileged"], "");
    helm(&[
        "install",
        "vemu",
        chart,
        "-n",
        "vemu",
        "--set",
        "image.repository=registry.example.org/vemu",
    ]);
    let manifest = helm(&["get", "manifest", "vemu", "-n", "vemu"]);
    // Every object the release holds is there, and the CRD serves its resource.
    k.must(&["get", "-f", "-"], &manifest);
    k.must(&["wait", "--for=condition=Established", "crd/vemulabs.vemu.dev", "--timeout=30s"], "");
    let kinds = k.must(
        &["get", "-f", "-", "-o", "jsonpath={range .items[*]}{.kind}/{.metadata.name} {end}"],
        &manifest,
    );
    for want in [
        "ServiceAccount/vemu-operator",
        "DaemonSet/vemu-agent",
        "Deployment/vemu-operator",
        "ClusterRole/vemu-operator-vemu",
        "ClusterRoleBinding/vemu-operator-vemu",
    ] {
        assert!(kinds.split_whitespace().any(|x| x == want), "{want} not in the release: {kinds}");
    }
    // What the operator may do (main.rs): watch and patch VemuLabs and their status
    // everywhere, list the agents' pods in its own namespace; nothing else.
    let can = |verb: &str, what: &str, ns: &str| {
        let o = k.kubectl(
            &[
                "auth",
                "can-i",
                verb,
                what,
                "-n",
                ns,
                "--as=system:serviceaccount:vemu:vemu-operator",
            ],
            "",
        );
        String::from_utf8_lossy(&o.stdout).trim() == "yes"
    };
    for (verb, what, ns) in [
        ("watch", "vemulabs.vemu.dev", "default"),
        ("patch", "vemulabs.vemu.dev", "labs"),
        ("patch", "vemulabs.vemu.dev/status", "default"),
        ("list", "pods", "vemu"),
        ("watch", "vemulabpolicies.vemu.dev", ""),
    ] {
        assert!(can(verb, what, ns), "the operator may not {verb} {what} in {ns}");
    }
    for (verb, what, ns) in [
        ("list", "pods", "default"),
        ("delete", "pods", "vemu"),
        ("get", "secrets", "vemu"),
        ("delete", "vemulabs.vemu.dev", "default"),
        ("create", "vemulabpolicies.vemu.dev", ""),
    ] {
        assert!(!can(verb, what, ns), "the operator may {verb} {what} in {ns}");
    }
    // The example VemuLab is a valid resource of the installed CRD.
    let example = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/kubernetes/examples/vemulab-chain.yaml"
    ))
    .unwrap();
    k.must(&["apply", "--dry-run=server", "-f", "-"], &example);
    let bad = k.kubectl(
        &["apply", "--dry-run=server", "-f", "-"],
        &example.replace("scenario: |", "scenarios: |"),
    );
    assert!(
        !bad.status.success() && text(&bad).contains(r#"unknown field "spec.scenarios""#),
        "{}",
        text(&bad)
    );

    helm(&["upgrade", "vemu", chart, "-n", "vemu", "--set", "operator.enabled=false"]);
    let o = k.kubectl(&["-n", "vemu", "get", "deployment", "vemu-operator"], "");
    assert!(!o.status.success() && text(&o).contains("not found"), "{}", text(&o));
    k.must(&["-n", "vemu", "get", "daemonset", "vemu-agent"], "");

    helm(&["uninstall", "vemu", "-n", "vemu"]);
    let o = k.kubectl(&["-n", "vemu", "get", "daemonset", "vemu-agent"], "");
    assert!(!o.status.success() && text(&o).contains("not found"), "{}", text(&o));
    k.must(&["get", "crd", "vemulabs.vemu.dev"], "");
}
