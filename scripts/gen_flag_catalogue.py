"""Regenerate the SGLang flag catalogues in service/sglang/catalogue/.

Two sources, both argparse itself:

    # from argparse dumps (server_args_<version>.json / router_args_<version>.json / smg_args_<version>.json,
    # optionally .gz)
    python scripts/gen_flag_catalogue.py --dump server_args_0.5.23.json --dump router_args_0.3.2.json

    # from the installed packages: builds a fresh parser with ServerArgs.add_cli_args / RouterArgs.add_cli_args
    python scripts/gen_flag_catalogue.py --installed sglang --installed sglang-router [--save-dump DIR]

    # smg (sgl-model-gateway) from its wheel, unpacked where this interpreter can import it
    pip download --no-deps smg==1.13.0 -d /tmp/smg && unzip -q /tmp/smg/smg-1.13.0-*.whl -d /tmp/smg/wheel
    PYTHONPATH=/tmp/smg/wheel python scripts/gen_flag_catalogue.py --installed smg --save-dump DIR

The package and version of a dump come from its file name unless --package / --version are given. A file
`<prefix>_metrics_<version>.txt` next to a dump (one Prometheus metric name a line) adds the metric names.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

from service.sglang.dump import catalogue_from_dump, dump_parser, encode_catalogue
from service.sglang.flags import ROUTER, SGLANG, SMG, FlagCatalogue, Package, catalogue_file_name

CATALOGUE_DIR = Path(__file__).resolve().parent.parent / "service" / "sglang" / "catalogue"
_DUMP_NAME = re.compile(r"(server|router|smg)_args_(\d+(?:\.\d+)+)\.json(?:\.gz)?$")
_PACKAGES: dict[str, Package] = {"server": SGLANG, "router": ROUTER, "smg": SMG}
_PREFIXES = {package: prefix for prefix, package in _PACKAGES.items()}
# How each package's parser is built, for the catalogue's provenance.
_BUILDERS = {SGLANG: "sglang.srt.server_args.ServerArgs.add_cli_args",
             ROUTER: "sglang_router.router_args.RouterArgs.add_cli_args(use_router_prefix=False)",
             SMG: "smg.router_args.RouterArgs.add_cli_args(use_router_prefix=False) of the PyPI wheel"}


def read_dump(path: Path) -> list[dict[str, Any]]:
    """Read an argparse dump (plain or gzipped JSON)."""
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    entries = json.loads(raw)
    if not isinstance(entries, list):
        raise SystemExit(f"{path}: expected a JSON list of argparse actions")
    return entries


def identify_dump(path: Path, package: str | None, version: str | None) -> tuple[Package, str]:
    """Package and version of a dump: given explicitly, or read from `server_args_<v>.json`."""
    match = _DUMP_NAME.search(path.name)
    if match is None and (package is None or version is None):
        raise SystemExit(f"{path}: cannot tell package and version from the name; pass --package and --version")
    named = package or (match.group(1) if match is not None else "server")
    found_package = named if named in _PREFIXES else _PACKAGES.get(named, SGLANG)
    return found_package, version or (match.group(2) if match is not None else "")


def read_metrics(folder: Path, package: Package, version: str) -> tuple[list[str], str | None]:
    """Metric names kept in a dump's folder (`<prefix>_metrics_<version>.txt`) and that file's name."""
    path = folder / f"{_PREFIXES[package]}_metrics_{version}.txt"
    if not path.exists():
        return [], None
    return [line.strip() for line in path.read_text().splitlines() if line.strip()], path.name


def dump_source(package: Package, version: str, dump_name: str, metrics_name: str | None) -> str:
    """The provenance a catalogue records: which dump, of which parser, and where its metric names came from."""
    if package == SGLANG or (package == ROUTER and metrics_name is None):
        return f"argparse dump {dump_name}"
    source = f"{package} {version}: argparse dump {dump_name} of {_BUILDERS[package]}"
    if metrics_name is not None:
        source += f"; metric names {metrics_name} (the Rust core's registered names found in its binary)"
    return source


def installed_parser(package: str) -> tuple[argparse.ArgumentParser, Package, str]:
    """A fresh parser built by the installed package's own add_cli_args."""
    parser = argparse.ArgumentParser()
    if package == SGLANG:
        import sglang  # type: ignore[import-not-found]  # noqa: PLC0415 - optional, heavy
        from sglang.srt.server_args import ServerArgs  # type: ignore[import-not-found]  # noqa: PLC0415

        ServerArgs.add_cli_args(parser)
        return parser, SGLANG, str(sglang.__version__)
    if package in (ROUTER, "sglang_router"):
        from importlib.metadata import version  # noqa: PLC0415

        from sglang_router.router_args import RouterArgs  # type: ignore[import-not-found]  # noqa: PLC0415

        RouterArgs.add_cli_args(parser, use_router_prefix=False)
        return parser, ROUTER, version("sglang-router")
    if package == SMG:
        from importlib.metadata import version as smg_version  # noqa: PLC0415

        from smg.router_args import RouterArgs as SmgRouterArgs  # type: ignore[import-not-found]  # noqa: PLC0415

        SmgRouterArgs.add_cli_args(parser, use_router_prefix=False)
        return parser, SMG, smg_version("smg")  # smg/version.py is not kept in step with the release
    raise SystemExit(f"unknown package {package!r}; use sglang, sglang-router or smg")


def write_catalogue(catalogue: FlagCatalogue, out_dir: Path) -> Path:
    """Write one catalogue file and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / catalogue_file_name(catalogue.package, catalogue.version)
    path.write_bytes(encode_catalogue(catalogue))
    return path


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    if not args.dump and not args.installed:
        _parser().error("give at least one --dump FILE or --installed PACKAGE")
    for dump_path in args.dump:
        package, version = identify_dump(dump_path, args.package, args.version)
        metrics, metrics_name = read_metrics(dump_path.parent, package, version)
        source = dump_source(package, version, dump_path.name.removesuffix(".gz"), metrics_name)
        catalogue = catalogue_from_dump(read_dump(dump_path), package, version, source, metrics)
        print(f"{write_catalogue(catalogue, args.out_dir)}: {len(catalogue.flags)} flags")
    for name in args.installed:
        parser, package, version = installed_parser(name)
        entries = dump_parser(parser)
        if args.save_dump:
            prefix = _PREFIXES[package]
            args.save_dump.mkdir(parents=True, exist_ok=True)
            (args.save_dump / f"{prefix}_args_{version}.json").write_text(json.dumps(entries, indent=1) + "\n")
        source = f"{package} {version} add_cli_args"
        catalogue = catalogue_from_dump(entries, package, version, source, read_metrics(
            args.save_dump or CATALOGUE_DIR, package, version)[0])
        print(f"{write_catalogue(catalogue, args.out_dir)}: {len(catalogue.flags)} flags")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dump", type=Path, action="append", default=[], help="argparse dump JSON (or .json.gz)")
    parser.add_argument("--installed", action="append", default=[],
                        help="sglang, sglang-router or smg, if importable")
    parser.add_argument("--package", choices=[SGLANG, ROUTER, SMG], help="package of the dump (default: from file name)")
    parser.add_argument("--version", help="version of the dump (default: from file name)")
    parser.add_argument("--out-dir", type=Path, default=CATALOGUE_DIR, help="where catalogue files go")
    parser.add_argument("--save-dump", type=Path, help="also write the raw dump of --installed packages here")
    return parser


if __name__ == "__main__":
    sys.exit(main())
