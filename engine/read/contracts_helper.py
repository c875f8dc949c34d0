"""The contracts prefetch's second process (engine.read.contracts.Prefetch):
`python -m engine.read.contracts_helper ROOT` reads every contract file of the workspace at ROOT
and writes what each gave (marshal, the per-file cache a checkpoint keeps) to its stdout."""

from __future__ import annotations

import marshal
import sys
from pathlib import Path

from engine.checkout.workspace import Workspace
from engine.read.contracts import ContractFiles, load_contracts


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        sys.stderr.write("usage: python -m engine.read.contracts_helper ROOT\n")
        return 2
    files = ContractFiles()
    load_contracts(Workspace(Path(argv[0])), None, files)
    sys.stdout.buffer.write(marshal.dumps(files.seen))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
