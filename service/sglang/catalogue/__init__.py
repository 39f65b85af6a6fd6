"""Shipped flag catalogues (JSON data, one file per package version); see docs/flags.md."""
