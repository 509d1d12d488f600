"""Files the tests run or read from this checkout: the `trainbot` console script of this interpreter's
environment and the example bundles."""

import sys
from pathlib import Path

TRAINBOT = Path(sys.executable).with_name("trainbot")
EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "bundles"
