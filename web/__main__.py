"""``python -m web [--out DIR]``: build the course's static site and slides (web/build.py)."""
import argparse
import sys
from pathlib import Path

from web.build import DEFAULT_OUT, build

parser = argparse.ArgumentParser(prog="python -m web", description="Build the course's site (English and "
                                 "Korean) and slides from the committed notebooks, offline.")
parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"the folder to build into (default {DEFAULT_OUT})")
args = parser.parse_args()
try:
    build(args.out)
except FileExistsError as error:
    sys.exit(f"python -m web: {error}")
