"""Reproduce a deploytool conversion finding with the converter alone (no deploytool needed).

    pip install ...              # the line in README.md / issue.md pins every package this file imports
    python reproduce_convert.py  # exit 1: the conversion fails as reported; 0: it converts here

Written into a bug bundle by deploytool: `convert()` below is the exact call deploytool made (the converter, its
options, the calibration samples in calibration.npz for int8), on the model in model/. It runs in the folder
`converted/` beside this file and writes there. The finding's error is in bundle.json (`convert.error`).
"""

import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
META = json.loads((HERE / "bundle.json").read_text())
CONVERT = META["convert"]
SOURCE = str(HERE / CONVERT["source"])
OUT = str(HERE / "converted" / CONVERT["output"])
INPUTS = [(i["name"], i["dtype"], tuple(i["shape"])) for i in CONVERT["inputs"]]
CALIBRATION = None
if (HERE / "calibration.npz").exists():
    with np.load(HERE / "calibration.npz", allow_pickle=False) as _z:
        CALIBRATION = {name: _z[name] for name in _z.files}


def convert():
    raise NotImplementedError  # RECIPE: deploytool writes the converter step's call here


def main():
    work = HERE / "converted"
    work.mkdir(exist_ok=True)
    os.chdir(work)
    expected = CONVERT.get("error") or ""
    print(f"{CONVERT['converter']}: converting model/{Path(SOURCE).name} ({CONVERT['quantize']})")
    try:
        convert()
    except (Exception, SystemExit) as e:  # a converter that gives up may call sys.exit
        traceback.print_exc()
        got = type(e).__name__
        if isinstance(e, SystemExit) and e.code in (None, 0):
            print("the converter exited early with status 0 and no error")
            return 2
        if not expected or got == expected or expected in CONVERT.get("any_error_classes", ()):
            print(f"REPRODUCED: {got}: {str(e).strip().splitlines()[0] if str(e).strip() else '(no message)'}")
            return 1
        print(f"a different error than reported ({got}, reported {expected})")
        return 2
    print(f"not reproduced: the conversion succeeded here ({OUT})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
