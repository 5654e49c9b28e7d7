"""``python -m msresnet VERB ...``: the same as the console script ``msresnet``."""

import sys

from msresnet.cli import main

sys.exit(main())
