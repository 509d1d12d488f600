"""The images (deploy/docker), checked without building them: hadolint passes, both run as a non-root uid,
no secret can be baked in (no secret-named ENV or ARG, an allowlist build context), the bot image installs
everything but torch and Ray and its code imports without them, and the Ray image runs the versions
pyproject.toml pins."""

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.builders.deploy import DEPLOY, REPO, run_tool

DOCKER = DEPLOY / "docker"
BOT, RAY = DOCKER / "bot.Dockerfile", DOCKER / "ray.Dockerfile"
DOCKERFILES = (BOT, RAY)
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|API_KEY|PRIVATE", re.IGNORECASE)
LEFT_OUT_OF_THE_BOT = ("torch", "ray")
# What the bot image ships and must import without torch, Ray or the dev extras; workloads run in the Ray image.
BOT_PACKAGES = ("bot", "actions", "diagnosers", "playbooks")
# The local backend's Ray client (a JobSubmissionClient with timeouts): the image runs the kuberay backend,
# and actions/jobs/backends/local.py imports it only once a local job is asked for.
RAY_ONLY_MODULES = ("actions.jobs.backends.ray_jobs_client",)
BLOCKED_IMPORTS = """
import importlib, pkgutil, sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}} (not in the bot image)")
sys.meta_path.insert(0, Absent())
for package in {packages!r}:
    root = importlib.import_module(package)
    for module in pkgutil.walk_packages(root.__path__, package + "."):
        if module.name not in {skipped!r}:
            importlib.import_module(module.name)
print("imported")
"""


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per instruction, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile.read_text(encoding="utf-8"))
    lines = [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1] if " " in line else "") for line in lines]


def final_stage(dockerfile: Path) -> list[tuple[str, str]]:
    steps = instructions(dockerfile)
    last_from = max(index for index, (name, _) in enumerate(steps) if name == "FROM")
    return steps[last_from:]


def arg_defaults(dockerfile: Path) -> dict[str, str]:
    return dict(args.split("=", 1) for name, args in instructions(dockerfile) if name == "ARG" and "=" in args)


def allowlist(dockerfile: Path) -> list[str]:
    ignore = dockerfile.with_name(f"{dockerfile.name}.dockerignore").read_text(encoding="utf-8")
    return [line.strip() for line in ignore.splitlines() if line.strip() and not line.startswith("#")]


def requirements_script():
    spec = importlib.util.spec_from_file_location("deploy_requirements", DOCKER / "requirements.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dependency(name: str) -> Requirement:
    (found,) = [req for req in map(Requirement, PYPROJECT["project"]["dependencies"]) if req.name == name]
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_hadolint_finds_nothing(dockerfile):
    done = run_tool("hadolint", "--no-color", dockerfile)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_the_image_runs_as_a_non_root_uid(dockerfile):
    users = [args for name, args in final_stage(dockerfile) if name == "USER"]
    assert users, f"{dockerfile.name} would run as its base image's user"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) > 0, "a numeric uid lets runAsNonRoot check it"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda path: path.name)
def test_no_secret_can_be_baked_in(dockerfile):
    for name, args in instructions(dockerfile):
        if name in {"ENV", "ARG"}:
            assert not SECRET_NAME.search(args), f"{dockerfile.name}: {name} {args}"
    allowed = allowlist(dockerfile)
    assert allowed[0] == "*", "the build context is an allowlist: everything is ignored first"
    for name, args in instructions(dockerfile):
        if name == "COPY" and "--from=" not in args:
            sources = [word for word in args.split() if not word.startswith("--")][:-1]
            for source in sources:
                assert (REPO / source).exists(), source
                assert f"!{source}" in allowed, f"{dockerfile.name} copies {source}, which its .dockerignore drops"


def test_the_bot_image_installs_every_requirement_but_torch_and_ray():
    (install,) = [args for name, args in instructions(BOT) if name == "RUN" and "requirements.py" in args]
    assert f"--without {' '.join(LEFT_OUT_OF_THE_BOT)}" in install and "--extra postgres" in install
    listed = requirements_script().requirements(REPO / "pyproject.toml", set(LEFT_OUT_OF_THE_BOT), ["postgres"])
    expected = [
        req for req in PYPROJECT["project"]["dependencies"] if Requirement(req).name not in LEFT_OUT_OF_THE_BOT
    ] + PYPROJECT["project"]["optional-dependencies"]["postgres"]
    assert listed == expected


def test_the_requirements_script_refuses_an_unknown_extra(capsys):
    assert requirements_script().main(["--extra", "gpu"]) == 2
    assert "no optional dependencies gpu" in capsys.readouterr().err


def test_the_bot_code_imports_without_torch_ray_or_the_dev_extras():
    dev = {Requirement(req).name.replace("-", "_") for req in PYPROJECT["project"]["optional-dependencies"]["dev"]}
    blocked = set(LEFT_OUT_OF_THE_BOT) | dev
    code = BLOCKED_IMPORTS.format(blocked=blocked, packages=BOT_PACKAGES, skipped=RAY_ONLY_MODULES)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "imported", done.stderr[-2000:]


def installed_packages() -> set[str]:
    """The packages `pip install .` puts in the wheel: what setuptools finds under pyproject's include patterns."""
    from setuptools import find_namespace_packages  # noqa: PLC0415 - only these tests build package lists

    find = PYPROJECT["tool"]["setuptools"]["packages"]["find"]
    return set(find_namespace_packages(where=str(REPO), include=find["include"]))


def test_the_bot_image_copies_every_package_it_installs():
    copied = {
        args.split()[0].rstrip("/") for name, args in instructions(BOT) if name == "COPY" and "--from" not in args
    }
    top_level = {package.split(".")[0] for package in installed_packages()}
    assert top_level <= copied


def test_the_wheel_holds_every_package_of_the_product_and_no_tests():
    """`pip install .` (the bot image) installs every package under the product's roots, and nothing else."""
    installed = installed_packages()
    roots = {package for package in installed if "." not in package}
    assert roots == {*PYPROJECT["tool"]["importlinter"]["root_packages"], "playbooks"}
    on_disk = {
        ".".join(init.parent.relative_to(REPO).parts) for root in roots for init in (REPO / root).rglob("__init__.py")
    }
    assert on_disk <= installed


def test_the_ray_image_runs_the_versions_pyproject_pins():
    pins = arg_defaults(RAY)
    assert dependency("ray").specifier.contains(pins["RAY_VERSION"])
    assert dependency("mlflow").specifier.contains(pins["MLFLOW"])
    assert str(dependency("torch").specifier) == f"=={pins['TORCH']}"
    (base,) = [args for name, args in instructions(RAY) if name == "FROM"]
    assert base.startswith("rayproject/ray:${RAY_VERSION}-")
    assert "py311" in pins["RAY_VARIANT"], "the image's Python is the one the bot and CI run"
    (install,) = [args for name, args in instructions(RAY) if name == "RUN" and "pip install" in args]
    assert '"ray[train,tune]==${RAY_VERSION}"' in install, "Ray Train and Tune at the base image's Ray version"
    env = " ".join(args for name, args in final_stage(RAY) if name == "ENV")
    (copied,) = [args.split()[-1] for name, args in final_stage(RAY) if name == "COPY"]
    assert f"PYTHONPATH={Path(copied).parent}" in env, "workloads must import from any working directory"
