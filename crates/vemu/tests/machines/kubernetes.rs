//! On Kubernetes: a real API server ([`Kube`], and with `cluster` the rest of a control
//! plane for kubelet.rs), the Helm chart installed on it, and the checks the real-kubelet
//! test shares.

use super::*;

/// A Kubernetes API server (with etcd) in the controller's namespace of machines `m`,
/// on its loopback: the real kube-apiserver and etcd, built from their Go modules
/// (deploy/kubernetes/test-apiserver, into target/ by scripts/test.sh), with RBAC and
/// its admission plugins ([`Kube::start_with`]: and the rest of a control plane).
pub(super) struct Kube {
    pub(super) dir: std::path::PathBuf,
    pub(super) ctl: String,
    /// The API server's URL.
    pub(super) server: String,
    procs: Vec<Child>,
}

impl Kube {
    fn start(m: &Machines) -> Kube {
        Kube::start_with(m, false)
    }

    /// The binary of the cluster's parts (deploy/kubernetes/test-apiserver).
    pub(super) fn bin() -> String {
        let bin = std::env::var("VEMU_TEST_APISERVER").unwrap_or_else(|_| {
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/vemu-test-apiserver").to_string()
        });
        assert!(std::path::Path::new(&bin).exists(), "{bin} is missing: build it with `go build -C deploy/kubernetes/test-apiserver -o $PWD/target/vemu-test-apiserver .` (scripts/test.sh does)");
        bin
    }

    /// ... and, with `cluster`, the rest of a control plane for real kubelets (see
    /// kubelet.rs): the API server on the controller's address of the underlay
    /// (10.NET.0.254, its Service 10.NET.200.1), node authorization, the ServiceAccount
    /// admission, a client certificate for the kubelets, the scheduler and the controller
    /// manager, each with its own identity.
    pub(super) fn start_with(m: &Machines, cluster: bool) -> Kube {
        let bin = Kube::bin();
        let dir = std::env::temp_dir().join(format!("vemu-{}-kube", m.tag));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("certs")).unwrap();
        let d = dir.display();
        ok(&format!("openssl genrsa -out {d}/sa.key 2048 2>/dev/null && openssl rsa -in {d}/sa.key -pubout -out {d}/sa.pub 2>/dev/null"));
        let mut tokens = "admin-token-0123456789abcdef,admin,admin,system:masters\n".to_string();
        let address = match cluster {
            true => format!("10.{}.0.254", m.net),
            false => "127.0.0.1".to_string(),
        };
        if cluster {
            for user in CLUSTER_USERS {
                tokens += &format!("{},{user},{user}\n", cluster_token(user));
            }
            for n in &m.names {
                tokens += &format!(
                    "{},system:node:{n},system:node:{n},system:nodes\n",
                    cluster_token(&format!("system:node:{n}"))
                );
            }
            // The API server shows the kubelets a client certificate of a CA they trust.
            ok(&format!("cd {d} && openssl req -x509 -newkey rsa:2048 -nodes -keyout kubelet-ca.key -out kubelet-ca.crt -days 2 -subj /CN=vemu-test-kubelet-ca 2>/dev/null && openssl req -newkey rsa:2048 -nodes -keyout kubelet-client.key -out kubelet-client.csr -subj '/O=system:masters/CN=kube-apiserver-kubelet-client' 2>/dev/null && openssl x509 -req -in kubelet-client.csr -CA kubelet-ca.crt -CAkey kubelet-ca.key -CAcreateserial -out kubelet-client.crt -days 2 2>/dev/null"));
        }
        std::fs::write(dir.join("tokens.csv"), tokens).unwrap();
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
        let mut api_args: Vec<String> = [
            "apiserver",
            "--etcd-servers=http://127.0.0.1:2379",
            "--secure-port=6443",
            "--service-account-issuer=https://kubernetes.default.svc",
            "--allow-privileged=true",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        api_args.extend([
            format!("--bind-address={address}"),
            format!("--advertise-address={address}"),
            format!("--cert-dir={d}/certs"),
            format!("--token-auth-file={d}/tokens.csv"),
            format!("--service-account-key-file={d}/sa.pub"),
            format!("--service-account-signing-key-file={d}/sa.key"),
        ]);
        if cluster {
            api_args.extend([
                "--authorization-mode=Node,RBAC".to_string(),
                format!("--service-cluster-ip-range=10.{}.200.0/24", m.net),
                format!("--kubelet-client-certificate={d}/kubelet-client.crt"),
                format!("--kubelet-client-key={d}/kubelet-client.key"),
                "--kubelet-preferred-address-types=InternalIP".to_string(),
            ]);
        } else {
            api_args.extend(
                [
                    "--authorization-mode=RBAC",
                    "--service-cluster-ip-range=10.255.0.0/24",
                    // Its controller (which makes the "default" service accounts) does not run.
                    "--disable-admission-plugins=ServiceAccount",
                ]
                .map(String::from),
            );
        }
        let api_args: Vec<&str> = api_args.iter().map(String::as_str).collect();
        let api = spawn(&api_args, "apiserver.log");
        let mut k = Kube {
            dir: dir.clone(),
            ctl: ctl.clone(),
            server: format!("https://{address}:6443"),
            procs: vec![etcd, api],
        };
        k.write_config("admin", "admin-token-0123456789abcdef");
        eventually(60, "the API server is ready", || {
            k.kubectl(&["get", "--raw", "/readyz"], "").status.success()
        });
        if cluster {
            let sched = k.write_config("scheduler", &cluster_token("system:kube-scheduler"));
            let cm = k.write_config("cm", &cluster_token("system:kube-controller-manager"));
            k.procs.push(spawn(
                &[
                    "scheduler",
                    &format!("--kubeconfig={}", sched.display()),
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    &format!("--cert-dir={d}/scheduler-certs"),
                ],
                "scheduler.log",
            ));
            k.procs.push(spawn(
                &[
                    "controller-manager",
                    &format!("--kubeconfig={}", cm.display()),
                    "--leader-elect=false",
                    "--bind-address=127.0.0.1",
                    &format!("--cert-dir={d}/cm-certs"),
                    "--use-service-account-credentials=true",
                    &format!("--service-account-private-key-file={d}/sa.key"),
                    &format!("--root-ca-file={d}/certs/apiserver.crt"),
                ],
                "controller-manager.log",
            ));
        }
        k
    }

