"""``python -m pycudagraph``: see :mod:`pycudagraph.cli.main`."""

from .cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
