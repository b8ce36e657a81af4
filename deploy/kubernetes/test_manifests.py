"""The Kubernetes packaging (deploy/kubernetes): rendered by `kubectl kustomize` and
validated, offline, against the Kubernetes API's JSON schemas (kubernetes-validate,
from PyPI, which carries them), strictly (unknown fields are errors). No cluster runs
them here: see docs/kubernetes.md."""

import copy
import os
import subprocess

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
    assert sorted(d["kind"] for d in docs) == ["DaemonSet", "Namespace"]
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