    /// A kubeconfig for this API server as `user`, who shows `token`.
    pub(super) fn write_config(&self, user: &str, token: &str) -> std::path::PathBuf {
        let path = self.dir.join(format!("{user}.kubeconfig"));
        let ca = self.dir.join("certs/apiserver.crt");
        let cfg = format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: t, cluster: {{server: '{}', certificate-authority: {}}}}}]\nusers: [{{name: {user}, user: {{token: '{token}'}}}}]\ncontexts: [{{name: t, context: {{cluster: t, user: {user}}}}}]\ncurrent-context: t\n",
            self.server,
            ca.display()
        );
        std::fs::write(&path, cfg).unwrap();
        path
    }

    /// `helm ARGS` as the cluster's administrator: its output.
    pub(super) fn helm(&self, args: &[&str]) -> String {
        let helm_bin = ["helm", "/root/.local/bin/helm"]
            .into_iter()
            .find(|h| Command::new(h).arg("version").output().is_ok_and(|o| o.status.success()))
            .expect("helm is not installed (scripts/setup.sh builds it into ~/.local/bin with Go)");
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ctl,
                helm_bin,
                "--kubeconfig",
                &self.dir.join("admin.kubeconfig").to_string_lossy(),
            ])
            .args(args)
            .env("HELM_CACHE_HOME", self.dir.join("helm/cache"))
            .env("HELM_CONFIG_HOME", self.dir.join("helm/config"))
            .env("HELM_DATA_HOME", self.dir.join("helm/data"))
            .output()
            .unwrap();
        assert!(o.status.success(), "helm {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    }

    /// `kubectl ARGS` as the cluster's administrator, `stdin` on its input.
    pub(super) fn kubectl(&self, args: &[&str], stdin: &str) -> Output {
        self.kubectl_as("admin", args, stdin)
    }

    pub(super) fn kubectl_as(&self, user: &str, args: &[&str], stdin: &str) -> Output {
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

    pub(super) fn must(&self, args: &[&str], stdin: &str) -> String {
        let o = self.kubectl(args, stdin);
        assert!(o.status.success(), "kubectl {args:?}: {}", text(&o));
        String::from_utf8_lossy(&o.stdout).to_string()
    }
}

/// The control plane's identities beside the nodes', in the token file (the roles
/// Kubernetes binds to them at its start are theirs).
const CLUSTER_USERS: [&str; 3] =
    ["system:kube-scheduler", "system:kube-controller-manager", "system:kube-proxy"];

/// The bearer token of `user` in a test cluster.
pub(super) fn cluster_token(user: &str) -> String {
    format!("{}-0123456789abcdef", user.replace(':', "-"))
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

/// The status of VemuLab `name` of namespace default.
pub(super) fn lab_status(k: &Kube, name: &str) -> serde_json::Value {
    let o = k.kubectl(&["-n", "default", "get", "vemulab", name, "-o", "json"], "");
    serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default()["status"].clone()
}

/// A VemuLab naming a node without an agent waits, saying so.
pub(super) fn a_lab_without_an_agent_waits(k: &Kube, log: &dyn Fn() -> String) {
    // A node without an agent: the lab waits, saying so.
    let waiting = "apiVersion: vemu.dev/v1alpha1\nkind: VemuLab\nmetadata: {name: waits, namespace: default}\nspec:\n  scenario: 'nodes: {a: {}}'\n  nodes: [w1, w3]\n";
    k.must(&["apply", "-f", "-"], waiting);
    eventually(30, "the VemuLab naming w3 is pending", || {
        lab_status(k, "waits")["phase"] == "Pending"
    });
    assert_eq!(lab_status(k, "waits")["message"], "node 'w3' has no ready vemu agent", "{}", log());
    k.must(&["-n", "default", "delete", "vemulab", "waits", "--timeout=30s"], "");
}

/// The operator as the tenant checks see it: `vemu ARGS` in its pod, its log, and what
/// machine `i` holds of labs.
pub(super) struct OperatorView<'a> {
    pub(super) vemu: &'a dyn Fn(&[&str]) -> Output,
    pub(super) log: &'a dyn Fn() -> String,
    pub(super) leftovers: &'a dyn Fn(usize) -> String,
}

/// Issue 39: a tenant (a ServiceAccount of namespace team) allowed to make VemuLabs in
/// its namespace, and nothing else.
pub(super) fn tenants_get_what_the_administrator_allows(k: &Kube, op: &OperatorView) {
    k.must(&["create", "namespace", "team"], "");
    k.must(&["-n", "team", "create", "serviceaccount", "tenant"], "");
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
        &[
            "-n",
            "team",
            "create",
            "rolebinding",
            "tenant",
            "--role=vemulabs",
            "--serviceaccount=team:tenant",
        ],
        "",
    );
    let token = k.must(&["-n", "team", "create", "token", "tenant", "--duration=2h"], "");
    k.write_config("tenant", token.trim());
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
    let ls = (op.vemu)(&["ls"]);
    assert!(!text(&ls).contains("team_"), "a refused VemuLab runs nothing: {}", text(&ls));
    for i in 0..2 {
        assert_eq!((op.leftovers)(i), "", "machine {i} holds something of a refused VemuLab");
    }
    assert!(!std::path::Path::new("/tmp/vemu-tenant-ran").exists());
    // The administrator allows `from` for the team: that VemuLab (looked at again as
    // soon as the policy is made: the operator watches policies) comes up, with the file
    // where its operator reads it (its pod's own files). Its spec changes first (while
    // still refused), so that what comes up is the new one.
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
    eventually(60, "the changed VemuLab is refused", || {
        team_status("token")["message"]
            .as_str()
            .is_some_and(|m| m.contains("nodes.a.files./etc/os.from"))
    });
    k.must(&["apply", "-f", "-"], policy);
    // (Up, or the wait times out with its status: the old refusal, or a transient
    // failure the operator recovers from, say nothing final.)
    let up = std::time::Instant::now();
    while team_status("token")["phase"] != "Up" && up.elapsed() < Duration::from_secs(90) {
        std::thread::sleep(Duration::from_millis(200));
    }
    let st = team_status("token");
    assert_eq!(st["phase"], "Up", "{st} {}", (op.log)());
    assert_eq!(
        (st["conditions"][0]["status"].as_str(), st["conditions"][0]["reason"].as_str()),
        (Some("True"), Some("Allowed")),
        "{st}"
    );
    let o = (op.vemu)(&["exec", "--lab", "team_token", "a", "--", "grep", "-c", "^ID=", "/etc/os"]);
    assert_eq!(text(&o).trim(), "1", "the node holds the allowed file: {}", text(&o));
    // Its node runs on an agent's machine, confined: the agent's token (its pod's
    // /etc/vemu/agent-token) is not there, and nothing can be unmounted to find it.
    let o = (op.vemu)(&["exec", "--lab", "team_token", "a", "--", "sh", "-c", "cat /etc/vemu/agent-token/token; umount -l /etc && echo UNMOUNTED; ls -A /etc/vemu | wc -l"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "0", "{}", text(&o));
    // The policy taken back (issue 61: it was seen at the next 20 s look, and a running
    // lab it had admitted kept running): the operator watches policies, and the lab
    // goes down.
    k.must(&["delete", "vemulabpolicy", "team-files"], "");
    eventually(30, "the VemuLab no longer admitted is taken down", || {
        team_status("token")["phase"] == "Failed"
    });
    // (Taken down as "no longer admitted", then looked at again as any VemuLab that
    // is not up: refused, naming the field.)
    let st = team_status("token");
    assert!(
        st["message"].as_str().is_some_and(|m| m.contains("refused in a tenant's lab")),
        "{st}"
    );
    assert!((op.log)().contains("no longer admitted, taken down"), "{}", (op.log)());
    let ls = (op.vemu)(&["ls"]);
    assert!(!text(&ls).contains("team_token"), "{}", text(&ls));
    k.must(&["-n", "team", "delete", "vemulab", "token", "--timeout=60s"], "");
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
    let chart = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/helm/vemu");
    let helm = |args: &[&str]| k.helm(args);
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
