#!/usr/bin/env bash
# The example plugin's tests against sglang-tuner as a user installs it: a wheel built from this tree, in a
# fresh virtualenv, run from a folder outside the checkout, so nothing can be imported from the checkout.
# The contract suites (service.testing) must work from the wheel alone, and so must the built-in playbooks:
# the playbook contract runs against each, and each default scenario must load from the installed package.
#
#   scripts/test_plugin_wheel.sh     # PYTHON (default .venv/bin/python) runs pip; KEEP=1 keeps the temp folder
#
# Dependencies come from a wheelhouse of the pinned versions (constraints.txt), filled from the package
# index on the first run and whenever the pins change; later runs install offline.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
WHEELHOUSE="${SGLANG_TUNER_WHEELHOUSE:-${XDG_CACHE_HOME:-$HOME/.cache}/sglang-tuner/wheelhouse}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sglang-tuner-wheel.XXXXXX")"
if [[ "${KEEP:-0}" == 1 ]]; then echo "keeping $WORK"; else trap 'rm -rf "$WORK"' EXIT; fi
PIP=("$PYTHON" -m pip --disable-pip-version-check -q)
OFFLINE=(--no-index --find-links "$WHEELHOUSE")
started=$SECONDS
mkdir -p "$WHEELHOUSE" "$WORK/src" "$WORK/dist" "$WORK/run"

# The working tree's files (tracked and new, never ignored ones such as .venv or egg-info) in a copy, so
# building leaves the checkout untouched.
git -C "$ROOT" rev-parse --is-inside-work-tree >/dev/null 2>&1 \
    || { echo "$ROOT is not a git checkout: this script builds the wheel from its working tree" >&2; exit 2; }
(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard \
    | while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done \
    | tar --null -T - -cf -) | tar -xf - -C "$WORK/src"

# Both wheels, built by setuptools from the wheelhouse (pyproject.toml asks for setuptools>=77).
compgen -G "$WHEELHOUSE/setuptools-*.whl" >/dev/null || "${PIP[@]}" download --no-deps -d "$WHEELHOUSE" "setuptools>=77"
"${PIP[@]}" wheel --no-deps "${OFFLINE[@]}" -w "$WORK/dist" "$WORK/src" "$WORK/src/examples/plugin-example" \
    >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; exit 1; }
tuner=("$WORK"/dist/sglang_tuner-*.whl)
example=("$WORK"/dist/sglang_tuner_example_plugin-*.whl)

# A fresh venv; the outer pip installs into it (`--python`), by path, so no index can offer another build.
"$PYTHON" -m venv --without-pip "$WORK/venv"
VPY="$WORK/venv/bin/python"
install() {
    "${PIP[@]}" --python "$VPY" install --no-compile "${OFFLINE[@]}" -c "$ROOT/constraints.txt" \
        "${tuner[0]}" "${example[0]}[test]"
}
if ! install >"$WORK/install.log" 2>&1; then
    echo "filling the wheelhouse $WHEELHOUSE from the package index"
    "${PIP[@]}" wheel -w "$WHEELHOUSE" -c "$ROOT/constraints.txt" "${tuner[0]}" "${example[0]}[test]"
    rm -f "$WHEELHOUSE"/sglang_tuner-*.whl "$WHEELHOUSE"/sglang_tuner_example_plugin-*.whl
    install
fi

# Run from $WORK/run: its conftest stops the session unless sglang-tuner and the plugin load from the venv.
# Next to the plugin's tests, the playbook contract against every built-in playbook as installed.
cp -r "$WORK/src/examples/plugin-example/tests" "$WORK/run/tests"
cp "$WORK/src/tests/contract/test_playbooks.py" "$WORK/run/tests/test_builtin_playbooks.py"
cat > "$WORK/run/conftest.py" <<PY
import service
import sglang_tuner_example

for module in (service, sglang_tuner_example):
    assert module.__file__.startswith("$WORK/venv/"), f"{module.__name__} was imported from {module.__file__}"
print(f"service imported from {service.__file__}")
PY
cd "$WORK/run"
env -u PYTHONPATH "$VPY" -m pytest -q -s -p no:cacheprovider -p no:randomly tests

# `tune --playbook NAME` starts from the playbook's default scenario: each must load from the installed
# `playbooks` package (a path into the checkout, such as ../examples/, is not in the wheel).
env -u PYTHONPATH "$VPY" - <<'PY'
from importlib.resources import files
from pathlib import Path

from service.playbooks import playbook_scenario
from service.testing import make_host

installed = Path(str(files("playbooks"))).resolve()
playbooks = make_host(builtins=True).components("playbook")
casebook = {"coding-assistant", "document-qa-rag", "nightly-batch", "structured-output", "moe-at-scale"}
assert casebook <= set(playbooks), f"built-in playbooks missing from the wheel: {sorted(casebook - set(playbooks))}"
for name, playbook in sorted(playbooks.items()):
    if playbook.scenario is None:
        assert name not in casebook, f"the {name} playbook lost its default scenario"
        print(f"playbook {name}: no default scenario (tune asks for --scenario)")
        continue
    path = Path(playbook.scenario)
    assert path.is_relative_to(installed), f"the {name} playbook's scenario {path} is outside {installed}"
    scenario = playbook_scenario(playbook)
    print(f"playbook {name}: scenario {scenario.name} loads from {path.relative_to(installed.parent)}")
PY
echo "example plugin's and built-in playbooks' tests against the wheel ${tuner[0]##*/}: $((SECONDS - started))s"
