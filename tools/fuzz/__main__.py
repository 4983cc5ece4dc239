"""``python -m tools.fuzz``: the soak (see ``tools.fuzz.soak``)."""

import sys

from tools.fuzz.soak import main

sys.exit(main())
