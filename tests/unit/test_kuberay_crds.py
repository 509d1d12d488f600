"""The KubeRay CRDs the RayJob tests validate against come from a folder a person names (TRAINBOT_KUBERAY_CRDS),
as `kubectl get crd rayjobs.ray.io rayclusters.ray.io -o yaml` writes them (one List) or one file per CRD;
without them the tests skip, saying how to supply them."""

import pytest
import yaml

from tests.standins import crd_schema
from tests.standins.crd_schema import CRDS_ENV, RAYJOB, SHARED_CRDS, find_crd, missing_reason, problems, require_crd

# The CRDs are over 1 MB each: the C emitter writes them in a fraction of the pure-Python one's time.
DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# A RayJob the CRD accepts, and the same with a misspelt field the API server would drop.
RAYJOB_MANIFEST = {
    "apiVersion": "ray.io/v1",
    "kind": "RayJob",
    "metadata": {"name": "tiny"},
    "spec": {"entrypoint": "python train.py", "clusterSelector": {"ray.io/cluster": "shared"}},
}


@pytest.fixture(scope="module")
def known_crds() -> dict[str, dict]:
    """The RayJob and RayCluster CRDs from wherever this run finds them, for the test to write out anew."""
    return {kind: find_crd(require_crd(kind)) for kind in ("RayJob", "RayCluster")}


@pytest.fixture(autouse=True)
def fresh_cache():
    yield
    crd_schema.crds_in.cache_clear()


def as_kubectl_writes(crds: dict[str, dict]) -> str:
    """One `kind: List` document holding every CRD, the shape `kubectl get crd A B -o yaml` prints."""
    return yaml.dump({"apiVersion": "v1", "kind": "List", "items": list(crds.values()), "metadata": {}}, Dumper=DUMPER)


def test_a_kubectl_list_file_in_the_named_folder_supplies_both_crds(tmp_path, monkeypatch, known_crds):
    (tmp_path / "crds.yaml").write_text(as_kubectl_writes(known_crds))
    monkeypatch.setenv(CRDS_ENV, str(tmp_path))
    assert find_crd("RayJob") == known_crds["RayJob"]
    assert find_crd("RayCluster") == known_crds["RayCluster"]
    assert problems(require_crd(RAYJOB), RAYJOB_MANIFEST) == []
    misspelt = {**RAYJOB_MANIFEST, "spec": {**RAYJOB_MANIFEST["spec"], "entrypont": "x"}}
    assert [str(problem) for problem in problems(RAYJOB, misspelt)] == ["spec.entrypont: unknown field"]


def test_one_file_per_crd_in_the_named_folder_works_too(tmp_path, monkeypatch, known_crds):
    for kind, crd in known_crds.items():
        (tmp_path / f"{kind.lower()}.yml").write_text(yaml.dump(crd, Dumper=DUMPER))
    (tmp_path / "notes.txt").write_text("not a CRD")
    monkeypatch.setenv(CRDS_ENV, str(tmp_path))
    assert find_crd("RayJob") == known_crds["RayJob"]
    assert find_crd("RayCluster") == known_crds["RayCluster"]


def test_without_the_crds_a_test_skips_saying_how_to_supply_them(tmp_path, monkeypatch):
    monkeypatch.setenv(CRDS_ENV, str(tmp_path / "absent"))
    assert find_crd(RAYJOB) is None
    with pytest.raises(pytest.skip.Exception) as skipped:
        require_crd(RAYJOB)
    reason = str(skipped.value)
    assert reason == missing_reason(RAYJOB)
    assert f"no RayJob CRD in {tmp_path / 'absent'}" in reason
    assert "kubectl get crd rayjobs.ray.io rayclusters.ray.io -o yaml" in reason
    assert f"{CRDS_ENV}=DIR" in reason


def test_without_the_variable_the_shared_checkouts_crds_are_read(monkeypatch):
    monkeypatch.delenv(CRDS_ENV, raising=False)
    assert crd_schema.crds_dir() == SHARED_CRDS
