"""``python -m privpca.cli``: the same command line as ``python -m privpca``."""

from privpca.cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
