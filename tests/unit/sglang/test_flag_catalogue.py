"""The shipped catalogues hold every flag of every reference argparse dump, and the script regenerates them."""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys

import pytest

from service.sglang import catalogue_versions, load_catalogue, router_catalogue, versions_with
from service.sglang.dump import catalogue_from_dump, dump_parser, encode_catalogue
from service.sglang.flags import ROUTER, UnknownVersionError

from .conftest import DUMPS, ROOT

SGLANG_VERSIONS = ["0.5.2", "0.5.9", "0.5.15", "0.5.20", "0.5.23"]


def _dump(name: str) -> list[dict]:
    return json.loads(gzip.decompress((DUMPS / name).read_bytes()))


def test_catalogues_ship_for_every_casebook_version():
    assert list(catalogue_versions()) == SGLANG_VERSIONS
    assert catalogue_versions(ROUTER) == ("0.3.2",)


@pytest.mark.parametrize("version", SGLANG_VERSIONS)
def test_every_dumped_flag_is_in_the_catalogue_with_its_facts(version):
    catalogue = load_catalogue(version)
    for entry in _dump(f"server_args_{version}.json.gz"):
        if entry["action"] == "_HelpAction":
            continue
        for spelling in entry["flags"]:
            spec = catalogue.get(spelling)
            assert spec is not None, f"{spelling} missing from {version}"
            assert spec.dest == entry["dest"]
            assert (spec.choices or None) == (entry["choices"] or None)
            if entry["default"] != "==SUPPRESS==":
                assert spec.default == entry["default"]


def test_router_catalogue_holds_every_router_flag():
    catalogue = router_catalogue()
    dumped = {s for e in _dump("router_args_0.3.2.json.gz") if e["action"] != "_HelpAction" for s in e["flags"]}
    assert dumped == set(catalogue.spellings())
    assert catalogue.get("--policy").choices == ["random", "round_robin", "cache_aware", "power_of_two", "manual"]


def test_catalogue_records_types_and_deprecations_users_meet():
    new, old = load_catalogue("0.5.23"), load_catalogue("0.5.2")
    assert new.get("--max-prefill-tokens").type == "human_readable_int"
    assert old.get("--max-prefill-tokens").type == "int"
    assert new.get("--enable-dp-attention").deprecated
    assert new.get("--enable-dp-attention").replacement == "--attn-dp-size"
    assert old.get("--enable-ep-moe").deprecated
    assert new.get("--enable-hicache").flag == "--enable-hierarchical-cache"
    assert new.get("--bucket-time-to-first-token").nargs == "+"
    assert new.get("--extra-metric-labels").type == "json"
    assert versions_with("--cuda-graph-max-bs") == ["0.5.2", "0.5.9", "0.5.15"]


def test_unknown_version_names_the_known_ones():
    with pytest.raises(UnknownVersionError, match="0.5.2, 0.5.9, 0.5.15, 0.5.20, 0.5.23"):
        load_catalogue("0.5.99")


def test_the_script_regenerates_the_shipped_catalogues_byte_for_byte(tmp_path):
    dumps = [arg for path in sorted(DUMPS.glob("*.json.gz")) for arg in ("--dump", str(path))]
    subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_flag_catalogue.py"), *dumps, "--out-dir", str(tmp_path)],
                   check=True, capture_output=True, cwd=ROOT)
    shipped = ROOT / "service" / "sglang" / "catalogue"
    for path in sorted(tmp_path.glob("*.json")):
        assert path.read_bytes() == (shipped / path.name).read_bytes(), path
    assert len(list(tmp_path.glob("*.json"))) == 7


class DeprecatedStoreTrueAction(argparse.Action):
    """Stands in for sglang's action of the same name (arg_groups/argparse_actions.py)."""

    def __init__(self, option_strings, dest, new_flag=None, nargs=0, default=False, **kwargs):
        self.new_flag = new_flag
        super().__init__(option_strings, dest, nargs=nargs, default=default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)


def test_a_live_argparse_parser_becomes_a_catalogue():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tp-size", "--tensor-parallel-size", type=int, default=1)
    parser.add_argument("--policy", choices=["round_robin", "cache_aware"], default="cache_aware")
    parser.add_argument("--worker-urls", nargs="*", default=[])
    parser.add_argument("--fast", action=argparse.BooleanOptionalAction)
    parser.add_argument("--old-switch", action=DeprecatedStoreTrueAction, new_flag="--fast")
    catalogue = catalogue_from_dump(dump_parser(parser), "sglang", "9.9.9", "test parser")
    assert [spec.flag for spec in catalogue.flags] == ["--tp-size", "--policy", "--worker-urls", "--fast", "--old-switch"]
    assert catalogue.get("--tensor-parallel-size").type == "int"
    assert catalogue.get("--no-fast").flag == "--fast"
    assert catalogue.get("--old-switch").deprecated and catalogue.get("--old-switch").replacement == "--fast"
    assert catalogue.get("--worker-urls").is_list
    assert b'"flag":"--policy"' in encode_catalogue(catalogue)
