import sys

from iostack.cli import main

sys.exit(main(program=True))
