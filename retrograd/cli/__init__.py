"""The `retrograd` command: check, transform (mlir-opt style pipelines), lower, draw, list, run and train IR scripts."""

from retrograd.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
