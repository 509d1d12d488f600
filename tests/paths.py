"""Files the tests run or read from this checkout: the `trainbot` console script of this interpreter's
environment, the example bundles and the user's documentation."""

import sys
from pathlib import Path

TRAINBOT = Path(sys.executable).with_name("trainbot")
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples" / "bundles"
DOCS = ROOT / "docs"
