# Sourced by the other scripts (`. scripts/setup.sh`): checks for root, installs what
# vemu needs to build, run its demo and its tests (idempotently), and puts cargo on PATH.
if [ "$(id -u)" -ne 0 ]; then
    echo "vemu creates network namespaces and devices: run as root (sudo $0)" >&2
    exit 1
fi
cd "$(dirname "${BASH_SOURCE[0]}")/.."

need_pkgs=()
# clang and libbpf-dev build the kernel fast path's TC program (crates/vemu-fastpath);
# chromium and chromium-driver run the web interface's browser tests.
# nftables and iptables put the diverted paths of `divert:` in place; rt-tests'
# cyclictest measures the machine's own scheduling lateness beside the soak bench;
# openssl makes the keys of the operator test's API server.
# skopeo and umoci copy and unpack the images of image nodes (`image:`); mmdebstrap
# makes the tests' images from Debian's packages (scripts/test-images.sh).
# docker-registry serves them on loopback for the pull path's test; runc runs vemu's own
# image (scripts/image.sh) as a kubelet's container runtime would. containerd (with runc)
# and containernetworking-plugins (the bridge) are the container runtime and pod network
# of the real-kubelet test's nodes (crates/vemu/tests/machines/kubelet.rs).
# iperf (version 2), net-tools, telnet and vlan (vconfig) are what Mininet scripts run
# in their hosts (net.iperf(), ifconfig, route, arp, waitListening): vemu.mininet's
# tests run them. libxml2-utils' xmllint checks vemu test's JUnit XML against the JUnit
# schema.
for p in containerd containernetworking-plugins libxml2-utils iperf net-tools telnet vlan skopeo umoci mmdebstrap docker-registry runc openssl iperf3 iputils-ping iproute2 procps nftables iptables tcpdump tshark libpcap-dev frr bird2 babeld clang libbpf-dev chromium chromium-driver rt-tests; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_pkgs+=("$p")
done
if [ "${#need_pkgs[@]}" -gt 0 ]; then
    echo "setup: installing ${need_pkgs[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

# Rust: the machine's rustup toolchain, or Debian's cargo as a fallback.
export PATH="$HOME/.cargo/bin:$PATH"
if ! command -v cargo >/dev/null 2>&1; then
    echo "setup: installing Debian's cargo"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq cargo >/dev/null
fi

# rustfmt and clippy: the test command checks the formatting and the lints.
for tool in fmt clippy; do
    if ! cargo "$tool" --version >/dev/null 2>&1; then
        echo "setup: installing cargo $tool"
        if command -v rustup >/dev/null 2>&1; then
            rustup component add "$([ "$tool" = fmt ] && echo rustfmt || echo clippy)"
        else
            export DEBIAN_FRONTEND=noninteractive
            apt-get install -y -qq "$([ "$tool" = fmt ] && echo rustfmt || echo rust-clippy)" >/dev/null
        fi
    fi
done

# Node.js and npm build the web interface (web/, bundled into the binary).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "setup: installing Node.js and npm"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq nodejs npm >/dev/null
fi

# Python tests of the client (python/): pytest, from pip or Debian.
if ! python3 -c 'import pytest' 2>/dev/null; then
    echo "setup: installing pytest"
    python3 -m pip install -q pytest 2>/dev/null || {
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq python3-pytest >/dev/null
    }
fi
# The Kubernetes packaging's test (deploy/kubernetes) renders it with kubectl (the
# machine's; the Kubernetes project's own package elsewhere) and validates it against
# the Kubernetes schemas that kubernetes-validate carries (offline).
command -v kubectl >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kubectl >/dev/null 2>&1 || echo "setup: kubectl is not installed: the Kubernetes manifests' test will be skipped"
# The Helm chart's test (deploy/helm) renders it with helm, which Debian does not
# package: built once from the Go module proxy with the machine's Go (into ~/.local/bin).
export PATH="$HOME/.local/bin:$PATH:/usr/local/go/bin"
# Go also builds the Kubernetes API server of the operator's test (scripts/test.sh).
command -v go >/dev/null 2>&1 || { echo "setup: installing Go"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq golang-go >/dev/null; }
if ! command -v helm >/dev/null 2>&1; then
    if command -v go >/dev/null 2>&1; then
        echo "setup: building helm (Go module proxy)"
        GOBIN="$HOME/.local/bin" go install helm.sh/helm/v3/cmd/helm@v3.22.0 >/dev/null 2>&1 || echo "setup: helm could not be built: the Helm chart's test will be skipped"
    else
        echo "setup: Go is not installed, so helm is not: the Helm chart's test will be skipped"
    fi
fi
if ! python3 -c 'import kubernetes_validate, yaml' 2>/dev/null; then
    echo "setup: installing kubernetes-validate"
    python3 -m pip install -q 'kubernetes-validate==1.37.0' pyyaml
fi
# The web interface's browser tests (web/tests) drive Chromium with Selenium.
if ! python3 -c 'import selenium' 2>/dev/null; then
    echo "setup: installing selenium"
    python3 -m pip install -q selenium 2>/dev/null || {
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq python3-selenium >/dev/null
    }
fi
