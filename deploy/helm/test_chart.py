"""The Helm chart (deploy/helm/vemu): linted and rendered by a real `helm`, every object
validated, offline and strictly, against the Kubernetes API's JSON schemas, and held to
the Kustomize packaging (deploy/kubernetes): with the default values both render the
same pods, rights and resource definition. No cluster runs them here: see
docs/kubernetes.md."""

import copy
import json
import os
import shutil
import subprocess

import kubernetes_validate
import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.join(HERE, "vemu")
KUSTOMIZE = os.path.join(os.path.dirname(HERE), "kubernetes")
VERSIONS = ["1.30.0", "1.37.0"]


def helm():
    h = shutil.which("helm") or next((p for p in [os.path.expanduser("~/.local/bin/helm")] if os.access(p, os.X_OK)), None)
    if h is None:
        pytest.skip("helm is not installed (scripts/setup.sh builds it with Go where Go is installed)")
    return h


def render(*args, kube=VERSIONS[-1]):
    # (--kube-version: a helm built from source otherwise takes Kubernetes 1.20.)
    out = subprocess.run([helm(), "template", "vemu", CHART, "--namespace", "vemu", "--include-crds", "--kube-version", kube, *args], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(docs, kind, name=None):
    (d,) = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return d


@pytest.fixture(scope="module")
def chart():
    return render()


@pytest.fixture(scope="module")
def kustomized():
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed")
    out = subprocess.run(["kubectl", "kustomize", KUSTOMIZE], capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_helm_lint_passes():
    out = subprocess.run([helm(), "lint", "--strict", "--kube-version", VERSIONS[-1], CHART], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("version", VERSIONS)
def test_every_rendered_object_is_valid_kubernetes(version):
    chart = render(kube=version)
    kinds = ["ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "CustomResourceDefinition", "DaemonSet", "Deployment", "Role", "RoleBinding", "ServiceAccount"]
    assert sorted(d["kind"] for d in chart) == kinds
    for d in chart:
        kubernetes_validate.validate(d, version, strict=True)
        if d["kind"] not in ("ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"):
            assert d["metadata"]["namespace"] == "vemu", d["metadata"]


def test_the_chart_renders_what_kustomize_does(chart, kustomized):
    # The same pods (image, command, mounts, rights: everything under the template),
    # selectors and strategies.
    for kind in ["DaemonSet", "Deployment"]:
        h, k = one(chart, kind), one(kustomized, kind)
        assert h["metadata"]["name"] == k["metadata"]["name"]
        assert h["spec"] == k["spec"], kind
    # The same rights, bound to the same account.
    for kind in ["Role", "ClusterRole"]:
        assert one(chart, kind)["rules"] == one(kustomized, kind)["rules"]
    for kind in ["RoleBinding", "ClusterRoleBinding"]:
        h, k = one(chart, kind), one(kustomized, kind)
        assert h["subjects"] == k["subjects"]
        assert h["roleRef"]["name"] == one(chart, h["roleRef"]["kind"])["metadata"]["name"]
    # The same resource definition (the one made from the operator's types).
    for name in ["vemulabs.vemu.dev", "vemulabpolicies.vemu.dev"]:
        assert one(chart, "CustomResourceDefinition", name) == one(kustomized, "CustomResourceDefinition", name)
    for f in ["vemulab-crd.json", "vemulabpolicy-crd.json"]:
        with open(os.path.join(CHART, "crds", f)) as a, open(os.path.join(KUSTOMIZE, f)) as b:
            assert json.load(a) == json.load(b), f"crds/{f} must be a copy of deploy/kubernetes/{f}"


def test_values_reach_the_objects():
    docs = render("--set", "image.repository=r.example/v", "--set", "image.tag=1.2.3", "--set", "tokenSecret=lab-token",
                  "--set", "operator.enabled=false", "--set-json", 'agent.nodeSelector={"pool":"emu"}',
                  "--set-json", 'agent.tolerations=[{"key":"emu","operator":"Exists","effect":"NoSchedule"}]',
                  "--set", "agent.resources.limits.memory=8Gi", "--namespace", "labs")
    assert sorted(d["kind"] for d in docs) == ["CustomResourceDefinition", "CustomResourceDefinition", "DaemonSet"]
    ds = one(docs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert c["image"] == "r.example/v:1.2.3"
    assert pod["nodeSelector"] == {"vemu.dev/agent": "true", "pool": "emu"}  # (helm merges maps with the defaults)
    assert pod["tolerations"] == [{"key": "emu", "operator": "Exists", "effect": "NoSchedule"}]
    assert c["resources"] == {"limits": {"memory": "8Gi"}}
    assert {v["name"]: v for v in pod["volumes"]}["token"]["secret"]["secretName"] == "lab-token"
    assert ds["metadata"]["namespace"] == "labs"
    for version in VERSIONS:
        kubernetes_validate.validate(ds, version, strict=True)


def test_a_digest_pins_the_image():
    digest = "sha256:" + "0123456789abcdef" * 4
    docs = render("--set", "image.repository=r.example/v", "--set", f"image.digest={digest}")
    for kind in ["DaemonSet", "Deployment"]:
        (c,) = one(docs, kind)["spec"]["template"]["spec"]["containers"]
        assert c["image"] == f"r.example/v@{digest}"


def test_the_validation_catches_mistakes(chart):
    ds = one(chart, "DaemonSet")
    wrong = copy.deepcopy(ds)
    wrong["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "120"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong, VERSIONS[-1], strict=True)


@pytest.mark.parametrize("setting, field", [
    (["--set", "agent.terminationGracePeriodSeconds=soon"], "terminationGracePeriodSeconds"),
    (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
    (["--set", "agnet.nodeSelector.a=b"], "agnet"),
    (["--set", "tokenSecret="], "tokenSecret"),
    (["--set", "image.digest=latest"], "digest"),
])
def test_wrong_values_are_refused_naming_them(setting, field):
    out = subprocess.run([helm(), "template", "vemu", CHART, "--kube-version", VERSIONS[-1], *setting], capture_output=True, text=True)
    assert out.returncode != 0 and field in out.stderr, out.stderr
