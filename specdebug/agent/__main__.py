"""`python -m specdebug.agent --socket PATH`: the agent process (started by the first verb)."""

import sys

from specdebug.agent.lifecycle import main

sys.exit(main())
