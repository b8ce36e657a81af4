"""The Kubernetes packaging (deploy/kubernetes): rendered by `kubectl kustomize` and
validated, offline, against the Kubernetes API's JSON schemas (kubernetes-validate,
from PyPI, which carries them), strictly (unknown fields are errors). No cluster runs
them here: see docs/kubernetes.md."""

import copy
import os
import subprocess

import jsonschema
import kubernetes_validate
import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
# The oldest and the newest Kubernetes the manifests are meant for.
VERSIONS = ["1.30.0", "1.37.0"]


@pytest.fixture(scope="module")
def docs():
    if subprocess.run(["sh", "-c", "command -v kubectl"], capture_output=True).returncode != 0:
        pytest.skip("kubectl is not installed (scripts/setup.sh installs it where a package exists)")
    out = subprocess.run(["kubectl", "kustomize", HERE], capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def validate(doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_object_is_valid_kubernetes(docs, version):
    kinds = ["ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "CustomResourceDefinition", "DaemonSet", "Deployment", "Namespace", "Role", "RoleBinding", "ServiceAccount"]
    assert sorted(d["kind"] for d in docs) == kinds
    for d in docs:
        validate(d, version)


def test_the_validation_catches_mistakes(docs):
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    wrong = copy.deepcopy(ds)
    wrong["spec"]["template"]["spec"]["hostNetwrok"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(wrong, VERSIONS[-1])
    wrong = copy.deepcopy(ds)
    wrong["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "14790"
    with pytest.raises(kubernetes_validate.ValidationError):
        validate(wrong, VERSIONS[-1])


def test_the_agent_is_what_vemu_agent_needs(docs):
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert ds["metadata"]["namespace"] == "vemu"
    assert pod["hostNetwork"] is True and ds["spec"]["updateStrategy"]["type"] == "OnDelete"
    (c,) = pod["containers"]
    assert c["securityContext"]["privileged"] is True
    # It listens on the machine's own address, with the token from the secret.
    assert c["command"][:4] == ["vemu", "agent", "--listen", "$(VEMU_AGENT_ADDRESS)"]
    env = {e["name"]: e for e in c["env"]}
    assert env["VEMU_AGENT_ADDRESS"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    token = c["command"][c["command"].index("--token-file") + 1]
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert token.startswith(mounts["token"]["mountPath"] + "/") and volumes["token"]["secret"]["secretName"] == "vemu-agent-token"
    # The labs' state is the machine's, and so are the namespaces it pins.
    for name, path in [("run-vemu", "/run/vemu"), ("run-netns", "/run/netns"), ("cgroup", "/sys/fs/cgroup")]:
        assert mounts[name]["mountPath"] == path and volumes[name]["hostPath"]["path"] == path
    assert mounts["run-netns"]["mountPropagation"] == "Bidirectional"
    assert c["ports"][0]["containerPort"] == 14790
    assert c["image"].endswith("/vemu:latest")


def test_the_operator_runs_one_controller_with_the_agents_token_and_just_the_rights_it_needs(docs):
    dep = next(d for d in docs if d["kind"] == "Deployment")
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["command"] == ["vemu-operator", "run"] and c["image"].endswith("/vemu:latest")
    env = {e["name"]: e for e in c["env"]}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert env["VEMU_AGENT_TOKEN_FILE"]["value"] == mounts["agent-token"]["mountPath"] + "/token"
    assert volumes["agent-token"]["secret"]["secretName"] == "vemu-agent-token"
    # Not privileged: it only talks to the agents and the API server.
    assert "privileged" not in c["securityContext"] and c["securityContext"]["allowPrivilegeEscalation"] is False
    sa = pod["serviceAccountName"]
    rules = {(d["kind"], tuple(r["resources"])): r["verbs"] for d in docs if d["kind"] in ("Role", "ClusterRole") for r in d["rules"]}
    assert rules[("ClusterRole", ("vemulabs",))] == ["get", "list", "watch", "patch", "update"]
    assert rules[("ClusterRole", ("vemulabs/status",))] == ["get", "patch", "update"]
    # The administrator's policies: read, never written (docs/kubernetes.md, trust model).
    assert rules[("ClusterRole", ("vemulabpolicies",))] == ["get", "list", "watch"]
    assert rules[("Role", ("pods",))] == ["get", "list", "watch"]
    for b in (d for d in docs if d["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": "vemu"}]


def crd_schema(docs, name="vemulabs.vemu.dev"):
    crd = next(d for d in docs if d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"] == name)
    (v,) = crd["spec"]["versions"]
    assert crd["spec"]["group"] == "vemu.dev" and v["name"] == "v1alpha1"
    assert (v.get("subresources") == {"status": {}}) == (name == "vemulabs.vemu.dev")
    return v["schema"]["openAPIV3Schema"]


def test_a_policy_is_cluster_scoped_and_allows_only_known_features(docs):
    crd = next(d for d in docs if d["kind"] == "CustomResourceDefinition" and d["metadata"]["name"] == "vemulabpolicies.vemu.dev")
    assert crd["spec"]["scope"] == "Cluster"
    schema = crd_schema(docs, "vemulabpolicies.vemu.dev")
    policy = {"apiVersion": "vemu.dev/v1alpha1", "kind": "VemuLabPolicy", "metadata": {"name": "p"}, "spec": {"namespaces": ["team"], "allow": ["from", "trace"]}}
    jsonschema.validate(policy, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**policy, "spec": {"allow": ["root"]}}, schema)


def test_the_example_vemulab_fits_the_crd_and_its_scenario_is_valid(docs):
    schema = crd_schema(docs)
    with open(os.path.join(HERE, "examples", "vemulab-chain.yaml")) as f:
        lab = yaml.safe_load(f)
    jsonschema.validate(lab, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**lab, "spec": {"nodes": ["w1"]}}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**lab, "spec": {**lab["spec"], "nodes": "w1"}}, schema)
    vemu = os.environ.get("VEMU")
    if not vemu:
        pytest.skip("VEMU (the vemu binary) is not set")
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "vemulab-chain-scenario.yaml")
    with open(path, "w") as f:
        f.write(lab["spec"]["scenario"])
    out = subprocess.run([vemu, "check", path, "--machines", "w1=10.0.0.11,w2=10.0.0.12"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "machine w1" in out.stdout and "cut:" in out.stdout
