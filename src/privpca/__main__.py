"""``python -m privpca``: the command-line interface (:mod:`privpca.cli`)."""

from privpca.cli import main

if __name__ == "__main__":
    main()
