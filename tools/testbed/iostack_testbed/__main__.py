import sys

from iostack_testbed.cli import main

sys.exit(main())
